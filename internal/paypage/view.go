package paypage

import (
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/web"
)

// page is what every template renders; each page fills what it shows.
type page struct {
	Title      string
	Stylesheet string

	// The pay page and the receipt.
	Invoice   invoiceView
	ShowForm  bool
	Action    string
	FormToken string
	Form      form
	Errors    web.Errors
	Alert     *alert
	Receipt   receiptView
	Back      string
	// PDF is the address of the page's document as a PDF.
	PDF string

	// Message pages (not found, refused, failures).
	Heading    string
	Paragraphs []string
}

// Errored: the page shows an error (its title says so first).
func (p page) Errored() bool { return len(p.Errors) > 0 || (p.Alert != nil && p.Alert.Kind == "error") }

type alert struct {
	Kind       string // error, info
	Paragraphs []string
}

type invoiceView struct {
	// Who bills: the name the customer knows (the location's receipt name,
	// else its name), the organization's when it differs, and how to reach
	// the location.
	Biller        string
	LegalName     string
	Address       []string
	Phone         string
	Email         string
	Contact       string
	InvoiceNumber string
	CustomerName  string
	PONumber      string
	Memo          string
	DueDate       string
	Lines         []lineView
	Amount        string
	AmountPaid    string
	Balance       string
	Status        string
	PaidAt        string
	CancelledAt   string
}

type lineView struct{ Description, Quantity, UnitCost, Total string }

type receiptView struct {
	Amount       string
	Card         string
	PayerName    string
	PaidAt       string
	RetRef       string
	BalanceAfter string
	SavedCard    bool
}

func biller(inv invoice.Invoice) string {
	if name := inv.Biller.Name(); strings.TrimSpace(name) != "" {
		return name
	}
	return "your merchant"
}

func viewOf(inv invoice.Invoice) invoiceView {
	b := inv.Biller
	v := invoiceView{
		Biller: biller(inv), LegalName: b.LegalName(), Address: b.Address, Phone: b.Phone, Email: b.Email,
		Contact: b.Contact(), InvoiceNumber: inv.InvoiceNumber, CustomerName: optional.Value(inv.CustomerName),
		PONumber: optional.Value(inv.PONumber), Memo: optional.Value(inv.Memo),
		Amount: money(inv.Amount), AmountPaid: money(inv.AmountPaid), Balance: money(inv.Balance()),
		Status: string(inv.Status),
	}
	if inv.DueDate != nil {
		v.DueDate = inv.DueDate.Format("January 2, 2006")
	}
	if inv.PaidAt != nil {
		v.PaidAt = day(inv.PaidAt.In(b.Zone()))
	}
	if inv.CancelledAt != nil {
		v.CancelledAt = day(inv.CancelledAt.In(b.Zone()))
	}
	for _, l := range inv.Lines {
		q := invoice.Plain(l.Quantity)
		v.Lines = append(v.Lines, lineView{Description: l.Description, Quantity: grouped(q.Text('f')),
			UnitCost: unitMoney(l.UnitCost), Total: money(invoice.LineTotal(l))})
	}
	return v
}

// receiptOf is a payment's receipt; its time is given in zone, the
// location's.
func receiptOf(p invoice.Payment, balanceAfter apd.Decimal, zone *time.Location) receiptView {
	card := "Card"
	if b := optional.Value(p.CardBrand); b != "" {
		card = b
	}
	if l := optional.Value(p.LastFour); l != "" {
		card += " ending in " + l
	}
	return receiptView{
		Amount: money(p.Amount), Card: card, PayerName: optional.Value(p.PayerName),
		PaidAt: p.PaidAt.In(zone).Format("January 2, 2006, 3:04 PM MST"), RetRef: optional.Value(p.RetRef),
		BalanceAfter: money(balanceAfter), SavedCard: p.SavedCard,
	}
}

// day is the date of t in its own zone.
func day(t time.Time) string { return t.Format("January 2, 2006") }

var decimals = apd.BaseContext.WithPrecision(34)

// money is an amount in dollars: "$1,234.50", "-$5.00".
func money(d apd.Decimal) string {
	var q apd.Decimal
	if _, err := decimals.Quantize(&q, &d, -2); err != nil {
		return d.Text('f')
	}
	return dollars(q)
}

// unitMoney is a unit cost: at least cents, more places when it has them
// ("$0.0149").
func unitMoney(d apd.Decimal) string {
	r := invoice.Plain(d)
	if r.Exponent > -2 {
		return money(r)
	}
	return dollars(r)
}

func dollars(d apd.Decimal) string {
	s := d.Text('f')
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
