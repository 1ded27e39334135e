package web

import "testing"

// The one table of how a typed number reads, for every form.
func TestDecimal(t *testing.T) {
	for _, c := range []struct {
		in    string
		money bool
		want  string // "" means refused
	}{
		{"12", false, "12"},
		{" 12.5 ", false, "12.5"},
		{"1.2345", false, "1.2345"},
		{"12.", true, "12"},
		{"12.30", true, "12.30"},
		{"$7.05", true, "7.05"},
		{"-$5", true, "-5"},
		{"-19.99", true, "-19.99"},
		{"1,234.56", true, "1234.56"},
		{"$1,234.56", true, "1234.56"},
		{"1,234,567", false, "1234567"},
		{"0.29", true, "0.29"}, // float cannot hold it
		{"999999999.99", true, "999999999.99"},
		{"$7", false, ""}, // a dollar sign only on money
		{"", true, ""},
		{"5,00", true, ""}, // a comma for cents: refused, never 500
		{"1,2", true, ""},
		{"12,34", true, ""},
		{"1,23,4.00", true, ""},
		{"1,23.00", true, ""},
		{",123", true, ""},
		{".5", true, ""},
		{"1e2", true, ""},
		{"NaN", true, ""},
		{"Infinity", true, ""},
		{"0x10", true, ""},
		{"ten", true, ""},
		{"1 234", true, ""},
		{"--1", true, ""},
		{"12345678901234567890123456789012345678901", false, ""}, // over 40 characters
	} {
		got, ok := Decimal(c.in, c.money)
		switch {
		case c.want == "" && ok:
			t.Errorf("%q (money %v): read as %s, want refused", c.in, c.money, got.Text('f'))
		case c.want != "" && !ok:
			t.Errorf("%q (money %v): refused, want %s", c.in, c.money, c.want)
		case c.want != "" && got.Text('f') != c.want:
			t.Errorf("%q (money %v): %s, want %s", c.in, c.money, got.Text('f'), c.want)
		}
	}
	if _, msg := ReadMoney("5,00", "other"); msg != "Use a dot for cents, as in 5.00." {
		t.Errorf("a comma: %q", msg)
	}
	if _, msg := ReadMoney("ten", "other"); msg != "other" {
		t.Errorf("no comma: %q", msg)
	}
	if d, msg := ReadMoney("$1,234.50", "other"); msg != "" || d.Text('f') != "1234.50" {
		t.Errorf("$1,234.50: %s %q", d.Text('f'), msg)
	}
}
