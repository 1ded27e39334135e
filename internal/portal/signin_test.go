package portal_test

import (
	"context"
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

// A wrong password and an unknown email get the same 401 page; the
// right one goes home with a session cookie that is HttpOnly, SameSite
// Lax, Path=/; signing out ends the session in the database.
func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	m := portaltest.NewMember(t, env, seed.Merchant.OrganizationID, "Member", auth.PaymentsView)
	c := portaltest.NewClient(t, env)
	c.Get("/portal/keys").WantRedirect(t, "/portal/sign-in")
	wrong := c.SignIn(m.Email, m.Password+"x").Want(t, http.StatusUnauthorized)
	unknown := c.SignIn("nobody-"+m.Email, m.Password).Want(t, http.StatusUnauthorized)
	if strings.Contains(wrong.Body, m.Password) || !strings.Contains(wrong.Body, `value="`+m.Email+`"`) {
		t.Errorf("the form again must keep the email and never the password:\n%s", wrong.Body)
	}
	msg := "The email or the password is not right."
	wrong.Has(t, msg)
	unknown.Has(t, msg)

	ok := c.SignIn(strings.ToUpper(m.Email), m.Password).WantRedirect(t, "/portal/")
	ck := ok.Header.Get("Set-Cookie")
	for _, want := range []string{"payreq_session=", "Path=/", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(ck, want) {
			t.Errorf("session cookie %q lacks %s", ck, want)
		}
	}
	home := c.Get("/portal/").Want(t, http.StatusOK).Has(t, seed.Merchant.OrganizationID.String()[:0], "Sign out")
	for h, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY",
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"} {
		if got := home.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	var sessions int
	count := func() int {
		if err := env.App.DB.Get(&sessions, `SELECT count(*) FROM sessions s JOIN memberships m ON m.id = s.membership_id WHERE m.id = $1`, m.MembershipID); err != nil {
			t.Fatal(err)
		}
		return sessions
	}
	if count() != 1 {
		t.Fatalf("%d sessions, want 1", sessions)
	}
	c.Post("/portal/sign-out", home.CSRF(t), nil).WantRedirect(t, "/portal/sign-in")
	if count() != 0 {
		t.Fatal("signing out left the session in the database")
	}
	c.Get("/portal/").WantRedirect(t, "/portal/sign-in")
	c.Get("/portal/audit") // a Member: redirected to sign in, nothing else
}

// Five failures of one email lock it (429, whether the email has an
// account or not); the person is told by email, and a password reset
// lifts the lock. Twenty failures from one IPv6 /64 refuse that network.
func TestSignInLimits(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	m := portaltest.NewMember(t, env, seed.Merchant.OrganizationID, "Member", auth.PaymentsView)
	c := portaltest.NewClient(t, env)
	for range 5 {
		c.SignIn(m.Email, "wrong password 1234").Want(t, http.StatusUnauthorized)
	}
	locked := c.SignIn(m.Email, m.Password).Want(t, http.StatusTooManyRequests).Has(t, "Try again in 15 minutes")
	if locked.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	for range 5 {
		c.SignIn("ghost@nowhere.example.com", "wrong password 1234")
	}
	c.SignIn("ghost@nowhere.example.com", "wrong password 1234").Want(t, http.StatusTooManyRequests)

	notice := mail.Wait(m.Email, "paused")
	if !strings.Contains(notice.Text, "/portal/password-reset") {
		t.Errorf("the lockout notice does not say how to reset:\n%s", notice.Text)
	}
	c.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {m.Email}}).Want(t, http.StatusOK)
	link := portaltest.Link(t, mail.Wait(m.Email, "Reset"))
	newPassword := "a new and long password 42"
	c.Submit(link, link, url.Values{"password": {newPassword}}).WantRedirect(t, "/portal/sign-in")
	c.SignIn(m.Email, newPassword).WantRedirect(t, "/portal/")

	// The address limit counts a /64 as one: twenty failures from
	// different addresses of one network, then the network is refused.
	ctx := context.Background()
	for i := range 20 {
		_, err := env.App.People.SignIn(ctx, "someone"+string(rune('a'+i))+"@example.com", "wrong password 1234", "2001:db8:1:2::/64", "")
		if err == nil {
			t.Fatal("a wrong password signed in")
		}
	}
	if _, err := env.App.People.SignIn(ctx, m.Email, newPassword, "2001:db8:1:2::/64", ""); err == nil || !strings.Contains(err.Error(), "network") {
		t.Fatalf("the 21st sign-in from the /64: %v, want refused", err)
	}
	if _, err := env.App.People.SignIn(ctx, m.Email, newPassword, "2001:db8:1:3::/64", ""); err != nil {
		t.Fatalf("another /64: %v", err)
	}
}

