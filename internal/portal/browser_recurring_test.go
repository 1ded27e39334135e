package portal_test

import (
	"fmt"
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

// TestRecurringInChromium opens the recurring invoices' list (empty and
// full), the new form and a series' page as an Owner in headless
// Chromium: at 390 and 1280 px axe-core finds nothing, no page is wider
// than the window, no word breaks inside itself and every amount is in
// view. The screenshots are the test's artifacts.
func TestRecurringInChromium(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	owner := portaltest.NewMember(t, env, uuid.MustParse(m.Org), "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	b := browsertest.Start(t, env.URL, 5*time.Minute)
	c := chromium{t: t, b: b, base: env.URL}
	look := func(name string) {
		t.Helper()
		for _, w := range []int64{390, 1280} {
			for _, v := range b.Axe(t, w) {
				t.Errorf("%s: %s", name, v)
			}
			for _, f := range c.faults() {
				t.Errorf("%s at %d px: %s", name, w, f)
			}
			b.FullScreenshot(t, fmt.Sprintf("%s-%d.png", name, w))
		}
	}
	c.open("/portal/sign-in")
	c.run("sign in", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", owner.Password))
	c.submit(`main button[type="submit"]`)

	c.open("/portal/recurring")
	c.has("no series", "No recurring invoices yet", "New recurring invoice")
	look("recurring-empty")

	cu := newCustomer(t, m, map[string]any{"email": "bartholomew.featherstonehaugh@wholesale-importers.example.com",
		"name": "Bartholomew Featherstonehaugh", "company": "Featherstonehaugh & Sons Wholesale Coffee Importers"})
	c.open("/portal/recurring/new")
	c.has("the form", "New recurring invoice", "Automatic payment", "Ends")
	look("recurring-new")

	var id string
	for i, sc := range []struct {
		interval string
		count    int
	}{{"month", 1}, {"week", 2}, {"week", 3}} {
		id = createSeriesOf(t, m, map[string]any{"merchantAccountId": m.MIDs[0].Id.String(), "customerId": cu.Id.String(),
			"invoiceNumberPrefix": fmt.Sprintf("RETAINER-%d", i), "amount": "12345.67", "lines": nil, "memo": "Monthly retainer",
			"poNumber": nil, "delivery": nil, "reminders": nil, "interval": sc.interval, "intervalCount": sc.count,
			"startOn": time.Now().Add(48 * time.Hour).Format(time.DateOnly), "endAfter": 12, "endOn": nil, "dueDays": 14, "send": true,
			"autoPay": nil})
	}
	c.open("/portal/recurring")
	c.has("series", "Every month", "Every 3 weeks", "$12,345.67", "Featherstonehaugh")
	look("recurring")
	c.open("/portal/recurring/" + id)
	c.has("a series", "Every 3 weeks", "After 12 invoices", "Pause", "None yet")
	look("recurring-series")
	c.open("/portal/recurring/" + id + "/edit")
	c.has("the edit form", "Edit recurring invoice RETAINER-2", "Save changes")
	look("recurring-edit")
	c.open("/portal/recurring/" + id + "/end")
	c.has("the end's confirmation", "End recurring invoice RETAINER-2?")
	look("recurring-end")

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

// createSeriesOf makes a series of m through the API; its id.
func createSeriesOf(t *testing.T, m apitest.Merchant, body map[string]any) string {
	t.Helper()
	r := m.Env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: body})
	apitest.Want(t, "series "+string(r.Body), r.StatusCode, 201)
	var out struct{ Id string }
	r.JSON(t, &out)
	return out.Id
}
