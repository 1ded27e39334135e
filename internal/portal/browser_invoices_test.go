package portal_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// TestMerchantPagesInChromium opens the merchant's day in headless
// Chromium as an Owner: home with its figures, the invoices listed (full,
// none matching, a bad filter), an invoice's page, the new invoice form
// (its script adds a row of lines; refused, then made), the form recording
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
	has("an invoice", "Part paid", "Check 1042", "invoice.created", "Copy the link")
	check("an invoice")
	capture(t, b, "invoice.png")

	open("/portal/invoices/new")
	check("new invoice")
	if strings.Contains(html(), "Line 6") {
		t.Fatal("six rows before the script added one")
	}
	run("add a line", chromedp.Click(`[data-add-line] > button`))
	has("a line added", `id="lines[5].description"`, "Line 6")
	check("new invoice, a line added")
	run("fill", chromedp.SetValue("#merchantAccountId", m.MIDs[0].Id.String()), chromedp.SendKeys("#invoiceNumber", "INV-200"), chromedp.SendKeys("#customerEmail", "gus@example.com"),
		chromedp.SendKeys("#amount", "99.00"),
		chromedp.SendKeys(`#lines\[0\]\.description`, "Tiles"), chromedp.SendKeys(`#lines\[0\]\.quantity`, "2"),
		chromedp.SendKeys(`#lines\[0\]\.unitCost`, "45"),
		chromedp.SendKeys(`#lines\[5\]\.description`, "Grout"), chromedp.SendKeys(`#lines\[5\]\.quantity`, "1"),
		chromedp.SendKeys(`#lines\[5\]\.unitCost`, "8.50"))
	submit(`main form button[type="submit"]`)
	has("refused", "lines add up to 98.50", `value="Grout"`)
	check("new invoice, lines that do not add up")
	capture(t, b, "invoice-new.png")
	run("fix", chromedp.SetValue("#amount", "98.50"))
	submit(`main form button[type="submit"]`)
	has("made", "The invoice was made.", "Grout", "$98.50")

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
