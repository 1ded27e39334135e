package portal_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

// The CSRF token of a signed-in form is bound to the session (issue 36,
// item 17): a cookie-and-token pair planted in a signed-in browser, from
// another browser before or after signing in, is refused and changes
// nothing; the browser's own pages keep working, the sign-in form too.
func TestCSRFTokenBoundToTheSession(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	org := seed.Merchant.OrganizationID
	victim, m := portaltest.SignedIn(t, env, org, "Member")
	attacker := portaltest.NewClient(t, env)
	before := attacker.Get("/portal/sign-in").CSRF(t)
	signedIn, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	theirs := signedIn.Get("/portal/account").CSRF(t)
	u, _ := url.Parse(env.URL)
	plant := func(from *portaltest.Client) {
		for _, ck := range from.HTTP.Jar.Cookies(u) {
			if ck.Name == "payreq_csrf" {
				victim.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/"}})
			}
		}
	}
	change := url.Values{"currentPassword": {m.Password}, "password": {"the attacker's password"}}
	for name, tc := range map[string]struct {
		from  *portaltest.Client
		token string
	}{
		"a pair from a browser not signed in":   {attacker, before},
		"a pair from another signed-in browser": {signedIn, theirs},
	} {
		plant(tc.from)
		if got := victim.Post("/portal/account/password", tc.token, change); got.Status != http.StatusForbidden {
			t.Errorf("%s on a signed-in form: %d, want 403", name, got.Status)
		}
	}
	portaltest.NewClient(t, env).SignIn(m.Email, m.Password).WantRedirect(t, "/portal/") // the password is unchanged

	// Its own page (the cookie planted last stays its CSRF cookie) works.
	page := victim.Get("/portal/account").Want(t, http.StatusOK)
	victim.Post("/portal/account/password", page.CSRF(t), url.Values{"currentPassword": {m.Password}, "password": {"the owner's new password"}}).
		WantRedirect(t, "/portal/account?changed=password")
}
