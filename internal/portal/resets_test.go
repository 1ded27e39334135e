package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// A reset request does the same work whether or not the email has a
// sign-in: the same rows in the same tables (the delivery worker decides
// later, and sends nothing for an unknown email). At most 3 an hour per
// email, known or not, and 20 an hour per address.
func TestResetRequestsWorkAlikeAndAreLimited(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	m := portaltest.NewMember(t, env, seed.Merchant.OrganizationID, "Member")
	c := portaltest.NewClient(t, env)
	tables := []string{"outbox", "reset_requests", "password_resets", "sign_in_failures", "audit_log", "people", "sessions"}
	counts := func() map[string]int {
		n := map[string]int{}
		for _, table := range tables {
			var k int
			if err := env.App.DB.Get(&k, `SELECT count(*) FROM `+table); err != nil {
				t.Fatal(err)
			}
			n[table] = k
		}
		return n
	}
	request := func(email string) map[string]int {
		before := counts()
		c.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {email}}).Want(t, http.StatusOK)
		after := counts()
		for _, table := range tables {
			after[table] -= before[table]
		}
		return after
	}
	known, unknown := request(m.Email), request("nobody-"+m.Email)
	for _, table := range tables {
		if known[table] != unknown[table] {
			t.Errorf("%s: %d rows for a known email, %d for an unknown one", table, known[table], unknown[table])
		}
	}
	if known["outbox"] != 1 || known["password_resets"] != 0 {
		t.Errorf("a request wrote %v, want one outbox row and no reset link yet", known)
	}

	// The worker: a link for the known email, nothing for the other.
	mail := portaltest.StartMailbox(t, env)
	portaltest.Link(t, mail.Wait(m.Email, "Reset"))
	deadline := time.Now().Add(10 * time.Second)
	var cancelled int
	for cancelled == 0 && time.Now().Before(deadline) {
		if err := env.App.DB.Get(&cancelled, `SELECT count(*) FROM outbox WHERE recipient = $1 AND cancelled_at IS NOT NULL`, "nobody-"+m.Email); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cancelled != 1 {
		t.Error("the request for an unknown email was not cancelled by the worker")
	}
	for _, got := range mail.Received() {
		if strings.HasPrefix(got.To[0], "nobody-") {
			t.Errorf("a reset email went to an email without a sign-in: %s", got.To[0])
		}
	}

	for _, email := range []string{m.Email, "nobody-" + m.Email} {
		request(email)
		request(email)
		c.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {email}}).
			Want(t, http.StatusTooManyRequests).Has(t, "enough reset links")
	}
	other := portaltest.NewClient(t, env)
	for i := range 20 {
		other.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {"someone" + string(rune('a'+i)) + "@example.com"}}).
			Want(t, http.StatusOK)
	}
	limited := other.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {"one.more@example.com"}}).
		Want(t, http.StatusTooManyRequests).Has(t, "from your network")
	if limited.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	env.Clock.Advance(61 * time.Minute)
	other.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {"one.more@example.com"}}).Want(t, http.StatusOK)
}

// resetLinks waits for n reset emails to email and answers their links,
// oldest first.
func resetLinks(t *testing.T, mail *portaltest.Mailbox, email string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var links []string
		for _, got := range mail.Received() {
			if strings.EqualFold(got.To[0], email) && strings.Contains(got.Subject, "Reset") {
				links = append(links, portaltest.Link(t, got))
			}
		}
		if len(links) >= n {
			return links
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d reset emails to %s within 10 s", n, email)
	return nil
}

// A reset through one link ends the person's other open links; a password
// change on the account page ends them all.
func TestResetLinksEndedByResetAndChange(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	m := portaltest.NewMember(t, env, seed.Merchant.OrganizationID, "Member")
	c := portaltest.NewClient(t, env)
	for range 2 {
		c.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {m.Email}}).Want(t, http.StatusOK)
	}
	links := resetLinks(t, mail, m.Email, 2)
	c.Submit(links[0], links[0], url.Values{"password": {"a new and long password 42"}}).WantRedirect(t, "/portal/sign-in")
	c.Get(links[1]).Want(t, http.StatusNotFound)

	c.Submit("/portal/password-reset", "/portal/password-reset", url.Values{"email": {m.Email}}).Want(t, http.StatusOK)
	late := resetLinks(t, mail, m.Email, 3)[2]
	c.SignIn(m.Email, "a new and long password 42").WantRedirect(t, "/portal/")
	c.Submit("/portal/account", "/portal/account/password", url.Values{"currentPassword": {"a new and long password 42"},
		"password": {"yet another long password 7"}}).WantRedirect(t, "/portal/account?changed=password")
	c.Get(late).Want(t, http.StatusNotFound)
}

// A wrong current password on the account page counts as a failed
// sign-in of the person: the fifth locks the email (the account page and
// signing in both answer 429).
func TestCurrentPasswordFailuresCount(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	c, m := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Member", auth.PaymentsView)
	change := func() portaltest.Page {
		return c.Submit("/portal/account", "/portal/account/password", url.Values{"currentPassword": {"a guess of the password"},
			"password": {"a brand new password 42"}})
	}
	for range 5 {
		change().Want(t, http.StatusBadRequest).ErrorBeside(t, "currentPassword", "not your current password")
	}
	change().Want(t, http.StatusTooManyRequests)
	portaltest.NewClient(t, env).SignIn(m.Email, m.Password).Want(t, http.StatusTooManyRequests)
}
