package portal

import (
	"html/template"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/payment"
)

// funcs are the portal's template functions beside web.Funcs: amounts,
// moments in a location's time zone, calendar dates and quantities.
var funcs = template.FuncMap{
	"money":       func(d apd.Decimal) string { return invoice.Money(d) },
	"minus":       minus,
	"plain":       plain,
	"moment":      moment,
	"day":         day,
	"method":      invoicepdf.MethodText,
	"lineTotal":   invoice.LineTotal,
	"statusLabel": statusLabel,
	"brand":       payment.BrandName,
	"channel":     channelLabel,
	"inc":         func(i int) int { return i + 1 },
	"lower":       strings.ToLower,
	// The scripts' addresses (assets.go).
	"linesScript": func() string { return linesScript },
	"copyScript":  func() string { return copyScript },
}

// minus is money that goes back (a deposit's refunds) as people read it
// beside what came in: negative, "-$25.00"; nothing is "$0.00".
func minus(d apd.Decimal) string {
	if d.Sign() > 0 {
		return "-" + invoice.Money(d)
	}
	return invoice.Money(d)
}

// plain is a quantity or a unit cost as people read it: no trailing zeros,
// never in exponent form.
func plain(d apd.Decimal) string {
	p := invoice.Plain(d)
	return p.Text('f')
}

// moment is an instant (a time.Time or a *time.Time; nil shows nothing)
// as a <time> element, read in zone, the time zone of the location it
// concerns: ISO 8601 with the zone's offset for machines, words for
// people ("30 Nov 2026, 09:04 CST").
func moment(v any, zone *time.Location) template.HTML {
	t, ok := timeOf(v)
	if !ok {
		return ""
	}
	if zone == nil {
		zone = time.UTC
	}
	t = t.In(zone)
	return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `">` +
		template.HTMLEscapeString(t.Format("2 Jan 2006, 15:04 MST")) + `</time>`)
}

// day is a calendar date (a due date, a batch's day: no time of day, no
// zone) as a <time> element.
func day(v any) template.HTML {
	t, ok := timeOf(v)
	if !ok {
		return ""
	}
	return template.HTML(`<time datetime="` + t.Format(time.DateOnly) + `">` + t.Format("2 Jan 2006") + `</time>`)
}

func timeOf(v any) (time.Time, bool) {
	switch v := v.(type) {
	case time.Time:
		return v, !v.IsZero()
	case *time.Time:
		if v == nil {
			return time.Time{}, false
		}
		return *v, !v.IsZero()
	}
	return time.Time{}, false
}

// channelLabel is how a message goes, as people say it.
func channelLabel(ch string) string {
	if ch == invoice.Text {
		return "text message"
	}
	return "email"
}
