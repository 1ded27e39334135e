package signup_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/browsertest"
)

// field selects the form's field by its id (the field's name: dots and all).
func field(name string) chromedp.CSS { return chromedp.CSS(`[id="` + name + `"]`) }

// typeInto types text into the field, as a person does, after emptying it.
func typeInto(name, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Clear(field(name)), chromedp.SendKeys(field(name), text))
}

// An applicant fills the sign-up form in headless Chromium as a person
// does (the first owner, then a second in a section they open), sends it
// with a wrong routing number, corrects it and sends it again; the
// reseller then reads the application. axe-core finds no WCAG 2.1 A or AA
// violation on the form, its error state and the thank-you page, on a
// phone (390 px) and a desktop (1280 px); no page throws, breaks its
// policy or fetches from elsewhere. The screenshots go to the test's
// artifact directory (kept with go test -artifacts).
func TestApplyInChromium(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	before := len(f.applications(t))
	browser := browsertest.Start(t, f.URL, 2*time.Minute)
	axe := func(name string) {
		t.Helper()
		for _, width := range []int64{390, 1280} {
			for _, v := range browser.Axe(t, width) {
				t.Errorf("%s: %s", name, v)
			}
		}
	}
	text := func() string {
		t.Helper()
		s, err := chromedp.Run(browser.Tab, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(s), " ")
	}
	submit := func(want int) {
		t.Helper()
		resp, err := chromedp.RunResponse(browser.Tab, chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
		if err != nil {
			t.Fatalf("send the form: %v", err)
		}
		if resp.Status != int64(want) {
			t.Fatalf("sending the form answered %d, want %d: %s", resp.Status, want, text())
		}
	}
	secrets := func(routing string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			typeInto("business.taxId", apitest.FormTaxID),
			typeInto("owners.0.ssn", apitest.FormSSN1),
			typeInto("owners.1.ssn", apitest.FormSSN2),
			typeInto("bank.routingNumber", routing),
			typeInto("bank.accountNumber", apitest.FormAccount),
		)
	}

	resp, err := chromedp.Run(browser.Tab, chromedp.NavigateResponse(f.URL+"/apply/"+f.slug))
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("open the sign-up page: %v %v", resp, err)
	}
	if !strings.Contains(text(), "Merchant application Northwind Payments ") {
		t.Errorf("the reseller's name is not at the top: %s", text())
	}
	axe("the form")
	browser.FullScreenshot(t, "apply.png")

	err = chromedp.Do(browser.Tab,
		typeInto("business.legalName", "Cedar Street Auto Repair LLC"),
		chromedp.SendKeys(field("business.entityType"), "Limited"),
		typeInto("business.email", "owner@cedarstreetauto.example.com"),
		typeInto("business.address.line1", "1200 Cedar St"),
		typeInto("business.address.city", "Round Rock"),
		typeInto("business.address.state", "TX"),
		typeInto("business.address.postalCode", "78664"),
		typeInto("owners.0.name", apitest.FormSignedBy),
		typeInto("owners.0.title", "Managing member"),
		typeInto("owners.0.ownershipPercent", "60"),
		chromedp.Click(chromedp.CSS("details.owner summary")),
		typeInto("owners.1.name", "Tom Becker"),
		typeInto("owners.1.title", "Member"),
		typeInto("owners.1.ownershipPercent", "40"),
		secrets("111000026"), // one digit off
		chromedp.Click(field("consent")),
		typeInto("signature", apitest.FormSignedBy),
	)
	if err != nil {
		t.Fatalf("fill the form: %v", err)
	}
	submit(http.StatusBadRequest)
	for _, want := range []string{"Please correct this:", "Routing number must be a valid ABA routing number",
		"the tax id, Social Security numbers and account number you typed were not kept"} {
		if !strings.Contains(text(), want) {
			t.Errorf("the error state does not say %q: %s", want, text())
		}
	}
	for _, name := range []string{"business.taxId", "owners.0.ssn", "owners.1.ssn", "bank.accountNumber"} {
		if v, err := chromedp.Run(browser.Tab, chromedp.Value(field(name))); err != nil || v != "" {
			t.Errorf("%s came back as %q (%v), want empty", name, v, err)
		}
	}
	if v, err := chromedp.Run(browser.Tab, chromedp.Value(field("owners.1.name"))); err != nil || v != "Tom Becker" {
		t.Errorf("the second owner's name came back as %q (%v)", v, err)
	}
	axe("the form's error state")
	browser.FullScreenshot(t, "apply-error.png")

	if err := chromedp.Do(browser.Tab, secrets(apitest.FormRouting)); err != nil {
		t.Fatalf("correct the form: %v", err)
	}
	submit(http.StatusOK)
	page := text()
	if !strings.Contains(page, "Application received") || !strings.Contains(page, "Your reference") {
		t.Errorf("the thank-you page: %s", page)
	}
	axe("the thank-you page")
	browser.FullScreenshot(t, "thanks.png")

	apps := f.applications(t)
	apitest.Want(t, "applications", len(apps), before+1)
	a := apps[0]
	if !strings.Contains(page, a.Id.String()) {
		t.Errorf("the thank-you page does not give the reference %s", a.Id)
	}
	apitest.Want(t, "legal name", a.Business.LegalName, "Cedar Street Auto Repair LLC")
	apitest.Want(t, "owners", len(a.Owners), 2)
	apitest.Want(t, "tax id last four", a.Business.TaxIdLastFour, apitest.FormTaxID[5:])
	apitest.Want(t, "routing number", a.Bank.RoutingNumber, apitest.FormRouting)

	for _, v := range browser.Violations() {
		t.Errorf("Content-Security-Policy refused %s", v)
	}
	for _, u := range browser.Foreign() {
		t.Errorf("the page asked for %s, outside this service", u)
	}
	for _, e := range browser.Errors() {
		// The form's error state is answered 400, which Chromium logs.
		if !strings.Contains(e, "status of 400") {
			t.Errorf("browser: %s", e)
		}
	}
}
