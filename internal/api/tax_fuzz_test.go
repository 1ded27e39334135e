package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

// add is the sum of xs, exactly, or fails the test.
func add(t *testing.T, sum apd.Decimal, xs ...apd.Decimal) apd.Decimal {
	t.Helper()
	for _, x := range xs {
		if _, err := apd.BaseContext.WithPrecision(60).Add(&sum, &sum, &x); err != nil {
			t.Fatal(err)
		}
	}
	return sum
}

// plainDecimal is the text a Decimal takes as a JSON string.
var plainDecimal = regexp.MustCompile(`^-?(?:0|[1-9]\d*)(?:\.\d+)?$`)

// FuzzTaxRate: any text as a line's taxRate, sent as a JSON string or as
// the raw JSON value, on one line of 1 × 100.00 (whose tax is the rate
// itself, rounded half up to cents: an oracle apart from the server's
// arithmetic), with the amount that rate makes. A rate from 0 to 100 of
// at most 4 places is a 201 answering that rate, that tax, a subtotal of
// 100.00 and that total; any other is a 400 naming lines[0].taxRate
// (when the body is JSON at all); never a 5xx.
func FuzzTaxRate(f *testing.F) {
	for _, seed := range []struct {
		rate     string
		asString bool
	}{
		{"8.25", true}, {"8.25", false}, {"0", false}, {"100", true}, {"100.0000", false}, {"0.005", true},
		{"0.0050", false}, {"99.9999", true}, {"100.00001", true}, {"8.12345", false}, {"-0.0001", true},
		{"-0", false}, {"1e1", false}, {"1E-5", false}, {"null", false}, {"true", false}, {"\"8.25\"", false},
		{"8,25", true}, {" 8.25", true}, {"08.25", true}, {"1e400", false}, {"0." + "0000000000000000000000000000000000000001", true},
	} {
		f.Add(seed.rate, seed.asString)
	}
	s := newFuzzServer(f)
	money := apd.BaseContext.WithPrecision(60)
	money.Rounding = apd.RoundHalfUp
	f.Fuzz(func(t *testing.T, rate string, asString bool) {
		raw := rate
		if asString {
			b, _ := json.Marshal(rate)
			raw = string(b)
		} else if err := json.Unmarshal([]byte(raw), &rate); err != nil {
			rate = strings.Trim(raw, " \t\r\n") // not a JSON string: the raw value, between JSON's spaces, is the rate's text
		}
		// The rate as the oracle reads it: in range from 0 to 100 with at
		// most 4 places; taken for sure when, besides, its wire form is a
		// plain decimal (a JSON number may also be written with an
		// exponent, whose own limits this oracle leaves to the decoder's
		// tests).
		r, _, perr := apd.NewFromString(rate)
		var reduced apd.Decimal
		if perr == nil {
			reduced.Reduce(r)
		}
		inRange := perr == nil && r.Form == apd.Finite && r.Sign() >= 0 && r.Cmp(apd.New(100, 0)) <= 0 && reduced.Exponent >= -4
		taken := inRange && plainDecimal.MatchString(rate) && len(rate) <= 40
		amount := "100.00"
		var tax apd.Decimal
		if perr == nil && r.Form == apd.Finite && r.Cmp(apd.New(1000, 0)) < 0 && r.Cmp(apd.New(-1000, 0)) > 0 {
			if _, err := money.Quantize(&tax, r, -2); err == nil {
				var a apd.Decimal
				_, _ = money.Add(&a, &tax, apd.New(100, 0))
				amount = a.Text('f')
			}
		}
		s.invoiceNumbers++
		body := `{"merchantAccountId":"` + s.mid + `","invoiceNumber":"TAXFUZZ-` + strconv.Itoa(s.invoiceNumbers) + `","amount":"` + amount +
			`","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"dana@example.com","customerPhone":null,` +
			`"delivery":null,"memo":null,"dueDate":null,"send":false,"lines":[{"description":"Catering","quantity":1,"unitCost":"100.00",` +
			`"uom":null,"commodityCode":null,"upc":null,"taxRate":` + raw + `}]}`
		resp := s.on(t).Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: s.merchant, Body: []byte(body)})
		wantNoServerError(t, "create", resp)
		switch {
		case resp.StatusCode == http.StatusCreated:
			var got models.Invoice
			resp.JSON(t, &got)
			l := (*got.LineItems)[0]
			if !inRange && raw != "null" {
				t.Fatalf("taxRate %s taken: %s", raw, resp.Body)
			}
			wantTax := "0.00"
			if raw != "null" {
				wantTax = tax.Text('f')
				if tax.IsZero() {
					wantTax = "0.00"
				}
				if l.TaxRate == nil || l.TaxRate.Cmp(r) != 0 {
					t.Errorf("taxRate %s sent, %s answered", raw, jsonText(l.TaxRate))
				}
			}
			apitest.Want(t, "line taxAmount", l.TaxAmount.Text('f'), wantTax)
			apitest.Want(t, "invoice taxAmount", got.TaxAmount.Text('f'), wantTax)
			apitest.Want(t, "subtotal", got.Subtotal.Text('f'), "100.00")
			apitest.Want(t, "line amount", l.Amount.Text('f'), "100.00")
			apitest.Want(t, "amount", got.Amount.Text('f'), amount)
		case taken:
			t.Fatalf("taxRate %s refused: %d %s", raw, resp.StatusCode, resp.Body)
		case !inRange && resp.StatusCode == http.StatusBadRequest && json.Valid([]byte(body)):
			if p := resp.Problem(t); p.Errors == nil || len((*p.Errors)["lines[0].taxRate"]) == 0 {
				t.Errorf("taxRate %s: the 400 does not name lines[0].taxRate: %s", raw, resp.Body)
			}
		}
	})
}
