package invoice

import (
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/rule"
)

func taxed(q, c, rate string) Line {
	l := line(q, c)
	if rate != "" {
		r := d(rate)
		l.TaxRate = &r
	}
	return l
}

// A line's tax is its amount (rounded half up to cents first) times its
// rate, rounded half up (away from zero) to cents.
func TestLineTaxRoundsHalfUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name              string
		q, c, rate        string
		amount, taxAmount string
	}{
		{"no rate", "2", "10.25", "", "20.50", "0.00"},
		{"zero rate", "2", "10.25", "0", "20.50", "0.00"},
		{"a tie of half a cent rounds up", "1", "0.10", "5", "0.10", "0.01"},
		{"just under half a cent rounds down", "1", "0.10", "4.9999", "0.10", "0.00"},
		{"8.25 % of 10.00 is 0.825", "1", "10", "8.25", "10.00", "0.83"},
		{"the amount is rounded before the tax", "1", "0.098", "5", "0.10", "0.01"},
		{"quantity times cost, then tax", "40", "18.75", "8.25", "750.00", "61.88"},
		{"four places of rate", "1", "100", "8.8125", "100.00", "8.81"},
		{"the whole amount at 100 %", "3", "3.3333", "100", "10.00", "10.00"},
		{"a discount line's tax is negative", "1", "-10.10", "5", "-10.10", "-0.51"},
		{"a negative tie rounds away from zero", "1", "-0.10", "5", "-0.10", "-0.01"},
		{"float cannot hold it", "1", "0.3", "10", "0.30", "0.03"},
		{"a negative tax under half a cent is 0.00, unsigned", "1", "-0.04", "10", "-0.04", "0.00"},
		{"a rate of -0 is no tax", "1", "5", "-0", "5.00", "0.00"},
		{"the largest line", "9999999999999", "9999999999999", "100",
			"99999999999980000000000001.00", "99999999999980000000000001.00"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := taxed(c.q, c.c, c.rate)
			if got := LineTotal(l); got.Text('f') != c.amount {
				t.Errorf("amount %s, want %s", got.Text('f'), c.amount)
			}
			if got := LineTax(l); got.Text('f') != c.taxAmount {
				t.Errorf("taxAmount %s, want %s", got.Text('f'), c.taxAmount)
			}
		})
	}
}

func TestTotalsAddEachLineRounded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		lines         []Line
		subtotal, tax string
	}{
		{"no lines", nil, "0.00", "0.00"},
		{"each line's tax rounds before the sum", []Line{taxed("1", "0.10", "5"), taxed("1", "0.10", "5")}, "0.20", "0.02"},
		{"a discount lowers the tax", []Line{taxed("1", "100", "8.25"), taxed("1", "-10", "8.25")}, "90.00", "7.42"},
		{"untaxed and taxed lines", []Line{taxed("2", "10.25", ""), taxed("1", "5", "10")}, "25.50", "0.50"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			subtotal, tax := Totals(c.lines)
			if subtotal.Text('f') != c.subtotal || tax.Text('f') != c.tax {
				t.Errorf("subtotal %s tax %s, want %s and %s", subtotal.Text('f'), tax.Text('f'), c.subtotal, c.tax)
			}
		})
	}
}

// Lines add up when the sum of each line's amount plus its tax is the
// invoice's amount.
func TestLinesAddUpWithTax(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		amount string
		lines  []Line
		ok     bool
	}{
		{"amount and tax", "811.88", []Line{taxed("40", "18.75", "8.25")}, true},
		{"amount without its tax", "750.00", []Line{taxed("40", "18.75", "8.25")}, false},
		{"tax not rounded", "811.875", []Line{taxed("40", "18.75", "8.25")}, false},
		{"half a cent of tax rounds up", "0.11", []Line{taxed("1", "0.10", "5")}, true},
		{"each line's tax rounds on its own", "0.22", []Line{taxed("1", "0.10", "5"), taxed("1", "0.10", "5")}, true},
		{"the tax is not rounded as a whole", "0.21", []Line{taxed("1", "0.10", "5"), taxed("1", "0.10", "5")}, false},
		{"a discount line and its negative tax", "97.42", []Line{taxed("1", "100", "8.25"), taxed("1", "-10", "8.25")}, true},
		{"a negative tie rounds away from zero", "10.39",
			[]Line{taxed("1", "10", "5"), taxed("1", "-0.10", "5")}, true}, // 10.00 + 0.50 − 0.10 − 0.01
		{"untaxed lines add up as before", "25.50", []Line{taxed("2", "10.25", ""), taxed("1", "5", "")}, true},
		{"zero rate", "25.50", []Line{taxed("2", "10.25", "0"), taxed("1", "5", "0")}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(draft(c.amount, c.lines...))
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok {
				ve := rule.As(err)
				if ve == nil || len(ve.Fields["lines"]) == 0 {
					t.Fatalf("accepted, want errors.lines; got %v", err)
				}
			}
		})
	}
	msg := strings.Join(rule.As(Validate(draft("750.00", taxed("40", "18.75", "8.25")))).Fields["lines"], " ")
	if !strings.Contains(msg, "811.88") || !strings.Contains(msg, "750.00") || !strings.Contains(msg, "tax") {
		t.Errorf("message %q does not name both sums and the tax", msg)
	}
}

func TestTaxRateRules(t *testing.T) {
	t.Parallel()
	for rate, ok := range map[string]bool{
		"0": true, "8.25": true, "8.2500": true, "0.0001": true, "99.9999": true, "100": true, "100.0000": true,
		"100.00001": false, "100.0001": false, "8.12345": false, "0.00001": false, "-0.0001": false, "-8.25": false,
		"101": false, "1E+3": false, "1E-5": false,
	} {
		l := taxed("1", "10", rate)
		amount := add(LineTotal(l), LineTax(l))
		if !ok {
			amount = d("10.00")
		}
		err := Validate(draft(text(cents(amount)), l))
		fields := map[string][]string{}
		if ve := rule.As(err); ve != nil {
			fields = ve.Fields
		}
		switch {
		case ok && err != nil:
			t.Errorf("taxRate %s refused: %v", rate, err)
		case !ok && len(fields["lines[0].taxRate"]) == 0:
			t.Errorf("taxRate %s: want errors[lines[0].taxRate], got %v", rate, err)
		case !ok && len(fields["lines"]) > 0:
			t.Errorf("taxRate %s: a refused rate also said the lines do not add up: %v", rate, fields["lines"])
		}
	}
}