// The reset answer is the same page whatever the email; a used or
// expired link is a 404; a weak password a 400 beside its field.
func TestPasswordReset(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	m := portaltest.NewMember(t, env, seed.Merchant.OrganizationID, "Member")
	c := portaltest.NewClient(t, env)
	known := c.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {m.Email}}).Want(t, http.StatusOK)
	unknown := c.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {"nobody@example.com"}}).Want(t, http.StatusOK)
	strip := func(s string) string { return s[:strings.Index(s, "<main")] + s[strings.Index(s, "</main>"):] }
	if strings.ReplaceAll(known.Body, known.CSRF(t), "") != strings.ReplaceAll(unknown.Body, unknown.CSRF(t), "") {
		t.Errorf("the answers differ:\n%s\n---\n%s", strip(known.Body), strip(unknown.Body))
	}
	link := portaltest.Link(t, mail.Wait(m.Email, "Reset"))
	page := c.Get(link).Want(t, http.StatusOK)
	c.Post(link, page.CSRF(t), url.Values{"password": {"password1234"}}).Want(t, http.StatusBadRequest).ErrorBeside(t, "password", "too easy to guess")
	c.Post(link, page.CSRF(t), url.Values{"password": {"short"}}).Want(t, http.StatusBadRequest).ErrorBeside(t, "password", "at least 12")
	local := m.Email[:strings.Index(m.Email, "@")]
	c.Post(link, page.CSRF(t), url.Values{"password": {"xx" + local + "yy"}}).Want(t, http.StatusBadRequest).ErrorBeside(t, "password", "email")
	c.Post(link, page.CSRF(t), url.Values{"password": {"an entirely fine password"}}).WantRedirect(t, "/portal/sign-in")
	c.Get(link).Want(t, http.StatusNotFound)
	c.Post(link, page.CSRF(t), url.Values{"password": {"another fine password"}}).Want(t, http.StatusNotFound)

	c.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {m.Email}})
	deadline := time.Now().Add(10 * time.Second)
	var late string
	for late == "" && time.Now().Before(deadline) {
		n := 0
		for _, got := range mail.Received() {
			if got.To[0] == m.Email && strings.Contains(got.Subject, "Reset") {
				if n++; n == 2 {
					late = portaltest.Link(t, got)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	env.Clock.Advance(31 * time.Minute)
	c.Get(late).Want(t, http.StatusNotFound)
}

// A person with a second factor signs in in two steps: a code computed
// here from the secret the setup page shows (RFC 6238), each code once;
// a recovery code works once. An Owner can require a second factor: a
// member without one is sent to set it up first.
func TestTwoFactor(t *testing.T) {
	t.Parallel()
	env, seed := newOwnEnv(t)
	org := seed.Merchant.OrganizationID
	c, m := portaltest.SignedIn(t, env, org, "Owner", auth.PaymentsView)
	setup := c.Get("/portal/account/two-factor").Want(t, http.StatusOK).Has(t, `src="data:image/png;base64,`)
	secret := between(setup.Body, `id="secret">`, "<")
	code := func(at time.Time) string {
		s, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c.Post("/portal/account/two-factor", setup.CSRF(t), url.Values{"code": {"000000"}}).Want(t, http.StatusBadRequest).ErrorBeside(t, "code", "not right")
	codes := c.Post("/portal/account/two-factor", setup.CSRF(t), url.Values{"code": {code(env.Clock.Now())}}).Want(t, http.StatusOK)
	recovery := strings.Split(between(codes.Body, `<li><code>`, "</code>"), "<")[0]
	if strings.Count(codes.Body, "<li><code>") != 10 || recovery == "" {
		t.Fatalf("want 10 recovery codes:\n%s", codes.Body)
	}

	env.Clock.Advance(time.Minute)
	second := portaltest.NewClient(t, env)
	second.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/sign-in/two-factor")
	second.Get("/portal/").WantRedirect(t, "/portal/sign-in/two-factor")
	step := second.Get("/portal/sign-in/two-factor").Want(t, http.StatusOK)
	now := code(env.Clock.Now())
	second.Post("/portal/sign-in/two-factor", step.CSRF(t), url.Values{"code": {now}}).WantRedirect(t, "/portal/")
	second.Get("/portal/").Want(t, http.StatusOK)

	// The same code again is refused; a recovery code works once.
	third := portaltest.NewClient(t, env)
	third.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/sign-in/two-factor")
	step = third.Get("/portal/sign-in/two-factor")
	third.Post("/portal/sign-in/two-factor", step.CSRF(t), url.Values{"code": {now}}).Want(t, http.StatusUnauthorized)
	third.Post("/portal/sign-in/two-factor", step.CSRF(t), url.Values{"recoveryCode": {strings.ToUpper(recovery)}}).WantRedirect(t, "/portal/")
	fourth := portaltest.NewClient(t, env)
	fourth.SignIn(m.Email, m.Password)
	step = fourth.Get("/portal/sign-in/two-factor")
	fourth.Post("/portal/sign-in/two-factor", step.CSRF(t), url.Values{"recoveryCode": {recovery}}).Want(t, http.StatusUnauthorized)

	// The Owner requires it; a member without one must set it up first.
	member, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	members := c.Get("/portal/members").Want(t, http.StatusOK)
	c.Post("/portal/members/two-factor", members.CSRF(t), url.Values{"required": {"on"}}).WantRedirect(t, "/portal/members?done=rule")
	member.Get("/portal/").WantRedirect(t, "/portal/account/two-factor")
	member.Get("/portal/account/two-factor").Want(t, http.StatusOK).Has(t, "requires a second factor")
	admin, _ := portaltest.SignedIn(t, env, org, "Admin", auth.PaymentsView)
	admin.Get("/portal/account/two-factor")
	page := admin.Get("/portal/account/two-factor")
	admin.Post("/portal/members/two-factor", page.CSRF(t), url.Values{"required": {"off"}}).Want(t, http.StatusForbidden)
	c.Get("/portal/audit").Has(t, "two-factor set up", "two-factor rule changed", "recovery code used")
}

func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i+len(start):]
	if j := strings.Index(s, end); j >= 0 {
		return s[:j]
	}
	return s
}

// A session ends after 30 idle minutes, and after 12 hours however busy.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	env, seed := newOwnEnv(t)
	c, _ := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Member")
	env.Clock.Advance(29 * time.Minute)
	c.Get("/portal/").Want(t, http.StatusOK)
	env.Clock.Advance(29 * time.Minute)
	c.Get("/portal/").Want(t, http.StatusOK)
	env.Clock.Advance(30*time.Minute + time.Second) // idle 30 minutes
	c.Get("/portal/").WantRedirect(t, "/portal/sign-in")

	busy, _ := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Member")
	for elapsed := 15 * time.Minute; elapsed < 12*time.Hour; elapsed += 15 * time.Minute {
		env.Clock.Advance(15 * time.Minute)
		busy.Get("/portal/").Want(t, http.StatusOK)
	}
	env.Clock.Advance(15*time.Minute + time.Second) // past 12 hours, seen 15 minutes ago
	busy.Get("/portal/").WantRedirect(t, "/portal/sign-in")
}

// Changing the password needs the current one (400 beside it otherwise)
// and ends the person's other sessions, not this one.
func TestChangePassword(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	c, m := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Member")
	other := portaltest.NewClient(t, env)
	other.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/")
	page := c.Get("/portal/account").Want(t, http.StatusOK)
	c.Post("/portal/account/password", page.CSRF(t), url.Values{"currentPassword": {"not it at all"}, "password": {"a brand new password"}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "currentPassword", "not your current password")
	c.Post("/portal/account/password", page.CSRF(t), url.Values{"currentPassword": {m.Password}, "password": {"a brand new password"}}).
		WantRedirect(t, "/portal/account?changed=password")
	c.Get("/portal/account?changed=password").Want(t, http.StatusOK).Has(t, "other sessions were ended")
	other.Get("/portal/").WantRedirect(t, "/portal/sign-in")
	portaltest.NewClient(t, env).SignIn(m.Email, "a brand new password").WantRedirect(t, "/portal/")
}
