package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

// taxLine is a line at rate (a JSON number or string; nil sends null).
func taxLine(q, c, rate any) map[string]any {
	l := apitest.Line(q, c)
	l["taxRate"] = rate
	return l
}

func TestTaxOnLinesAndTheInvoice(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	// 750.00 at 8.25 % is 61.875 → 61.88; the discount −50.00 at 8.25 % is
	// −4.125 → −4.13 (half up: away from zero); the delivery has no tax and
	// the key is left out; the last line's rate is null.
	noKey := apitest.Line("1", "25")
	b := m.Body("TAX-1", "784.75", taxLine("40", "18.75", "8.25"), taxLine(1, -50, 8.25), noKey, taxLine("1", "2", nil))
	created := m.MustCreate(t, b)
	apitest.Want(t, "created subtotal", created.Subtotal.Text('f'), "727.00")
	apitest.Want(t, "created taxAmount", created.TaxAmount.Text('f'), "57.75")

	resp := env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + created.Id.String(), Token: m.Token})
	var got models.Invoice
	resp.JSON(t, &got)
	apitest.Want(t, "amount", got.Amount.Text('f'), "784.75")
	apitest.Want(t, "subtotal", got.Subtotal.Text('f'), "727.00")
	apitest.Want(t, "taxAmount", got.TaxAmount.Text('f'), "57.75")
	lines := *got.LineItems
	want := []struct{ amount, rate, tax string }{{"750.00", "8.25", "61.88"}, {"-50.00", "8.25", "-4.13"}, {"25.00", "", "0.00"}, {"2.00", "", "0.00"}}
	for i, w := range want {
		apitest.Want(t, "amount", lines[i].Amount.Text('f'), w.amount)
		apitest.Want(t, "taxAmount", lines[i].TaxAmount.Text('f'), w.tax)
		rate := ""
		if lines[i].TaxRate != nil {
			rate = lines[i].TaxRate.Text('f')
		}
		apitest.Want(t, "taxRate", rate, w.rate)
	}
	for _, s := range []string{`"taxRate":null`, `"taxRate":"8.25"`, `"taxAmount":"61.88"`, `"subtotal":"727.00"`} {
		if !strings.Contains(string(resp.Body), s) {
			t.Errorf("answer lacks %s: %s", s, resp.Body)
		}
	}

	// Without lines: the subtotal is the amount and the tax 0.00, in lists too.
	plain := m.MustCreate(t, m.Body("TAX-2", "12.30"))
	apitest.Want(t, "subtotal without lines", plain.Subtotal.Text('f'), "12.30")
	apitest.Want(t, "taxAmount without lines", plain.TaxAmount.Text('f'), "0.00")
	var list []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "invoices listed", len(list), 2)
	for _, inv := range list {
		switch inv.InvoiceNumber {
		case "TAX-1":
			apitest.Want(t, "listed subtotal", inv.Subtotal.Text('f'), "727.00")
			apitest.Want(t, "listed taxAmount", inv.TaxAmount.Text('f'), "57.75")
		case "TAX-2":
			apitest.Want(t, "listed subtotal", inv.Subtotal.Text('f'), "12.30")
			apitest.Want(t, "listed taxAmount", inv.TaxAmount.Text('f'), "0.00")
		}
	}
}

func TestTaxRefusals(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	cases := []struct {
		name, amount string
		lines        []any
		field, words string
	}{
		{"rate above 100", "20.00", []any{taxLine("1", "10", "100.00001")}, "lines[0].taxRate", ""},
		{"rate of 101 as a number", "20.10", []any{taxLine("1", "10", 101)}, "lines[0].taxRate", "0 to 100"},
		{"five places", "10.81", []any{apitest.Line("1", "1"), taxLine("1", "10", "8.12345")}, "lines[1].taxRate", "4 decimal places"},
		{"negative rate", "9.00", []any{taxLine("1", "10", "-10")}, "lines[0].taxRate", "0 to 100"},
		{"not a number", "10.00", []any{taxLine("1", "10", "ten")}, "lines[0].taxRate", ""},
		{"the amount without its tax", "750.00", []any{taxLine("40", "18.75", "8.25")}, "lines", "811.88"},
		{"the tax not rounded", "811.87", []any{taxLine("40", "18.75", "8.25")}, "lines", "811.88"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := m.Body("TR-"+c.name, c.amount)
			b["lines"] = c.lines
			resp := m.Create(t, b, nil)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, resp.Body)
			}
			p := resp.Problem(t)
			if p.Errors == nil || len((*p.Errors)[c.field]) == 0 {
				t.Fatalf("errors lack %q: %s", c.field, resp.Body)
			}
			if msg := strings.Join((*p.Errors)[c.field], " "); !strings.Contains(msg, c.words) {
				t.Errorf("errors[%s] %q does not say %q", c.field, msg, c.words)
			}
		})
	}
	var list []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "invoices made by refused requests", len(list), 0)

	// The bounds themselves are taken.
	for i, rate := range []any{"0", 100, "99.9999"} {
		inv := m.MustCreate(t, m.Body("TR-OK-"+string(rune('a'+i)), map[int]string{0: "10.00", 1: "20.00", 2: "20.00"}[i], taxLine("1", "10", rate)))
		apitest.Want(t, "accepted rate's line count", inv.Lines, int32(1))
	}
}
