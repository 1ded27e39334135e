package portal

import (
	"html/template"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
)

// chartDays is how many days the deposits chart shows, today included.
const chartDays = 30

// The chart's drawing, in the SVG's own units (its viewBox; it scales to
// the page's width): a bar a day from plotLeft, above the zero line for a
// positive net, below it for a negative one, the tallest plotHeight high.
const (
	chartWidth  = 640
	chartHeight = 230
	plotLeft    = 94
	plotTop     = 16
	plotHeight  = 170
	slotWidth   = 18
	barWidth    = 12
)

// depositChart is the last days' net deposits drawn as bars: every
// coordinate is computed from the decimals with apd and written with one
// decimal place, so that no amount passes through a float; the amounts
// shown (labels, the table beside it) are the decimals themselves.
type depositChart struct {
	Width, Height int
	Days          []payment.DayNet
	Bars          []chartBar
	// Zero is the y of the zero line; Top and Bottom the amounts at the
	// plot's top and bottom edges (the largest net, and the most
	// negative or 0), labelled at TopY and BottomY.
	Zero, TopY, BottomY string
	Top, Bottom         string
	// ZeroLabelled: the zero line is labelled, being neither edge.
	ZeroLabelled bool
	ZeroY        string
	Left, Right  string // the x of the plot's edges
	LabelX       string // where the amount labels end
	DayY         string // the baseline of the day labels
	First, Last  chartDay
	Total        apd.Decimal
	Deposits     int
	// Rows are the table's days with deposits, newest first (no empty
	// days before them), and TotalText, DepositsText its foot,
	// each cell's text made before the template runs (as invoiceLine).
	Rows                    []chartRow
	TotalText, DepositsText string
}

// chartRow is a day of the table beside the chart.
type chartRow struct {
	Day        template.HTML
	Count, Net string
}

type chartBar struct {
	X, Y, W, H string
	Negative   bool
	Day        payment.DayNet
	// Label is the bar's tooltip: its day and net amount.
	Label string
}

type chartDay struct {
	X     string
	Day   time.Time
	Label string
}

// chartMath is the precision of the chart's arithmetic: more digits than
// any amount has.
var chartMath = apd.BaseContext.WithPrecision(40)

// units is n of the SVG's units, exactly.
func units(n int64) *apd.Decimal { return apd.New(n, 0) }

// coordinate is d rounded half up to one decimal place, as SVG reads it.
func coordinate(d *apd.Decimal) string {
	var r apd.Decimal
	if _, err := chartMath.Quantize(&r, d, -1); err != nil {
		return "0"
	}
	return r.Text('f')
}

// newDepositChart draws days, oldest first.
func newDepositChart(days []payment.DayNet) depositChart {
	c := depositChart{Width: chartWidth, Height: chartHeight, Days: days,
		Left: coordinate(units(plotLeft - 4)), Right: coordinate(units(plotLeft + int64(len(days))*slotWidth)),
		LabelX: coordinate(units(plotLeft - 8)), DayY: coordinate(units(plotTop + plotHeight + 24))}
	// The plot spans from the largest net (at least 0) at its top to the
	// most negative (at most 0) at its bottom.
	var high, low apd.Decimal
	for _, d := range days {
		if d.Net.Cmp(&high) > 0 {
			high.Set(&d.Net)
		}
		if d.Net.Cmp(&low) < 0 {
			low.Set(&d.Net)
		}
		_, _ = chartMath.Add(&c.Total, &c.Total, &d.Net)
		c.Deposits += d.Count
	}
	var span apd.Decimal
	_, _ = chartMath.Sub(&span, &high, &low)
	// scaled is amount's share of the span, in units of the plot's height.
	scaled := func(amount *apd.Decimal) *apd.Decimal {
		var r apd.Decimal
		if span.IsZero() {
			return &r
		}
		_, _ = chartMath.Mul(&r, amount, units(plotHeight))
		_, _ = chartMath.Quo(&r, &r, &span)
		return &r
	}
	var zero apd.Decimal
	_, _ = chartMath.Add(&zero, units(plotTop), scaled(&high))
	if span.IsZero() { // nothing to draw: the zero line at the bottom
		zero.Set(units(plotTop + plotHeight))
	}
	c.Zero = coordinate(&zero)
	c.ZeroLabelled = high.Sign() > 0 && low.Sign() < 0
	var zeroY apd.Decimal
	_, _ = chartMath.Add(&zeroY, &zero, units(4))
	c.ZeroY = coordinate(&zeroY)
	c.Top, c.Bottom = invoice.Money(high), invoice.Money(low)
	c.TopY, c.BottomY = coordinate(units(plotTop+4)), coordinate(units(plotTop+plotHeight+4))
	c.TotalText, c.DepositsText = invoice.Money(c.Total), strconv.Itoa(c.Deposits)
	c.Bars = make([]chartBar, 0, len(days))
	w := coordinate(units(barWidth))
	for i, d := range days {
		if d.Count > 0 { // the table: days with deposits, newest first
			c.Rows = slices.Insert(c.Rows, 0, chartRow{Day: day(d.Day), Count: strconv.Itoa(d.Count), Net: invoice.Money(d.Net)})
		}
		x := units(plotLeft + int64(i)*slotWidth + (slotWidth-barWidth)/2)
		var height apd.Decimal
		height.Abs(scaled(&d.Net))
		b := chartBar{X: coordinate(x), W: w, H: coordinate(&height), Day: d, Negative: d.Net.Negative,
			Label: d.Day.Format("2 Jan 2006") + ": " + invoice.Money(d.Net)}
		var y apd.Decimal // apd values are copied with Set, never =
		y.Set(&zero)
		if !d.Net.Negative {
			_, _ = chartMath.Sub(&y, &zero, &height)
		}
		b.Y = coordinate(&y)
		c.Bars = append(c.Bars, b)
	}
	if len(days) > 0 {
		c.First = chartDay{X: coordinate(units(plotLeft)), Day: days[0].Day, Label: days[0].Day.Format("2 Jan")}
		last := days[len(days)-1].Day
		c.Last = chartDay{X: coordinate(units(plotLeft + int64(len(days))*slotWidth)), Day: last, Label: last.Format("2 Jan")}
	}
	return c
}
