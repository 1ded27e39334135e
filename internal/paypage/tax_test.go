package paypage_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/invoicepdf/pdftest"
)

// The pay page and its PDF show each line's tax rate, then the subtotal,
// the tax and the total.
func TestPayPageShowsSubtotalTaxAndTotal(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	catering := apitest.Line("40", "18.75")
	catering["taxRate"] = "8.25"
	inv := m.MustCreate(t, m.Body("TAX-PAY-1", "836.88", catering, apitest.Line("1", "25")))
	path := apitest.PayPath(t, inv)

	page := env.Visit(t, "GET", path, nil, nil)
	apitest.WantStatus(t, page, http.StatusOK)
	for _, want := range []string{`<th scope="col" class="num">Tax</th>`, `<td class="num">8.25%</td>`,
		"<dt>Subtotal</dt><dd>$775.00</dd>", "<dt>Tax</dt><dd>$61.88</dd>", "<dt>Total</dt><dd>$836.88</dd>"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the pay page lacks %s", want)
		}
	}

	pdf := env.Visit(t, "GET", path+"/invoice.pdf", nil, nil)
	apitest.WantStatus(t, pdf, http.StatusOK)
	doc := pdftest.Read(t, []byte(pdf.Body))
	for _, want := range []string{"8.25%", "Subtotal", "$775.00", "$61.88", "Total", "$836.88"} {
		if !strings.Contains(doc.Text, want) {
			t.Errorf("the PDF's text lacks %q:\n%s", want, doc.Text)
		}
	}

	// Without lines there is no subtotal or tax to show: the total alone.
	plain := env.Visit(t, "GET", apitest.PayPath(t, m.MustCreate(t, m.Body("TAX-PAY-2", "12.30"))), nil, nil)
	if strings.Contains(plain.Body, "Subtotal") || !strings.Contains(plain.Body, "<dt>Total</dt><dd>$12.30</dd>") {
		t.Errorf("an invoice without lines shows a subtotal, or no total")
	}
}
