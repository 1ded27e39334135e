package portal_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// TestCustomersAndTaxRatesInChromium opens the customers' list, a
// customer's page and the tax rates as an Owner in headless Chromium,
// empty and full, a refusal of each form among them: at 390 and 1280 px
// axe-core finds nothing, no page is wider than the window, no word breaks
// inside itself and every amount is in view. The screenshots are the
// test's artifacts.
func TestCustomersAndTaxRatesInChromium(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	owner := portaltest.NewMember(t, env, uuid.MustParse(m.Org), "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	b := browsertest.Start(t, env.URL, 6*time.Minute)
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

	c.open("/portal/customers")
	c.has("no customers", "No customers yet", "New customer")
	look("customers-empty")
	c.open("/portal/settings/tax-rates")
	c.has("no tax rates", "No tax rates yet")
	look("tax-rates-empty")
	c.run("a rate of too many places", chromedp.SendKeys("#name", "Sales tax"), chromedp.SendKeys("#rate", "8.12345"))
	c.submit(`main form button[type="submit"]`)
	c.has("refused", "at most 4 decimal places", `value="Sales tax"`)
	look("tax-rates-refused")

	c.open("/portal/customers/new")
	c.run("a city without its street", chromedp.SendKeys("#email", "dana@example.com"), chromedp.SendKeys("#name", "Dana Whitfield"),
		chromedp.SendKeys("#city", "Austin"), chromedp.SetValue("#country", "ZZ"))
	c.submit(`main form button[type="submit"]`)
	c.has("refused", "Enter the street address", "two-letter code", `value="Dana Whitfield"`)
	look("customer-refused")

	// Full: customers of long names and companies, invoices in several
	// states, a saved card; a few named rates.
	for i, n := range []struct{ name, company, email string }{
		{"Bartholomew Featherstonehaugh", "Featherstonehaugh & Sons Wholesale Coffee Importers", "bartholomew.featherstonehaugh@wholesale-importers.example.com"},
		{"Ada Park", "", "ada@example.com"},
		{"", "Ridge Roasters", "orders@ridge.example"},
	} {
		body := map[string]any{"email": n.email, "name": nil, "company": nil}
		if n.name != "" {
			body["name"] = n.name
		}
		if n.company != "" {
			body["company"] = n.company
		}
		newCustomer(t, m, body)
		inv := m.Body(fmt.Sprintf("CU-%d", i+1), "1234.56")
		inv["customerEmail"], inv["customerName"] = n.email, nil
		m.MustCreate(t, inv)
	}
	paid := m.MustCreate(t, m.Body("CU-9", "25.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, paid), apitest.Payment{Card: apitest.CardApprove, Amount: "25.00", Save: true}), http.StatusSeeOther)
	m.MustCreate(t, m.Body("CU-10", "12345.67"))
	paid, _ = m.Read(t, paid.Id)
	for _, r := range []struct{ name, rate string }{{"Sales tax", "8.25"}, {"City of Austin mixed beverage tax", "6.7"}, {"Exempt", "0"}} {
		rate, _, _ := apd.NewFromString(r.rate)
		if _, err := env.App.Invoices.AddTaxRate(t.Context(), invoice.Actor{OrganizationID: uuid.MustParse(m.Org)}, r.name, *rate); err != nil {
			t.Fatal(err)
		}
	}

	c.open("/portal/customers")
	c.has("customers", "Featherstonehaugh", "Ridge Roasters", "$12,345.67")
	look("customers")
	c.open("/portal/customers?q=ridge")
	c.has("searched", "Customers that match", "Ridge Roasters")
	look("customers-searched")
	c.open("/portal/customers/" + paid.CustomerId.String())
	c.has("a customer", "Saved cards", "ending in", "CU-9", "CU-10", "$12,345.67")
	look("customer")
	c.open("/portal/settings/tax-rates")
	c.has("tax rates", "8.25%", "City of Austin mixed beverage tax", "6.7%")
	look("tax-rates")

	for _, v := range b.Violations() {
		t.Errorf("Content-Security-Policy refused %s", v)
	}
	for _, e := range b.Errors() {
		if !strings.Contains(e, "status of 400") { // the refusals answered 400 on purpose
			t.Errorf("browser: %s", e)
		}
	}
	for _, u := range b.Foreign() {
		t.Errorf("fetched from elsewhere: %s", u)
	}
}
