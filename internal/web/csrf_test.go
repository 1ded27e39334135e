package web_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/web"
)

// front is a form behind Protect: GET answers the token its page would
// carry, POST the handler's 303, or 403 when Protect refuses; changed
// counts the POSTs the handler took.
type front struct {
	e       *echo.Echo
	changed int
}

const key = "the deployment's key, 32 bytes.."

func newFront(publicURL, key string) *front {
	f := &front{e: echo.New()}
	csrf := web.NewCSRF(publicURL, []byte(key))
	readForm := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Request().Method == http.MethodPost {
				if err := c.Request().ParseForm(); err != nil {
					return err
				}
			}
			return next(c)
		}
	}
	f.e.HTTPErrorHandler = func(err error, c echo.Context) {
		if errors.Is(err, web.ErrForgery) {
			_ = c.String(http.StatusForbidden, "refused")
			return
		}
		_ = c.String(http.StatusInternalServerError, err.Error())
	}
	f.e.GET("/form", func(c echo.Context) error { return c.String(http.StatusOK, web.CSRFToken(c)) }, csrf.Protect)
	f.e.POST("/form", func(c echo.Context) error {
		f.changed++
		return c.NoContent(http.StatusSeeOther)
	}, readForm, csrf.Protect)
	return f
}

func (f *front) do(method string, form url.Values, cookies []*http.Cookie, header http.Header) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, "/form", body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, ck := range cookies {
		r.AddCookie(ck)
	}
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	f.e.ServeHTTP(w, r)
	return w
}

// open is a browser opening the form: its cookie and the form's token.
func (f *front) open(t *testing.T) ([]*http.Cookie, string) {
	t.Helper()
	w := f.do(http.MethodGet, nil, nil, nil)
	cookies := w.Result().Cookies()
	if w.Code != http.StatusOK || len(cookies) != 1 || w.Body.Len() == 0 {
		t.Fatalf("GET: %d, cookies %v, token %q", w.Code, cookies, w.Body)
	}
	return cookies, w.Body.String()
}

func TestCSRFCookie(t *testing.T) {
	for publicURL, want := range map[string]struct {
		name   string
		secure bool
	}{
		"http://127.0.0.1:8080":      {"payreq_csrf", false},
		"https://payreq.example.com": {"__Host-payreq_csrf", true},
	} {
		cookies, token := newFront(publicURL, key).open(t)
		ck := cookies[0]
		if ck.Name != want.name || ck.Secure != want.secure || !ck.HttpOnly || ck.Path != "/" ||
			ck.SameSite != http.SameSiteLaxMode || ck.Domain != "" {
			t.Errorf("%s: cookie %+v", publicURL, ck)
		}
		if strings.Contains(token, ck.Value) {
			t.Errorf("%s: the token shows the cookie's value", publicURL)
		}
	}
	// A visitor who has the cookie keeps it, and its token.
	f := newFront("http://127.0.0.1:8080", key)
	cookies, token := f.open(t)
	again := f.do(http.MethodGet, nil, cookies, nil)
	if len(again.Result().Cookies()) != 0 || again.Body.String() != token {
		t.Errorf("a second visit: cookies %v, token %q (first %q)", again.Result().Cookies(), again.Body, token)
	}
}

