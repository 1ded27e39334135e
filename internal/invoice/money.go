package invoice

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// money is the arithmetic context for every amount: 34 significant digits,
// ties rounded half up (away from zero), errors on any inexact surprise.
var money = apd.Context{Precision: 34, MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent,
	Rounding: apd.RoundHalfUp, Traps: apd.DefaultTraps}

// maxAmount is the largest invoice amount.
var maxAmount = mustParse("999999999.99")

// maxUnit bounds quantities and unit costs (13 integer digits), so line
// totals always fit the amount columns' arithmetic.
var maxUnit = mustParse("9999999999999")

func mustParse(s string) apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic(err)
	}
	return *d
}

// places is the number of decimal places a value needs once trailing
// zeros are dropped: 12.300 needs 1.
func places(d apd.Decimal) int32 {
	var r apd.Decimal
	r.Reduce(&d)
	if r.Exponent >= 0 {
		return 0
	}
	return -r.Exponent
}

// cents returns d rounded half up to two decimal places (a zero without
// a sign: a rate of -0 or a tax of -0.004 is 0.00).
func cents(d apd.Decimal) apd.Decimal {
	var r apd.Decimal
	if _, err := money.Quantize(&r, &d, -2); err != nil {
		panic(fmt.Sprintf("invoice: quantize %s: %v", d.String(), err))
	}
	r.Negative = r.Negative && !r.IsZero() // never "-0.00"
	return r
}

// lineTotal is round-half-up(quantity × unitCost, 2).
func lineTotal(quantity, unitCost apd.Decimal) apd.Decimal {
	var p apd.Decimal
	if _, err := money.Mul(&p, &quantity, &unitCost); err != nil {
		panic(fmt.Sprintf("invoice: multiply: %v", err))
	}
	return cents(p)
}

func add(x, y apd.Decimal) apd.Decimal {
	var r apd.Decimal
	if _, err := money.Add(&r, &x, &y); err != nil {
		panic(fmt.Sprintf("invoice: add: %v", err))
	}
	return r
}

func sub(x, y apd.Decimal) apd.Decimal {
	var r apd.Decimal
	if _, err := money.Sub(&r, &x, &y); err != nil {
		panic(fmt.Sprintf("invoice: subtract: %v", err))
	}
	return r
}

// Plain is how quantities and unit costs are shown: without trailing
// zeros (2.50 → 2.5, 3.0000 → 3), never in exponent form.
func Plain(d apd.Decimal) apd.Decimal {
	var r apd.Decimal
	r.Reduce(&d)
	if r.Exponent > 0 {
		// 1E+1 prints as 10, never in exponent form.
		_, _ = money.Quantize(&r, &r, 0)
	}
	return r
}

// parseNumeric reads a NUMERIC column's text.
func parseNumeric(s string) (apd.Decimal, error) {
	var d apd.Decimal
	if err := numeric(&d, s); err != nil {
		return apd.Decimal{}, err
	}
	return d, nil
}

// numeric sets d to the numeric text s, in place.
func numeric(d *apd.Decimal, s string) error {
	if _, _, err := d.SetString(s); err != nil {
		return fmt.Errorf("invoice: numeric %q: %w", s, err)
	}
	return nil
}

// text is d in plain notation.
func text(d apd.Decimal) string { return d.Text('f') }

// Money is an amount as people read it, in dollars with thousands
// separators and cents: "$1,234.50", "-$5.00".
func Money(d apd.Decimal) string { return dollars(cents(d)) }

// UnitMoney is a unit cost as people read it: at least cents, more places
// when it has them ("$0.0149").
func UnitMoney(d apd.Decimal) string {
	p := Plain(d)
	if p.Exponent >= -2 {
		return Money(p)
	}
	return dollars(p)
}

// Percent is a tax rate as people read it: "8.25%", "10%".
func Percent(rate apd.Decimal) string { return text(Plain(rate)) + "%" }

// Quantity is a quantity as people read it: thousands separators and no
// trailing zeros ("1,250.5").
func Quantity(d apd.Decimal) string { return grouped(text(Plain(d))) }

// dollars is d with a dollar sign and thousands separators, its places as
// they are.
func dollars(d apd.Decimal) string {
	s := text(d)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	return sign + "$" + grouped(s)
}

// grouped puts thousands separators into a plain decimal's integer part.
func grouped(s string) string {
	whole, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	return b.String()
}

// maxTaxRate is the largest tax rate, a percent.
var maxTaxRate = mustParse("100")

// TaxRateProblem says what is wrong with a line's tax rate, or "" (nil,
// no tax, is fine).
func TaxRateProblem(rate *apd.Decimal) string {
	switch {
	case rate == nil:
		return ""
	case rate.Sign() < 0 || rate.Cmp(&maxTaxRate) > 0:
		return "must be a percent from 0 to 100"
	case places(*rate) > 4:
		return "must have at most 4 decimal places"
	}
	return ""
}

// LineTax is a line's tax amount: round-half-up(amount × taxRate ÷ 100, 2)
// of its amount (LineTotal); 0.00 without a rate. A discount line's tax is
// negative, rounded away from zero as its amount is.
func LineTax(l Line) apd.Decimal {
	if l.TaxRate == nil {
		return cents(apd.Decimal{})
	}
	amount := LineTotal(l)
	var p apd.Decimal
	if _, err := money.Mul(&p, &amount, l.TaxRate); err != nil {
		panic(fmt.Sprintf("invoice: multiply: %v", err))
	}
	// ÷ 100 moves the point: exact, whatever the precision.
	p.Exponent -= 2
	return cents(p)
}

// Totals are the lines' subtotal (the sum of their amounts) and tax (the
// sum of their tax amounts), both in cents; an invoice's amount is their
// sum when its lines add up.
func Totals(lines []Line) (subtotal, tax apd.Decimal) {
	subtotal, tax = cents(apd.Decimal{}), cents(apd.Decimal{})
	for _, l := range lines {
		subtotal, tax = add(subtotal, LineTotal(l)), add(tax, LineTax(l))
	}
	return cents(subtotal), cents(tax)
}

// Subtotal is the invoice's amount before tax: its lines' amounts, or its
// amount when it has no lines.
func (inv *Invoice) Subtotal() apd.Decimal { return cents(sub(inv.Amount, inv.TaxAmount)) }
