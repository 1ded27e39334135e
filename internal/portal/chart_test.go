package portal

import (
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/payment"
)

func days(nets ...string) []payment.DayNet {
	out := make([]payment.DayNet, len(nets))
	first := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, n := range nets {
		d, _, err := apd.NewFromString(n)
		if err != nil {
			panic(err)
		}
		out[i] = payment.DayNet{Day: first.AddDate(0, 0, i), Net: *d, Count: 1}
	}
	return out
}

// Bars stand on the zero line, up for a positive net and down for a
// negative one, in proportion to the span from the most negative to the
// largest net: exactly, from the decimals (here 6.8 units a dollar).
func TestDepositChartGeometry(t *testing.T) {
	c := newDepositChart(days("10.00", "-5.00", "0.00", "20.00"))
	if c.Zero != "152.0" || c.Top != "$20.00" || c.Bottom != "-$5.00" || c.Total.Text('f') != "25.00" || c.Deposits != 4 {
		t.Errorf("zero line %s, top %s, bottom %s, total %s, %d deposits", c.Zero, c.Top, c.Bottom, c.Total.Text('f'), c.Deposits)
	}
	want := []struct{ y, h string }{{"84.0", "68.0"}, {"152.0", "34.0"}, {"152.0", "0.0"}, {"16.0", "136.0"}}
	for i, w := range want {
		if b := c.Bars[i]; b.Y != w.y || b.H != w.h || b.Negative != (i == 1) {
			t.Errorf("bar %d at y %s, %s high (negative %v); want %s, %s", i, b.Y, b.H, b.Negative, w.y, w.h)
		}
	}
	if c.Bars[1].X != "115.0" || c.Last.X != "166.0" {
		t.Errorf("bar 1 at x %s, the last day's label at %s", c.Bars[1].X, c.Last.X)
	}
}

// Amounts no float holds exactly keep their proportions: a cent beside
// the largest amount a deposit may have is drawn, rounded, as nothing; no
// deposits at all draw the zero line at the bottom, and no bar.
func TestDepositChartEdges(t *testing.T) {
	c := newDepositChart(days("99999999999.99", "0.01", "0.10"))
	if c.Bars[0].H != "170.0" || c.Bars[1].H != "0.0" || c.Top != "$99,999,999,999.99" || c.Total.Text('f') != "100000000000.10" {
		t.Errorf("bars %+v, top %s, total %s", c.Bars, c.Top, c.Total.Text('f'))
	}
	empty := newDepositChart(days("0.00", "0.00"))
	if empty.Zero != "186.0" || empty.Bars[0].H != "0.0" || empty.Top != "$0.00" || empty.Bottom != "$0.00" {
		t.Errorf("an empty chart: zero line at %s, bars %+v", empty.Zero, empty.Bars)
	}
}
