package portal_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/processor"
)

// TestCollectAtATerminalInChromium collects an invoice at the simulator's
// terminals in headless Chromium: the form from the invoice's page, the
// waiting page, which reloads itself without a script until the worker
// records the outcome, and every outcome (approved by chip with its
// receipt, declined, cancelled from the waiting page, timed out), each
// passing axe-core at 390 and 1280 px.
func TestCollectAtATerminalInChromium(t *testing.T) {
	t.Parallel()
	env := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	owner := portaltest.NewMember(t, env, org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	chip := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalChip, "Front counter")
	decline := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalDecline, "Declines")
	slow := addTerminal(t, env, m.MIDs[0].Id, processor.SimTerminalSlow, "Back counter")
	inv := m.MustCreate(t, m.Body("TILL-1", "90.00"))
	b := browsertest.Start(t, env.URL, 3*time.Minute)
	c := chromium{t: t, b: b, base: env.URL}
	run, open, submit, want := c.run, c.open, c.submit, c.has

	open("/portal/sign-in")
	run("sign in", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", owner.Password))
	submit(`main button[type="submit"]`)

	open("/portal/terminals")
	want("terminals", "Front counter", "Online")
	c.check("terminals")

	// checkWaiting runs axe on the waiting page, opened again before each
	// width: it reloads itself every 2 s.
	checkWaiting := func(path string) {
		t.Helper()
		for _, w := range []int64{390, 1280} {
			open(path)
			want("waiting", "Waiting for the card")
			for _, v := range b.Axe(t, w) {
				t.Errorf("waiting: %s", v)
			}
		}
	}
	// collect sends the form of the invoice's page for the terminal and
	// answers the waiting page's path.
	collect := func(terminalID uuid.UUID, amount string) string {
		t.Helper()
		open("/portal/invoices/" + inv.Id.String())
		submit(`a[href$="/terminal"]`)
		want("collect", "Collect invoice TILL-1 at a terminal")
		run("choose", chromedp.Click("#terminal-"+terminalID.String()), chromedp.SetValue("#amount", amount))
		submit(`main form button[type="submit"]`)
		want("waiting", "Waiting for the card")
		return strings.TrimPrefix(c.read(chromedp.Evaluate[string]("location.href")), env.URL)
	}
	// outcome works the pending payments and waits for the page to
	// reload itself onto the outcome.
	outcome := func(state string) {
		t.Helper()
		workTerminals(t, env)
		// Read as the page may be reloading itself: a read that finds the
		// document gone mid-reload is tried again.
		page := func() string {
			s, _ := chromedp.Run(c.b.Tab, chromedp.OuterHTML("html"))
			return s
		}
		for deadline := time.Now().Add(15 * time.Second); !strings.Contains(page(), state); {
			if time.Now().After(deadline) {
				t.Fatalf("the waiting page never showed %q:\n%s", state, page())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	open("/portal/invoices/" + inv.Id.String() + "/terminal")
	c.check("the collect form")
	at := collect(chip.ID, "50.00")
	checkWaiting(at)
	outcome("Payment approved")
	want("approved", "$50.00", "ending 1111", "Chip", "VISA CREDIT", "A0000000031010")
	c.check("approved")

	collect(decline.ID, "10.00")
	outcome("Payment declined")
	want("declined", "Insufficient funds")
	c.check("declined")

	collect(slow.ID, "10.00")
	submit(`form[action$="/cancel"] button`)
	want("cancelled", "Payment cancelled")
	c.check("cancelled")

	env.App.Terminals.Timeout = 50 * time.Millisecond
	collect(slow.ID, "10.00")
	outcome("Payment timed out")
	c.check("timed out")

	for _, v := range b.Violations() {
		t.Errorf("Content-Security-Policy refused %s", v)
	}
	for _, e := range b.Errors() {
		t.Errorf("browser: %s", e)
	}
	for _, u := range b.Foreign() {
		t.Errorf("fetched from elsewhere: %s", u)
	}
}
