package portal_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// TestNothingSecretInTheLog runs the portal's flows at debug level, with
// the delivery worker logging beside the server: sign-ins right and
// wrong, an invitation and a reset by email, a second factor set up and
// used with a code and a recovery code, a key made. No password, session
// token, CSRF token, link token, TOTP secret or code, recovery code or key
// secret may appear in the log, nor in the audit log.
func TestNothingSecretInTheLog(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{
		Configure: func(c *config.Config) { c.LogLevel = "debug" },
		Clock:     apitest.NewClock(time.Now().Truncate(time.Second)),
	})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	var secrets []string
	keep := func(s ...string) {
		for _, v := range s {
			if v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	cookies := func(c *portaltest.Client) {
		u, _ := url.Parse(env.URL)
		for _, ck := range c.HTTP.Jar.Cookies(u) {
			keep(ck.Value)
		}
	}
	org := seed.Merchant.OrganizationID
	owner, m := portaltest.SignedIn(t, env, org, "Owner", auth.PaymentsView, auth.AccountsView)
	keep(m.Password)
	cookies(owner)
	stranger := portaltest.NewClient(t, env)
	stranger.SignIn(m.Email, "a wrong guess of a password").Want(t, http.StatusUnauthorized)
	keep("a wrong guess of a password")

	members := owner.Get("/portal/members")
	keep(members.CSRF(t))
	owner.Post("/portal/members", members.CSRF(t), url.Values{"email": {"invitee@example.com"}, "role": {"Member"}}).Want(t, http.StatusSeeOther)
	invitation := portaltest.Link(t, mail.Wait("invitee@example.com", "invited"))
	keep(strings.TrimPrefix(invitation, "/portal/invitations/"))
	guest := portaltest.NewClient(t, env)
	form := guest.Get(invitation)
	guest.Post(invitation, form.CSRF(t), url.Values{"name": {"Invitee"}, "password": {"guest secret words"}}).Want(t, http.StatusSeeOther)
	keep("guest secret words")
	cookies(guest)

	guest.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {"invitee@example.com"}})
	reset := portaltest.Link(t, mail.Wait("invitee@example.com", "Reset"))
	keep(strings.TrimPrefix(reset, "/portal/password-reset/"))
	page := guest.Get(reset)
	guest.Post(reset, page.CSRF(t), url.Values{"password": {"the reset password value"}}).Want(t, http.StatusSeeOther)
	keep("the reset password value")

	setup := owner.Get("/portal/account/two-factor")
	secret := between(setup.Body, `id="secret">`, "<")
	keep(secret)
	code, err := totp.GenerateCodeCustom(secret, env.Clock.Now(), totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	codes := owner.Post("/portal/account/two-factor", setup.CSRF(t), url.Values{"code": {code}}).Want(t, http.StatusOK)
	var recovery []string
	for _, part := range strings.Split(codes.Body, "<li><code>")[1:] {
		recovery = append(recovery, part[:strings.Index(part, "<")])
	}
	keep(recovery...)
	second := portaltest.NewClient(t, env)
	second.SignIn(m.Email, m.Password)
	step := second.Get("/portal/sign-in/two-factor")
	second.Post("/portal/sign-in/two-factor", step.CSRF(t), url.Values{"recoveryCode": {recovery[0]}}).Want(t, http.StatusSeeOther)
	cookies(second)

	keys := owner.Get("/portal/keys")
	made := owner.Post("/portal/keys", keys.CSRF(t), url.Values{"name": {"Logged"}, "permissions": {auth.AccountsView},
		"idempotencyKey": {formKey(t, keys)}}).Want(t, http.StatusCreated)
	keep(secretIn.FindStringSubmatch(made.Body)[1])

	logs := env.Log.String()
	for _, want := range []string{`"path":"/portal/sign-in"`, `"path":"/portal/invitations/:token"`, `"path":"/portal/password-reset/:token"`, "message delivered"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the log lacks %s, so the flow did not run as meant:\n%s", want, logs)
		}
	}
	var audit []string
	if err := env.App.DB.Select(&audit, `SELECT actor || ' ' || action || ' ' || detail || ' ' || address FROM audit_log`); err != nil {
		t.Fatal(err)
	}
	all := logs + strings.Join(audit, "\n")
	for _, s := range secrets {
		for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s)), url.QueryEscape(s)} {
			if strings.Contains(all, form) {
				i := strings.Index(all, form)
				t.Errorf("the log or the audit log holds %q: …%s…", s, all[max(0, i-120):min(len(all), i+len(form)+40)])
			}
		}
	}
	if strings.Contains(logs, `"`+code+`"`) || strings.Contains(logs, "password=") || strings.Contains(logs, "csrf=") {
		t.Error("the log holds a TOTP code or a form's field")
	}
}
