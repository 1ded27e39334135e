package invoice

import "testing"

// Amounts as every front shows them: the pay page, the PDF, the portal and
// the messages.
func TestMoney(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0": "$0.00", "0.01": "$0.01", "12.30": "$12.30", "999.99": "$999.99", "1000.00": "$1,000.00",
		"1234.5": "$1,234.50", "999999999.99": "$999,999,999.99", "-5": "-$5.00", "100": "$100.00", "5": "$5.00",
		"0.005": "$0.01",
	} {
		if got := Money(d(in)); got != want {
			t.Errorf("Money(%s) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{"0.0149": "$0.0149", "12.5": "$12.50", "1000.1234": "$1,000.1234", "-10": "-$10.00", "3.0000": "$3.00"} {
		if got := UnitMoney(d(in)); got != want {
			t.Errorf("UnitMoney(%s) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{"1": "1", "1250.50": "1,250.5", "0.125": "0.125"} {
		if got := Quantity(d(in)); got != want {
			t.Errorf("Quantity(%s) = %s, want %s", in, got, want)
		}
	}
}
