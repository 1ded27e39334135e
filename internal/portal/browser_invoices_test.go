package portal_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// TestMerchantPagesInChromium opens the merchant's day in headless
// Chromium as an Owner: home with its figures, the invoices listed (full,
// none matching, a bad filter), an invoice's page, the new invoice form
// (its script filters the customers and adds a row of lines; refused,
// then made), the form recording
// a payment (refused, then recorded), the cancellation, reminder settings
// (refused) and locations. Each page and state must pass axe-core's WCAG
// 2.1 A and AA rules at 390 and 1280 px, run no failing script, keep its
// Content-Security-Policy and fetch nothing from elsewhere.
func TestMerchantPagesInChromium(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	owner := portaltest.NewMember(t, env, org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	names := []string{"Ada Park", "Bo Chen", "Carmen Díaz", "Dev Patel", "Eun-ji Seo", "Farah Haddad"}
	var shown string
	for i, name := range names {
		b := m.Body("INV-10"+string(rune('1'+i)), "120.00", apitest.Line("2", "45"), apitest.Line("1", "30"))
		if i == 0 { // the invoice shown: one line taxed, one not
			tiles, grout := apitest.Line("2", "45"), apitest.Line("1", "30")
			tiles["description"], tiles["taxRate"], grout["description"] = "Porcelain floor tiles, per box", "8.25", "Grout, 10 lb bag"
			b = m.Body("INV-101", "127.43", tiles, grout)
		}
		b["customerName"], b["customerEmail"], b["send"] = name, strings.ToLower(strings.Fields(name)[0])+"@example.com", i%2 == 0
		if i < 3 {
			b["dueDate"] = env.Clock.Now().AddDate(0, 0, 14*(i-1)).Format(time.DateOnly)
		}
		inv := m.MustCreate(t, b)
		if i == 0 {
			shown = inv.Id.String()
			apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "50.00", Save: true}), http.StatusSeeOther)
			r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + shown + "/payments", Token: m.Token,
				Body: map[string]any{"amount": "20.00", "method": "check", "reference": "Check 1042"}})
			apitest.Want(t, "record", r.StatusCode, http.StatusCreated)
		}
	}
	rate, _, _ := apd.NewFromString("8.25")
	if _, err := env.App.Invoices.AddTaxRate(t.Context(), invoice.Actor{OrganizationID: org, Name: "test"}, "Sales tax", *rate); err != nil {
		t.Fatal(err)
	}
	b := browsertest.Start(t, env.URL, 4*time.Minute)
	c := chromium{t: t, b: b, base: env.URL}
	run, html, check, open, submit, has := c.run, c.html, c.check, c.open, c.submit, c.has

	open("/portal/sign-in")
	run("sign in", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", owner.Password))
	submit(`main button[type="submit"]`)
	has("home", "owed on", "paid this week")
	check("home")
	capture(t, b, "home.png")

	open("/portal/invoices")
	has("the list", "Carmen Díaz", "Download as CSV")
	check("invoices")
	capture(t, b, "invoices.png")
	open("/portal/invoices?customerName=nobody")
	has("no match", "No invoices match")
	check("invoices, none match")
	open("/portal/invoices?createdFrom=soon")
	has("a bad filter", "YYYY-MM-DD")
	check("invoices, a bad filter")

	open("/portal/invoices/" + shown)
	has("an invoice", "Part paid", "Check 1042", "invoice.created", "Copy the link", "8.25% · $7.43", "$127.43")
	check("an invoice")
	captureDownTo(t, b, "invoice.png", `section[aria-labelledby="lines"]`)

	// The editor with its script: a row added, the totals live and equal
	// to the server's, at 390 and 1280 px with no sideways scrolling.
	open("/portal/invoices/new")
	has("new invoice", "Sales tax 8.25%", "Ada Park · ada@example.com")
	check("new invoice")
	if strings.Contains(html(), "Line 2") || c.read(chromedp.Evaluate[string](`getComputedStyle(document.querySelector("[data-update-totals]")).display`)) != "none" {
		t.Fatal("two rows, or an Update totals button, before the script added a row")
	}
	// The picker's filter: typed without its accent, a name keeps its
	// customer alone (and "A new customer"), says so, and cleared
	// brings every one back.
	options := func() string {
		return c.read(chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#customerId option"), o => o.textContent).join("|")`))
	}
	all := options()
	run("filter the customers", chromedp.SendKeys("#customer-filter", "DIAZ"))
	if got := options(); got != "A new customer (fill in below)|Carmen Díaz · carmen@example.com" {
		t.Errorf("customers left by the filter: %q", got)
	}
	has("filtered", "Customers that match: 1 of 6.")
	check("new invoice, customers filtered")
	run("clear the filter", chromedp.SendKeys("#customer-filter", strings.Repeat(kb.Backspace, len("DIAZ"))))
	if got := options(); got != all || strings.Count(got, "|") != len(names) {
		t.Errorf("customers after the filter was cleared: %q, want %q", got, all)
	}
	run("add a line", chromedp.Click(`[data-add-line]`))
	has("a line added", `id="lines[1].description"`, "Line 2")
	run("fill", chromedp.SetValue("#merchantAccountId", m.MIDs[0].Id.String()),
		chromedp.SendKeys("#customerEmail", "gus@example.com"),
		chromedp.SendKeys(`#lines\[0\]\.description`, "Tiles"), chromedp.SendKeys(`#lines\[0\]\.quantity`, "2"),
		chromedp.SendKeys(`#lines\[0\]\.unitCost`, "45"), chromedp.SetValue(`#lines\[1\]\.taxRate`, "8.25"),
		chromedp.SendKeys(`#lines\[1\]\.description`, "Grout"), chromedp.SendKeys(`#lines\[1\]\.quantity`, "1"),
		chromedp.SendKeys(`#lines\[1\]\.unitCost`, "8.50"))
	live := map[string]string{}
	for _, k := range []string{"subtotal", "tax", "total"} {
		live[k] = strings.TrimSpace(c.read(chromedp.Text(`[data-total="` + k + `"]`)))
	}
	if live["subtotal"] != "$98.50" || live["tax"] != "$0.70" || live["total"] != "$99.20" {
		t.Errorf("live totals %v, want $98.50, $0.70 and $99.20", live)
	}
	check("new invoice, two lines")
	for _, w := range []int64{390, 1280} {
		run("resize", chromedp.EmulateViewport(w, 900))
		for _, f := range c.faults() {
			t.Errorf("new invoice at %d px: %s", w, f)
		}
		b.FullScreenshot(t, fmt.Sprintf("invoice-editor-%d.png", w))
	}
	captureDownTo(t, b, "invoice-new.png", ".line-totals")
	submit(`button[value="finalize"]`)
	has("made", "The invoice was made.", "Grout", "$99.20")
	var made []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests?customerEmail=gus@example.com", Token: m.Token}).JSON(t, &made)
	if len(made) != 1 || invoice.Money(made[0].Amount.Decimal) != live["total"] || invoice.Money(made[0].TaxAmount.Decimal) != live["tax"] {
		t.Errorf("the server's invoice %+v, the live totals %v", made, live)
	}
	check("an invoice made in the editor")

	open("/portal/invoices/" + shown + "/payments")
	check("record a payment")
	run("fill", chromedp.SetValue("#amount", "500"), chromedp.Click("#method-cash"))
	submit(`main form button[type="submit"]`)
	has("refused", "at most the balance")
	check("record a payment, too much")
	run("fix", chromedp.SetValue("#amount", "10"))
	submit(`main form button[type="submit"]`)
	has("recorded", "The payment was recorded.")

	open("/portal/invoices/" + shown + "/cancel")
	check("cancel an invoice")
	open("/portal/reminder-settings")
	check("reminder settings")
	run("fill", chromedp.SetValue("#offsetsDays", "-3, 200"))
	submit(`main form button[type="submit"]`)
	has("refused", "from -30 to 90")
	check("reminder settings, refused")
	open("/portal/locations")
	check("locations")
	capture(t, b, "locations.png")

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
