package paypage

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
)

func dec(s string) apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic(err)
	}
	return *d
}

func TestParseAmount(t *testing.T) {
	balance := dec("1234.56")
	cases := []struct {
		in, want string // want "" means refused
	}{
		{"", "1234.56"}, // empty: the whole balance
		{"12.3", "12.30"},
		{"12", "12.00"},
		{"12.", "12.00"},
		{"$7.05", "7.05"},
		{" 1,234.56 ", "1234.56"},
		{"0.01", "0.01"},
		{"0.10", "0.10"},
		{"1234.560", "1234.56"}, // a trailing zero is still cents
		{"1234.57", ""},
		{"0", ""},
		{"0.00", ""},
		{"0.001", ""},
		{"12.345", ""},
		{"-1", ""},
		{"1e2", ""},
		{"NaN", ""},
		{"Infinity", ""},
		{"1,23.00", ""},
		{"12,34", ""},
		{"ten", ""},
		{"0x10", ""},
	}
	for _, c := range cases {
		got, msg := parseAmount(c.in, balance)
		switch {
		case c.want == "" && msg == "":
			t.Errorf("%q: accepted as %s", c.in, got.Text('f'))
		case c.want != "" && msg != "":
			t.Errorf("%q: refused: %s", c.in, msg)
		case c.want != "" && got.Text('f') != c.want:
			t.Errorf("%q: %s, want %s", c.in, got.Text('f'), c.want)
		}
	}
	// Amounts float cannot hold exactly stay exact.
	if got, msg := parseAmount("0.29", dec("999999999.99")); msg != "" || got.Text('f') != "0.29" {
		t.Errorf("0.29: %s %s", got.Text('f'), msg)
	}
	if got, msg := parseAmount("999999999.99", dec("999999999.99")); msg != "" || got.Text('f') != "999999999.99" {
		t.Errorf("largest: %s %s", got.Text('f'), msg)
	}
}

func TestParseExpiry(t *testing.T) {
	now := time.Date(2026, time.March, 31, 23, 59, 0, 0, time.UTC)
	cases := []struct{ in, want string }{
		{"0326", "0326"}, // good through the end of its month
		{"03/26", "0326"},
		{"3/26", "0326"},
		{"03 / 2026", "0326"},
		{"1299", ""}, // more than 20 years ahead
		{"1246", "1246"},
		{"0226", ""},
		{"1225", ""},
		{"1326", ""},
		{"0026", ""},
		{"326", ""},
		{"03-26", ""},
		{"", ""},
		{"ab26", ""},
	}
	for _, c := range cases {
		got, msg := parseExpiry(c.in, now)
		if (c.want == "") != (msg != "") || got != c.want {
			t.Errorf("%q: %q %q, want %q", c.in, got, msg, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	now := time.Date(2026, time.March, 1, 0, 0, 0, 0, time.UTC)
	good := url.Values{"cardNumber": {"4111 1111-1111 1111"}, "expiry": {"0828"}, "cvv": {"123"}, "cardholderName": {" Dana Whitfield "},
		"amount": {"10"}, "saveCard": {"on"}, "prefers": {"text"}}
	req, errs := readForm(good).validate(dec("20.00"), now)
	if errs != nil {
		t.Fatalf("refused: %v", errs)
	}
	if req.Card.Number != "4111111111111111" || req.Card.Expiry != "0828" || req.Card.CVV != "123" || req.Card.Name != "Dana Whitfield" ||
		req.Amount.Text('f') != "10.00" || !req.SaveCard || req.Prefers != "text" {
		t.Fatalf("request: %+v", req)
	}

	cases := map[string]struct {
		field, value string
	}{
		"cardNumber":     {"cardNumber", "4111111111111121"},
		"letters":        {"cardNumber", "4111abcd11111111"},
		"twenty digits":  {"cardNumber", "41111111111111111113"},
		"cvv":            {"cvv", "12345"},
		"name":           {"cardholderName", ""},
		"control":        {"cardholderName", "Dana\x00"},
		"long name":      {"cardholderName", strings.Repeat("a", 201)},
		"amount":         {"amount", "20.01"},
		"prefers":        {"prefers", "fax"},
		"expiry":         {"expiry", "0226"},
		"expiry missing": {"expiry", ""},
	}
	for name, c := range cases {
		v := url.Values{}
		for k, vs := range good {
			v[k] = vs
		}
		v.Set(c.field, c.value)
		f := readForm(v)
		if _, errs := f.validate(dec("20.00"), now); errs[c.field] == "" || len(errs) != 1 {
			t.Errorf("%s: errors %v", name, errs)
		}
		if r := f.redisplay(); r.CardNumber != "" || r.CVV != "" {
			t.Errorf("%s: redisplay keeps the card number or security code", name)
		}
	}
}
