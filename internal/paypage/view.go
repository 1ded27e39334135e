package paypage

import (
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/payment"
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
	// Left is what is left to pay while payments under way hold part of
	// the balance (payment.LeftToPay), "" while none does.
	Left string
	// Consent is the words of the consent to future charges, "" where
	// the page does not offer it.
	Consent string
	Errors  web.Errors
	Alert   *alert
	Receipt receiptView
	Back    string
	// PDF is the address of the page's document as a PDF.
	PDF string
	// AccentCSS is the address of the business's accent colour's
	// stylesheet, or "".
	AccentCSS string

	// Message pages (not found, refused, failures).
	Heading    string
	Paragraphs []string
}

// consentView is the words of the consent to future charges, when offered.
func consentView(offered bool, inv invoice.Invoice) string {
	if !offered {
		return ""
	}
	return payment.ChargeConsentWords(biller(inv))
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
	Biller    string
	LegalName string
	// Logo is the business's, or nil; Footer its invoice footer.
	Logo          *directory.Logo
	Footer        string
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
	Subtotal      string // the lines' amounts, before tax
	Tax           string
	Amount        string // the total
	AmountPaid    string
	Balance       string
	Status        string
	PaidAt        string
	CancelledAt   string
}

// lineView is a line as the page shows it; TaxRate is "" without tax.
type lineView struct{ Description, Quantity, UnitCost, TaxRate, Total string }

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
		Biller: biller(inv), LegalName: b.LegalName(), Logo: b.Branding.Logo, Footer: b.Branding.InvoiceFooter, Address: b.Address, Phone: b.Phone, Email: b.Email,
		Contact: b.Contact(), InvoiceNumber: inv.InvoiceNumber, CustomerName: optional.Value(inv.CustomerName),
		PONumber: optional.Value(inv.PONumber), Memo: optional.Value(inv.Memo),
		Amount: invoice.Money(inv.Amount), Subtotal: invoice.Money(inv.Subtotal()), Tax: invoice.Money(inv.TaxAmount),
		AmountPaid: invoice.Money(inv.AmountPaid), Balance: invoice.Money(inv.Balance()),
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
		lv := lineView{Description: l.Description, Quantity: invoice.Quantity(l.Quantity),
			UnitCost: invoice.UnitMoney(l.UnitCost), Total: invoice.Money(invoice.LineTotal(l))}
		if l.TaxRate != nil {
			lv.TaxRate = invoice.Percent(*l.TaxRate)
		}
		v.Lines = append(v.Lines, lv)
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
		Amount: invoice.Money(p.Amount), Card: card, PayerName: optional.Value(p.PayerName),
		PaidAt: p.PaidAt.In(zone).Format("January 2, 2006, 3:04 PM MST"), RetRef: optional.Value(p.RetRef),
		BalanceAfter: invoice.Money(balanceAfter), SavedCard: p.SavedCard,
	}
}

// day is the date of t in its own zone.
func day(t time.Time) string { return t.Format("January 2, 2006") }

// accentCSS is the address of the stylesheet of the business's accent
// colour ("" without one): the colour is in the address (serveAccent).
func accentCSS(inv invoice.Invoice) string {
	if c := inv.Biller.Branding.AccentColor; c != "" {
		return accentPrefix + strings.TrimPrefix(c, "#") + ".css"
	}
	return ""
}