func TestCSRFRefusesFormsNotFromThePage(t *testing.T) {
	const publicURL = "https://payreq.example.com"
	browser := func(origin, site string) http.Header {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		if site != "" {
			h.Set("Sec-Fetch-Site", site)
		}
		return h
	}
	// Another visitor of this deployment, and one of another deployment.
	_, otherToken := newFront(publicURL, key).open(t)
	foreignCookies, foreignToken := newFront(publicURL, "another deployment's key, 32 b..").open(t)
	cases := []struct {
		name    string
		token   func(own string, cookie string) string
		cookies func(own []*http.Cookie) []*http.Cookie
		header  http.Header
		want    int
	}{
		{name: "its own token, from its own page", header: browser("null", "same-origin"), want: http.StatusSeeOther},
		{name: "its own token, the public origin", header: browser(publicURL, ""), want: http.StatusSeeOther},
		{name: "its own token, no browser headers", want: http.StatusSeeOther},
		{name: "its own token, typed in (Sec-Fetch-Site: none)", header: browser("", "none"), want: http.StatusSeeOther},
		{name: "no token", token: func(string, string) string { return "" }, want: http.StatusForbidden},
		{name: "no token, from its own page", token: func(string, string) string { return "" }, header: browser("null", "same-origin"),
			want: http.StatusForbidden},
		{name: "no token, the public origin", token: func(string, string) string { return "" }, header: browser(publicURL, "same-origin"),
			want: http.StatusForbidden},
		{name: "a wrong token", token: func(own, _ string) string { return strings.Repeat("x", len(own)) }, want: http.StatusForbidden},
		{name: "the cookie's value as the token", token: func(_, cookie string) string { return cookie }, want: http.StatusForbidden},
		{name: "no cookie", cookies: func([]*http.Cookie) []*http.Cookie { return nil }, want: http.StatusForbidden},
		{name: "another visitor's token", token: func(string, string) string { return otherToken }, want: http.StatusForbidden},
		{name: "a cookie and its token made under another key", token: func(string, string) string { return foreignToken },
			cookies: func([]*http.Cookie) []*http.Cookie { return foreignCookies }, want: http.StatusForbidden},
		{name: "another site", header: browser("https://evil.example", "cross-site"), want: http.StatusForbidden},
		{name: "a sibling site", header: browser("https://shop.payreq.example.com", "same-site"), want: http.StatusForbidden},
		{name: "another origin, old browser", header: browser("https://evil.example", ""), want: http.StatusForbidden},
		{name: "http of the same host", header: browser("http://payreq.example.com", ""), want: http.StatusForbidden},
		{name: "Origin null without Sec-Fetch-Site", header: browser("null", ""), want: http.StatusForbidden},
		{name: "Origin null from another site", header: browser("null", "cross-site"), want: http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFront(publicURL, key)
			cookies, token := f.open(t)
			if tc.token != nil {
				token = tc.token(token, cookies[0].Value)
			}
			if tc.cookies != nil {
				cookies = tc.cookies(cookies)
			}
			form := url.Values{"name": {"something"}}
			if token != "" {
				form.Set(web.CSRFField, token)
			}
			w := f.do(http.MethodPost, form, cookies, tc.header)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.want, w.Body)
			}
			if wantChanged := map[bool]int{true: 1}[tc.want == http.StatusSeeOther]; f.changed != wantChanged {
				t.Errorf("the handler ran %d times, want %d", f.changed, wantChanged)
			}
		})
	}
}

// Once signed in (a session cookie), a form's token is bound to the
// session: a cookie-and-token pair planted from another browser, signed
// in or not, is refused; the page's own token works, and before signing
// in (no session cookie) the cookie alone binds it, as before.
func TestCSRFBoundToTheSession(t *testing.T) {
	const publicURL = "http://127.0.0.1:8080"
	f := newFront(publicURL, key)
	session := &http.Cookie{Name: web.SessionCookie(false), Value: "the victim's session token"}
	other := &http.Cookie{Name: web.SessionCookie(false), Value: "the attacker's session token"}
	open := func(cookies ...*http.Cookie) ([]*http.Cookie, string) {
		w := f.do(http.MethodGet, nil, cookies, nil)
		return append(w.Result().Cookies(), cookies...), w.Body.String()
	}
	post := func(token string, cookies ...*http.Cookie) int {
		return f.do(http.MethodPost, url.Values{web.CSRFField: {token}}, cookies, nil).Code
	}
	anonymous, anonymousToken := open()
	if post(anonymousToken, anonymous...) != http.StatusSeeOther {
		t.Error("a form before signing in was refused")
	}
	victim, victimToken := open(anonymous[0], session)
	if victimToken == anonymousToken {
		t.Error("the token does not change with the session")
	}
	if got := post(victimToken, victim...); got != http.StatusSeeOther {
		t.Errorf("the signed-in page's own token: %d", got)
	}
	attacker, _ := open()
	_, attackerSignedIn := open(attacker[0], other)
	for name, token := range map[string]string{
		"a pair from before signing in":     anonymousToken,
		"a planted pair, not signed in":     f.tokenOf(t, attacker[0]),
		"a planted pair of its own session": attackerSignedIn,
	} {
		cookie := anonymous[0]
		if token != anonymousToken {
			cookie = attacker[0]
		}
		if got := post(token, cookie, session); got != http.StatusForbidden {
			t.Errorf("%s on a signed-in form: %d, want 403", name, got)
		}
	}
}

// tokenOf is the token a page gives the holder of cookie, not signed in.
func (f *front) tokenOf(t *testing.T, cookie *http.Cookie) string {
	t.Helper()
	return f.do(http.MethodGet, nil, []*http.Cookie{cookie}, nil).Body.String()
}
