package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"
)

// CSRF is the one defence of the HTML fronts (the portal, the sign-up
// page) against forms posted from elsewhere. Every visitor gets a cookie
// of random bytes of its own (payreq_csrf; __Host-payreq_csrf over https,
// HttpOnly, SameSite=Lax) and every form a token derived from it (an HMAC
// under the server's key, so that a cookie planted by someone else makes
// no token without the key). Once the visitor is signed in, the token is
// bound to the session too (the HMAC covers the session cookie's value):
// a cookie-and-token pair planted from another browser, or kept from
// before signing in, is refused on a signed-in form. Before signing in
// (the sign-in, reset and sign-up forms) the cookie alone binds it.
// A POST must carry its cookie's token in the
// form's csrf field, always, and must not say it comes from another origin
// (Sec-Fetch-Site, Origin); otherwise it is refused with ErrForgery before
// its handler runs.
//
// Echo's CSRF middleware (v4.16) does not fit: a POST with
// Sec-Fetch-Site: same-origin (or none) passes it without a token, and no
// setting turns that off (AllowSecFetchSiteFunc is asked about same-site
// and cross-site only); it never compares Origin with the service's own;
// and a page opened by such a browser gets a constant in place of a token.
//
// The pay page keeps its own signed form token: it carries the one-time
// attempt id a charge is deduplicated by, and needs no cookie.
type CSRF struct {
	key     []byte
	origin  string // scheme://host[:port] of the public URL
	cookie  string
	session string // the portal's session cookie
	secure  bool
}

// SessionCookie is the name of the portal's session cookie, over https
// or not: CSRF tokens are bound to its value.
func SessionCookie(secure bool) string {
	if secure {
		return "__Host-payreq_session" // Secure, Path=/, no Domain
	}
	return "payreq_session"
}

// CSRFField is the name of the form field that carries the token.
const CSRFField = "csrf"

// ErrForgery is a POST refused: no token, not its cookie's, or sent from
// another origin. A front answers it with 403 and changes nothing.
var ErrForgery = errors.New("web: form refused (CSRF)")

// NewCSRF is the check for the service at publicURL, whose origin is the
// only one forms come from, with key (the same on every instance).
func NewCSRF(publicURL string, key []byte) *CSRF {
	x := &CSRF{key: key, cookie: "payreq_csrf"}
	if u, err := url.Parse(publicURL); err == nil {
		x.origin = u.Scheme + "://" + u.Host
		x.secure = u.Scheme == "https"
	}
	if x.secure {
		x.cookie = "__Host-" + x.cookie // Secure, Path=/, no Domain
	}
	x.session = SessionCookie(x.secure)
	return x
}

const (
	csrfTokenKey   = "web.csrf"
	csrfSessionKey = "web.csrf.session"
)

// CSRFToken is the token the request's page puts in its forms' csrf
// field ("" outside Protect): bound to the session the answer leaves
// the browser with (BindCSRF).
func CSRFToken(c echo.Context) string {
	token, _ := c.Get(csrfTokenKey).(func(session string) string)
	if token == nil {
		return ""
	}
	session, _ := c.Get(csrfSessionKey).(string)
	return token(session)
}

// BindCSRF tells Protect the session cookie's value the answer sets
// ("" when it clears it), so that the page's forms carry the token the
// browser's next POST needs.
func BindCSRF(c echo.Context, session string) { c.Set(csrfSessionKey, session) }

// Protect checks every POST, and gives the request a cookie when it has
// none and its pages a token (CSRFToken). The front reads a POST's form
// (bounded, with its own answers to a form it cannot read) before it;
// an unread form carries no token. State changes only on POST in the
// fronts: no other method reaches a handler that changes anything.
func (x *CSRF) Protect(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		secret := ""
		if ck, err := c.Cookie(x.cookie); err == nil && len(ck.Value) == 43 {
			secret = ck.Value
		}
		session := ""
		if ck, err := c.Cookie(x.session); err == nil {
			session = ck.Value
		}
		if r.Method == http.MethodPost {
			sent := r.PostForm.Get(CSRFField)
			if x.foreign(r) || secret == "" || !hmac.Equal([]byte(sent), []byte(x.token(secret, session))) {
				return ErrForgery
			}
		}
		if secret == "" {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			secret = base64.RawURLEncoding.EncodeToString(b)
			c.SetCookie(&http.Cookie{Name: x.cookie, Value: secret, Path: "/", HttpOnly: true, Secure: x.secure,
				SameSite: http.SameSiteLaxMode})
		}
		c.Set(csrfTokenKey, func(session string) string { return x.token(secret, session) })
		BindCSRF(c, session)
		return next(c)
	}
}

// foreign: the browser says the request comes from another site or
// origin. Pages go out with Referrer-Policy: no-referrer, under which
// browsers send "Origin: null"; Sec-Fetch-Site then says where from.
// A request with neither header (no browser, or a very old one) still
// needs its token.
func (x *CSRF) foreign(r *http.Request) bool {
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	return (site != "" && site != "same-origin" && site != "none") ||
		(origin == "null" && site != "same-origin") ||
		(origin != "" && origin != "null" && origin != x.origin)
}

// token is the form token of the cookie's secret, bound to session
// when there is one.
func (x *CSRF) token(secret, session string) string {
	m := hmac.New(sha256.New, x.key)
	m.Write([]byte("payreq form\x00" + secret))
	if session != "" {
		m.Write([]byte("\x00session\x00" + session))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
