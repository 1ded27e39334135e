package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// "Confirm it's you" (issue 36, item 4): a session left open does not
// replace the second factor. Signing in opens a 10-minute window in which
// the factor is set up; after it, the page sends to the confirmation
// (password and current code; a wrong one is a failed sign-in), a code
// posted without it replaces nothing, and the window lapses again 10
// minutes after confirming. Each change is emailed to the person.
func TestConfirmBeforeChangingTheSecondFactor(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	c, m := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Owner", auth.PaymentsView)
	setup := c.Get("/portal/account/two-factor").Want(t, http.StatusOK) // just signed in: nothing asked
	first := between(setup.Body, `id="secret">`, "<")
	code := func(secret string) string {
		s, err := totp.GenerateCodeCustom(secret, env.Clock.Now(), totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c.Post("/portal/account/two-factor", setup.CSRF(t), url.Values{"code": {code(first)}}).Want(t, http.StatusOK)
	if n := mail.Wait(m.Email, "second factor was changed"); !strings.Contains(n.Text, "was set up") || !strings.Contains(n.Text, "/portal/password-reset") {
		t.Errorf("the notice of a new second factor:\n%s", n.Text)
	}
	secret := func() []byte {
		var sealed []byte
		if err := env.App.DB.Get(&sealed, `SELECT totp_secret FROM people WHERE lower(email) = lower($1)`, m.Email); err != nil {
			t.Fatal(err)
		}
		return sealed
	}
	before := secret()

	// Eleven minutes later, someone at the open browser.
	env.Clock.Advance(11 * time.Minute)
	confirm := "/portal/account/confirm?next=" + url.QueryEscape("/portal/account/two-factor")
	c.Get("/portal/account/two-factor").WantRedirect(t, confirm)
	refused := c.Post("/portal/account/two-factor", setup.CSRF(t), url.Values{"code": {code(first)}}).Want(t, http.StatusForbidden).
		Has(t, "Confirm it's you", "Nothing was changed")
	if string(secret()) != string(before) {
		t.Fatal("the second factor changed without confirming")
	}
	failures := func() int {
		var n int
		if err := env.App.DB.Get(&n, `SELECT count(*) FROM sign_in_failures WHERE email = lower($1)`, m.Email); err != nil {
			t.Fatal(err)
		}
		return n
	}
	page := c.Get(confirm).Want(t, http.StatusOK).Has(t, `for="password"`, `for="code"`, `name="next" value="/portal/account/two-factor"`)
	c.Post("/portal/account/confirm", page.CSRF(t), url.Values{"password": {"not the password at all"}, "code": {code(first)},
		"next": {"/portal/account/two-factor"}}).Want(t, http.StatusBadRequest).ErrorBeside(t, "password", "not your password")
	if failures() != 1 {
		t.Errorf("a wrong password on the confirmation: %d failed sign-ins, want 1", failures())
	}
	c.Post("/portal/account/confirm", refused.CSRF(t), url.Values{"password": {m.Password}, "code": {"000000"},
		"next": {"/portal/account/two-factor"}}).Want(t, http.StatusBadRequest).ErrorBeside(t, "code", "not right")
	c.Post("/portal/account/confirm", page.CSRF(t), url.Values{"password": {m.Password}, "code": {code(first)},
		"next": {"https://evil.example/portal/"}}).WantRedirect(t, "/portal/account")

	// Confirmed: the factor is replaced, and the person told.
	setup = c.Get("/portal/account/two-factor").Want(t, http.StatusOK)
	second := between(setup.Body, `id="secret">`, "<")
	c.Post("/portal/account/two-factor", setup.CSRF(t), url.Values{"code": {code(second)}}).Want(t, http.StatusOK).Has(t, "recovery codes")
	if string(secret()) == string(before) {
		t.Fatal("the confirmed replacement did not replace the factor")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(lastMail(mail, m.Email, "second factor was changed"), "replaced") {
		if time.Now().After(deadline) {
			t.Fatal("no notice of the replaced second factor")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The window lasts 10 minutes from the confirmation.
	env.Clock.Advance(9*time.Minute + 50*time.Second)
	c.Get("/portal/account/two-factor").Want(t, http.StatusOK)
	env.Clock.Advance(11 * time.Second) // (the database keeps microseconds, rounded)
	c.Get("/portal/account/two-factor").WantRedirect(t, confirm)
}

// lastMail is the text of the last mail to whose subject holds subject
// ("" before there is one).
func lastMail(mail *portaltest.Mailbox, to, subject string) string {
	text := ""
	for _, got := range mail.Received() {
		if len(got.To) == 1 && strings.EqualFold(got.To[0], to) && strings.Contains(got.Subject, subject) {
			text = got.Text
		}
	}
	return text
}

// A key made right after signing in asks nothing more; eleven minutes
// later the form answers the confirmation page and makes nothing, and
// after confirming it makes the key.
func TestConfirmBeforeMakingAKey(t *testing.T) {
	t.Parallel()
	env, seed := newOwnEnv(t)
	c, m := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Owner", auth.AccountsView)
	keys := c.Get("/portal/keys")
	c.Post("/portal/keys", keys.CSRF(t), url.Values{"name": {"Right away"}, "permissions": {auth.AccountsView},
		"idempotencyKey": {formKey(t, keys)}}).Want(t, http.StatusCreated)

	env.Clock.Advance(11 * time.Minute)
	keys = c.Get("/portal/keys").Want(t, http.StatusOK)
	c.Post("/portal/keys", keys.CSRF(t), url.Values{"name": {"Later"}, "permissions": {auth.AccountsView},
		"idempotencyKey": {formKey(t, keys)}}).Want(t, http.StatusForbidden).
		Has(t, "Confirm it's you", `name="next" value="/portal/keys"`)
	if strings.Contains(c.Get("/portal/keys").Has(t, "Right away").Body, "Later") {
		t.Fatal("a key was made without confirming")
	}
	page := c.Get("/portal/account/confirm?next=%2Fportal%2Fkeys")
	if strings.Contains(page.Body, `for="code"`) {
		t.Error("the confirmation asks a code of a person without a second factor")
	}
	c.Post("/portal/account/confirm", page.CSRF(t), url.Values{"password": {m.Password}, "next": {"/portal/keys"}}).WantRedirect(t, "/portal/keys")
	keys = c.Get("/portal/keys")
	c.Post("/portal/keys", keys.CSRF(t), url.Values{"name": {"Later"}, "permissions": {auth.AccountsView},
		"idempotencyKey": {formKey(t, keys)}}).Want(t, http.StatusCreated)
}

// A password change is emailed to the person, as a second-factor change is.
func TestPasswordChangeNotice(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	c, m := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Member")
	page := c.Get("/portal/account")
	c.Post("/portal/account/password", page.CSRF(t), url.Values{"currentPassword": {m.Password}, "password": {"a brand new password"}}).
		WantRedirect(t, "/portal/account?changed=password")
	n := mail.Wait(m.Email, "password was changed")
	if !strings.Contains(n.Text, "/portal/password-reset") || strings.Contains(n.Text, "a brand new password") {
		t.Errorf("the notice of a password change:\n%s", n.Text)
	}
}
