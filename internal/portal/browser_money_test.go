package portal_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/webhook"
)

// TestMerchantDayInChromium is a merchant's day in headless Chromium: an
// invoice made and sent on the portal's new invoice page, paid on its pay
// page in the browser; in the portal, the card payments,
// the sale, part of it refunded after its confirmation (a refund of too
// much refused first);
// the day settled (payment.Store's settlement), the deposit seen on the
// deposits page, in the chart, and on its own page; a webhook endpoint
// added (a form refused first), pinged, its attempts listed, its secret
// rotated; the events and an event's page. Every page and state passes
// axe-core at 390 and 1280 px; the main ones are the
// README's screenshots.
func TestMerchantDayInChromium(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	owner := portaltest.NewMember(t, env, org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	rc := apitest.NewReceiver(t)
	rc.Answer = func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	worker := env.Webhooks(webhook.WorkerConfig{Schedule: []time.Duration{time.Second}, AllowPrivate: true})
	b := browsertest.Start(t, env.URL, 4*time.Minute)
	tab := b.Tab
	c := chromium{t: t, b: b, base: env.URL}
	run, text, check, open, submit, want := c.run, c.html, c.check, c.open, c.submit, c.has

	// Made and sent on the portal's new invoice page, then paid on its pay
	// page.
	open("/portal/sign-in")
	run("sign in", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", owner.Password))
	submit(`main button[type="submit"]`)
	open("/portal/invoices/new")
	// The editor: a new customer, one line (the total is the page's), sent
	// now as it suggests.
	run("fill", chromedp.SetValue("#merchantAccountId", m.MIDs[0].Id.String()), chromedp.SetValue("#invoiceNumber", "DAY-1"),
		chromedp.SendKeys("#customerName", "Dana Whitfield"), chromedp.SendKeys("#customerEmail", "dana@example.com"),
		chromedp.SendKeys(`#lines\[0\]\.description`, "Tiles"),
		chromedp.SendKeys(`#lines\[0\]\.quantity`, "2"), chromedp.SendKeys(`#lines\[0\]\.unitCost`, "40"))
	submit(`main form button[value="finalize"]`)
	want("an invoice made", "The invoice was made.", "DAY-1")
	link, err := chromedp.Run(tab, chromedp.Text("#pay-link"))
	if err != nil {
		t.Fatal(err)
	}
	var made []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests?invoiceNumber=DAY-1", Token: m.Token}).JSON(t, &made)
	if len(made) != 1 || made[0].SentAt == nil {
		t.Fatalf("the invoice made in the portal: %+v", made)
	}
	payLink, err := url.Parse(strings.TrimSpace(link))
	if err != nil {
		t.Fatal(err)
	}
	open(payLink.Path)
	run("pay", chromedp.SendKeys("#cardholderName", "Dana Whitfield"), chromedp.SendKeys("#cardNumber", apitest.CardApprove),
		chromedp.SendKeys("#expiry", env.FutureExpiry()), chromedp.SendKeys("#cvv", apitest.TestCVV))
	submit(`main form button[type="submit"]`)
	if paid, _ := m.Read(t, made[0].Id); paid.Status != "paid" {
		t.Fatalf("the invoice is %s after paying on its page:\n%s", paid.Status, text())
	}

	// The sale, part of it refunded.
	open("/portal/card-payments")
	want("card payments", "DAY-1", "$80.00")
	check("card payments")
	open("/portal/card-payments?kind=refund")
	check("card payments, none match")
	open("/portal/card-payments?createdFrom=2026-02-30")
	check("card payments, a filter refused")
	open("/portal/card-payments")
	submit(`tbody a`)
	want("a sale", "Review the refund", "At most what is left: $80.00")
	check("a sale")
	run("too much", chromedp.SetValue("#amount", "90.00"))
	submit(`main form[action$="/refund"] button`)
	want("a refund of too much", "At most $80.00")
	check("a sale, a refund refused")
	run("a part", chromedp.SetValue("#amount", "25.00"), chromedp.SendKeys("#reason", "One item came back"))
	submit(`main form[action$="/refund"] button`)
	want("the refund to confirm", "Refund $25.00 to the card?", "Visa ending 1111", "Dana Whitfield", "One item came back")
	check("a refund to confirm")
	submit(`main form[action$="/refund"]:not(.back) button`)
	want("a refund", "is approved", "One item came back")
	check("a refund")
	submit(`a[href^="/portal/card-payments/"]:not([href$="/refund"])`)
	want("the sale, part refunded", "<dt>Refunded</dt><dd>$25.00</dd>", "At most what is left: $55.00")
	check("a sale, part refunded")
	capture(t, b, "card-payment.png")
	open("/portal/card-payments")
	want("card payments, a refund", `<td data-label="Kind">Refund</td>`, "$25.00 refunded")
	check("card payments, a sale and its refund")
	capture(t, b, "card-payments.png")

	// Settled: the deposit, net of the refund and the fees.
	if _, err := env.App.Payments.SettleOrganization(t.Context(), org, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	open("/portal/deposits")
	want("deposits", "$52.38") // 80.00 - 25.00 - (2.9% of 80.00 + 0.30)
	check("deposits")
	capture(t, b, "deposits.png")
	submit(`tbody a[href^="/portal/deposits/"]`)
	want("a deposit", "$52.38", "DAY-1", "-$25.00")
	check("a deposit")
	open("/portal/deposits?status=lost")
	check("deposits, a filter refused")

	// A webhook endpoint: refused, added, pinged, its attempts, rotated.
	open("/portal/webhooks")
	check("webhooks, none yet")
	run("no browser checks", chromedp.SetAttributeValue(`main form[action="/portal/webhooks"]`, "novalidate", ""))
	submit(`main form[action="/portal/webhooks"] button`)
	check("webhooks, a form refused")
	run("fill", chromedp.SendKeys("#url", rc.URL), chromedp.SendKeys("#description", "Bookkeeping"), chromedp.Click("#type-all"))
	submit(`main form[action="/portal/webhooks"] button`)
	want("an endpoint added", "shown only this once", "whsec_")
	check("an endpoint added")
	submit(`main a[href^="/portal/webhooks/"]`)
	check("an endpoint, no attempts")
	submit(`main form[action$="/ping"] button`)
	apitest.Deliver(t, worker)
	env.Clock.Advance(2 * time.Second)
	apitest.Deliver(t, worker)
	open(strings.TrimPrefix(read(t, tab, `document.location.pathname`), env.URL))
	want("an endpoint's attempts", ">503<", ">204<", "HTTP 503")
	check("an endpoint and its attempts")
	capture(t, b, "webhook.png")
	const rotationKey = `document.querySelector('main form[action$="/rotate-secret"] input[name="idempotencyKey"]')`
	run("rotate now", chromedp.Click("#expire-0"))
	sentKey := read(t, tab, rotationKey+`.value`)
	submit(`main form[action$="/rotate-secret"] button`)
	want("a secret rotated", "New signing secret")
	check("a secret rotated")
	rotated := read(t, tab, `document.getElementById("webhook-secret").textContent`)
	// The same form sent again (its key the first sending's, as a double
	// click sends it): nothing rotated, the same secret.
	submit(`main a[href^="/portal/webhooks/"]`)
	read(t, tab, rotationKey+`.value = "`+sentKey+`"`)
	run("rotate now", chromedp.Click("#expire-0"))
	submit(`main form[action$="/rotate-secret"] button`)
	want("the rotation sent again", "it was not rotated again")
	if again := read(t, tab, `document.getElementById("webhook-secret").textContent`); again != rotated {
		t.Errorf("the rotation sent again shows %q, the first %q", again, rotated)
	}
	check("a secret rotated, the form sent again")
	submit(`main a[href^="/portal/webhooks/"]`)
	submit(`main a[href$="/delete"]`)
	check("delete an endpoint")

	// The events.
	open("/portal/events")
	want("events", "invoice.paid", "card_payment.refunded", "webhook.ping")
	check("events")
	capture(t, b, "events.png")
	open("/portal/events?type=invoice.eaten")
	check("events, a filter refused")
	open("/portal/events?type=webhook.ping")
	submit(`tbody a`)
	want("an event", "As delivered", rc.URL)
	check("an event")

	for _, v := range b.Violations() {
		t.Errorf("Content-Security-Policy refused %s", v)
	}
	for _, e := range b.Errors() {
		if !strings.Contains(e, "status of 4") { // the refusals answered 400 and 422 on purpose
			t.Errorf("browser: %s", e)
		}
	}
	for _, u := range b.Foreign() {
		t.Errorf("fetched from elsewhere: %s", u)
	}
}

// read evaluates a script's string in the tab.
func read(t *testing.T, tab context.Context, script string) string {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.Evaluate[string](script))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
