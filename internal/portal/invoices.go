package portal

import (
	"context"
	"html/template"
	"net/http"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/payment"
)

// The invoices: the list (filters, pages, CSV), an invoice's page, its
// PDF, and what is done to it (send, cancel); making one is in
// invoice_form.go, payments recorded outside the card in
// invoice_payments.go. Each calls the invoice package as the API does.

const invoicesPath = "/portal/invoices"

var invoiceStatuses = []string{string(invoice.Open), string(invoice.PartPaid), string(invoice.Paid), string(invoice.Cancelled)}

// statusLabel is an invoice's status as people read it.
func statusLabel(s string) string { return invoice.Status(s).Label() }

// invoiceRow is an invoice as a list shows it: its times in its
// location's time zone, and whether it is overdue there.
type invoiceRow struct {
	invoice.Invoice
	Zone    *time.Location
	Overdue bool
}

// StatusLabel is the status as the invoice's row and page say it, in the
// words a business reads: "Overdue" for an open one past its due date,
// "Open · not sent" for one never sent, "Paid · $X refunded" for a paid
// one whose card payments were refunded (in part or whole).
func (r invoiceRow) StatusLabel() string {
	switch {
	case r.Status == invoice.Paid && r.Refunded():
		return "Paid · " + invoice.Money(r.AmountRefunded) + " refunded"
	case r.Overdue && r.Status == invoice.Open:
		return "Overdue"
	case r.Overdue:
		return statusLabel(string(r.Status)) + ", overdue"
	case r.Status == invoice.Open && r.SentAt == nil:
		return "Open · not sent"
	}
	return statusLabel(string(r.Status))
}

// StatusClass is the class that colours the status (beside its words).
func (r invoiceRow) StatusClass() string {
	switch {
	case r.Status == invoice.Paid && r.Refunded():
		return "status status-refunded"
	case r.Overdue:
		return "status status-overdue"
	}
	return "status status-" + string(r.Status)
}

// OwedText is the balance as shown: none for a cancelled invoice.
func (r invoiceRow) OwedText() string {
	if r.Status == invoice.Cancelled {
		return "—"
	}
	return invoice.Money(r.Owed())
}

// Owed is the balance: what is left to pay.
func (r invoiceRow) Owed() apd.Decimal { return r.Invoice.Balance() }

// Refunded says whether any of its card payments was refunded.
func (r invoiceRow) Refunded() bool { return r.AmountRefunded.Sign() != 0 }

// ReminderChoice is the invoice's own choice of reminders, "on" or
// "off", or "" when it follows the organization's settings.
func (r invoiceRow) ReminderChoice() string {
	switch {
	case r.Reminders == nil:
		return ""
	case *r.Reminders:
		return "on"
	}
	return "off"
}

func rowOf(inv invoice.Invoice, zone *time.Location, now time.Time) invoiceRow {
	return invoiceRow{Invoice: inv, Zone: zone, Overdue: inv.Status.Payable() && inv.DueDate != nil &&
		inv.DueDate.Format(time.DateOnly) < now.In(zone).Format(time.DateOnly)}
}

// account is a MID as the portal offers and shows it: with its
// location's name and time zone, and whether the location takes invoices.
type account struct {
	directory.MerchantAccount
	Location string
	Zone     *time.Location
	Active   bool
}

// places are the member's organization's locations and MIDs, read once a
// request (a list page needs the time zone of its date filters and the
// MIDs its filter offers or its rows name).
type places struct {
	zone     *time.Location
	accounts []account
}

const placesKey = "portal.places"

func (h *handler) places(c echo.Context) (*places, error) {
	if p, ok := c.Get(placesKey).(*places); ok {
		return p, nil
	}
	locs, mids, err := h.Directory.Places(c.Request().Context(), visitOf(c).Membership.OrganizationID)
	if err != nil {
		return nil, err
	}
	p := &places{zone: time.UTC, accounts: make([]account, len(mids))}
	// The time zone in which a member reads what concerns no one location
	// (a list's date range, an export's date): that of the organization's
	// locations when they share one, UTC otherwise.
	if len(locs) > 0 {
		p.zone = locs[0].Zone()
		for _, l := range locs[1:] {
			if l.TimeZone != locs[0].TimeZone {
				p.zone = time.UTC
				break
			}
		}
	}
	byID := make(map[uuid.UUID]directory.Place, len(locs))
	for _, l := range locs {
		byID[l.ID] = l
	}
	for i, m := range mids {
		l := byID[m.LocationID]
		p.accounts[i] = account{MerchantAccount: m, Location: l.Name, Zone: l.Zone(), Active: l.Status == "active"}
	}
	c.Set(placesKey, p)
	return p, nil
}

// accounts are the member's organization's MIDs ordered by mid.
func (h *handler) accounts(c echo.Context) ([]account, error) {
	p, err := h.places(c)
	if err != nil {
		return nil, err
	}
	return p.accounts, nil
}

// midOption is a MID as a filter's picker offers it, its id's text and
// whether it is the one chosen made before the template runs (the
// template compared each option's printed id with the form's value).
type midOption struct {
	ID, MID, Location string
	Selected          bool
}

// midOptions are accts as a picker offers them, chosen the one whose id
// is selected.
func midOptions(accts []account, selected string) []midOption {
	opts := make([]midOption, len(accts))
	for i, a := range accts {
		id := a.ID.String()
		opts[i] = midOption{ID: id, MID: a.MID, Location: a.Location, Selected: id == selected}
	}
	return opts
}

// zones maps each MID of the member's organization to its location's
// time zone.
func (h *handler) zones(c echo.Context) (map[uuid.UUID]*time.Location, error) {
	accts, err := h.accounts(c)
	if err != nil {
		return nil, err
	}
	z := make(map[uuid.UUID]*time.Location, len(accts))
	for _, a := range accts {
		z[a.ID] = a.Zone
	}
	return z, nil
}

// invoiceLine is an invoice as the list's row shows it, each cell's text
// made before the template runs: a page of 25 rows would otherwise call a
// template function or reach through invoice.Invoice (reflection) for
// each cell (issue 30: a page's CPU within twice its API call's).
type invoiceLine struct {
	ID, InvoiceNumber string
	CustomerName      *string
	CustomerEmail     string
	Amount, Owed      string
	StatusLabel       string
	StatusClass       string
	Due, Created      template.HTML
}

func lineOf(r invoiceRow) invoiceLine {
	return invoiceLine{ID: r.ID.String(), InvoiceNumber: r.InvoiceNumber, CustomerName: r.CustomerName,
		CustomerEmail: r.CustomerEmail, Amount: invoice.Money(r.Amount), Owed: r.OwedText(),
		StatusLabel: r.StatusLabel(), StatusClass: r.StatusClass(), Due: day(r.DueDate), Created: moment(r.CreatedAt, r.Zone)}
}

type invoicesData struct {
	listData[invoiceLine]
	Statuses  []string
	CanCreate bool
}

// invoices is GET /portal/invoices: the organization's invoices, newest
// first, a page at a time, filtered by status, number, customer name or
// email and the day they were made; ?format=csv exports them all.
func (h *handler) invoices(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	q, err := h.listQuery(c)
	if err != nil {
		return h.failure(c, err)
	}
	f := invoice.Filter{Status: q.Choice("status", invoiceStatuses), InvoiceNumber: q.Text("invoiceNumber", 64),
		CustomerName: q.Text("customerName", 200), CustomerEmail: q.Text("customerEmail", 254)}
	f.CreatedFrom, f.CreatedTo = q.Dates("createdFrom", "createdTo")
	data := invoicesData{Statuses: invoiceStatuses, CanCreate: m.Can(auth.PaymentsCreate)}
	data.Zone = q.Zone.String()
	if !q.Failed() {
		zones, err := h.zones(c)
		if err != nil {
			return h.failure(c, err)
		}
		list := func(ctx context.Context, limit int, cursor string) ([]invoice.Invoice, string, error) {
			return h.Invoices.List(ctx, m.OrganizationID, f, limit, cursor)
		}
		if q.CSV {
			return streamCSV(h, c, csvExport[invoice.Invoice]{Name: "invoices", Zone: q.Zone, Columns: invoiceColumns(zones), Page: list})
		}
		now := h.Now()
		row := func(inv invoice.Invoice) invoiceLine { return lineOf(rowOf(inv, zones[inv.MerchantAccountID], now)) }
		if err := fillList(ctx, q, &data.listData, invoicesPath, list, row); err != nil {
			return h.failure(c, err)
		}
	}
	if q.Failed() {
		return h.renderList(c, q, "invoices", "Invoices", data)
	}
	return h.renderDone(c, "invoices", q.Page("Invoices", data), map[string]string{"deleted": "The draft was deleted."})
}

// invoiceColumns are the columns of the invoices' CSV: the API's names for
// its fields, times in each invoice's location's time zone.
func invoiceColumns(zones map[uuid.UUID]*time.Location) []csvColumn[invoice.Invoice] {
	text := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	at := func(get func(invoice.Invoice) *time.Time) func(invoice.Invoice) string {
		return func(inv invoice.Invoice) string { return csvTime(get(inv), zones[inv.MerchantAccountID]) }
	}
	return []csvColumn[invoice.Invoice]{
		{"id", func(inv invoice.Invoice) string { return inv.ID.String() }},
		{"invoiceNumber", func(inv invoice.Invoice) string { return inv.InvoiceNumber }},
		{"status", func(inv invoice.Invoice) string { return string(inv.Status) }},
		{"amount", func(inv invoice.Invoice) string { return inv.Amount.Text('f') }},
		{"amountPaid", func(inv invoice.Invoice) string { return inv.AmountPaid.Text('f') }},
		{"balance", func(inv invoice.Invoice) string { b := inv.Balance(); return b.Text('f') }},
		{"amountRefunded", func(inv invoice.Invoice) string { return inv.AmountRefunded.Text('f') }},
		{"customerName", func(inv invoice.Invoice) string { return text(inv.CustomerName) }},
		{"customerCompany", func(inv invoice.Invoice) string { return text(inv.CustomerCompany) }},
		{"customerEmail", func(inv invoice.Invoice) string { return inv.CustomerEmail }},
		{"customerPhone", func(inv invoice.Invoice) string { return text(inv.CustomerPhone) }},
		{"poNumber", func(inv invoice.Invoice) string { return text(inv.PONumber) }},
		{"mid", func(inv invoice.Invoice) string { return inv.MID }},
		{"locationName", func(inv invoice.Invoice) string { return text(inv.LocationName) }},
		{"dueDate", func(inv invoice.Invoice) string { return csvDate(inv.DueDate) }},
		{"createdAt", at(func(inv invoice.Invoice) *time.Time { return &inv.CreatedAt })},
		{"createdByName", func(inv invoice.Invoice) string { return inv.CreatedByName }},
		{"sentVia", func(inv invoice.Invoice) string { return text(inv.SentVia) }},
		{"sentAt", at(func(inv invoice.Invoice) *time.Time { return inv.SentAt })},
		{"scheduledSendAt", at(func(inv invoice.Invoice) *time.Time { return inv.ScheduledSendAt })},
		{"paidAt", at(func(inv invoice.Invoice) *time.Time { return inv.PaidAt })},
		{"cancelledAt", at(func(inv invoice.Invoice) *time.Time { return inv.CancelledAt })},
	}
}

// invoiceOf reads the invoice of the path's id in full, with who bills;
// an id that is not a uuid, unknown or another organization's is a 404.
func (h *handler) invoiceOf(c echo.Context) (invoice.Invoice, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return invoice.Invoice{}, invoice.ErrNotFound
	}
	return h.Invoices.Document(c.Request().Context(), visitOf(c).Membership.OrganizationID, id, nil)
}

// maxShownLines is how many of an invoice's lines its page shows (at most
// 500 would outweigh the page); the PDF has them all.
const maxShownLines = 100

// maxShownEvents is how many of an invoice's events its page shows, newest first.
const maxShownEvents = 50

// invoiceData is an invoice as its page shows it: a flat struct, its
// amounts, times and labels made before the template runs, as
// invoiceLine (the template reached each of the invoice's fields through
// two embedded structs, a search by reflection that allocates, and called
// a function for each amount and time).
type invoiceData struct {
	ID, InvoiceNumber, StatusLabel, StatusClass string
	Status                                      invoice.Status
	Overdue, Refunded, CanChange                bool
	// Editable: the invoice may still change (a draft, or open with
	// nothing paid).
	Editable bool
	Zone     *time.Location
	// Paid, Cancelled, Due, Created, Sent, Scheduled and LastReminded
	// are moments (or a day), "" when there is none.
	Paid, Cancelled, Due, Created, Sent, Scheduled, LastReminded  template.HTML
	Amount, AmountPaid, Owed, AmountRefunded                      string
	CancelledByName, CustomerName, CustomerCompany, CustomerPhone *string
	LocationName, PONumber, Memo, SendProblem                     *string
	CustomerEmail, MID, CreatedByName, Link                       string
	// SentBy, Delivery and Prefers are channels as people say them;
	// SentBy and Prefers "" when unknown.
	SentBy, Delivery, Prefers string
	ReminderChoice            string
	RemindersSent             int
	Lines                     []lineCells
	HiddenLines               int
	Payments                  []invoice.Payment
	Refunds                   []payment.CardPayment
	SavedCards                []invoice.SavedCard
	Events                    []eventCells
	MoreEvents                bool
	// Subtotal and Tax are the lines' amounts and taxes, under them.
	Subtotal, Tax string
}

// lineCells is an invoice's line as its page's table shows it: Tax its
// rate and amount ("8.875% · $1.78"), "—" without a rate.
type lineCells struct{ Description, Quantity, UnitCost, Tax, Total string }

// eventCells is an event as an invoice's page lists it.
type eventCells struct {
	ID, Type string
	Created  template.HTML
}

func invoiceDataOf(r invoiceRow) invoiceData {
	z := r.Zone
	d := invoiceData{ID: r.ID.String(), InvoiceNumber: r.InvoiceNumber, StatusLabel: r.StatusLabel(), StatusClass: r.StatusClass(), Status: r.Status,
		Overdue: r.Overdue, Refunded: r.Refunded(), Zone: z,
		Paid: moment(r.PaidAt, z), Cancelled: moment(r.CancelledAt, z), Due: day(r.DueDate), Created: moment(r.CreatedAt, z),
		Sent: moment(r.SentAt, z), Scheduled: moment(r.ScheduledSendAt, z), LastReminded: moment(r.LastRemindedAt, z),
		Amount: invoice.Money(r.Amount), AmountPaid: invoice.Money(r.AmountPaid), Owed: invoice.Money(r.Owed()),
		AmountRefunded: invoice.Money(r.AmountRefunded), CancelledByName: r.CancelledByName, CustomerName: r.CustomerName,
		CustomerCompany: r.CustomerCompany, CustomerPhone: r.CustomerPhone, LocationName: r.LocationName, PONumber: r.PONumber,
		Memo: r.Memo, SendProblem: r.SendProblem, CustomerEmail: r.CustomerEmail, MID: r.MID, CreatedByName: r.CreatedByName,
		Delivery: channelLabel(r.Invoice.Delivery), ReminderChoice: r.ReminderChoice(), RemindersSent: r.RemindersSent,
		Payments: r.Payments, SavedCards: r.SavedCards, Editable: r.Changeable()}
	if r.SentVia != nil {
		d.SentBy = channelLabel(*r.SentVia)
	}
	if r.CustomerPrefers != nil {
		d.Prefers = channelLabel(*r.CustomerPrefers)
	}
	lines := r.Lines
	if len(lines) > maxShownLines {
		lines, d.HiddenLines = lines[:maxShownLines], len(lines)-maxShownLines
	}
	d.Lines = make([]lineCells, len(lines))
	for i, l := range lines {
		tax := "—"
		if l.TaxRate != nil {
			tax = invoice.Percent(*l.TaxRate) + " · " + invoice.Money(invoice.LineTax(l))
		}
		d.Lines[i] = lineCells{Description: l.Description, Quantity: plain(l.Quantity), UnitCost: invoice.UnitMoney(l.UnitCost),
			Tax: tax, Total: invoice.Money(invoice.LineTotal(l))}
	}
	d.Subtotal, d.Tax = invoice.Money(r.Subtotal()), invoice.Money(r.TaxAmount)
	return d
}

// invoice is GET /portal/invoices/{id}: the invoice with its lines,
// payments of every method, refunds, the customer's saved cards, where
// its delivery stands, its reminders and its events; its pay link and
// PDF; and, for members who may, what can be done to it.
func (h *handler) invoice(c echo.Context) error {
	h.allowScript(c, copyScript)
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.answer(c, invoice.ErrNotFound, nil)
	}
	// The invoice, its refunds (the first page of the card payments
	// list's) and its newest events (one more than it shows), in one
	// snapshot.
	var refunds []payment.CardPayment
	var events []event.Event
	inv, err := h.Invoices.Document(ctx, m.OrganizationID, id, func(q sqlx.QueryerContext) (err error) {
		if refunds, err = h.Payments.InvoiceRefunds(ctx, q, m.OrganizationID, id, maxListLimit); err != nil {
			return err
		}
		events, err = h.Events.OfInvoice(ctx, q, m.OrganizationID, m.Permissions, id, maxShownEvents+1)
		return err
	})
	if err != nil {
		return h.answer(c, err, nil)
	}
	d := invoiceDataOf(rowOf(inv, inv.Biller.Zone(), h.Now()))
	d.Link, d.Refunds, d.CanChange = h.Invoices.Link(&inv), refunds, m.Can(auth.PaymentsCreate)
	if len(events) > maxShownEvents {
		events, d.MoreEvents = events[:maxShownEvents], true
	}
	d.Events = make([]eventCells, len(events))
	for i, e := range events {
		d.Events[i] = eventCells{ID: e.ID.String(), Type: e.Type, Created: moment(e.CreatedAt, d.Zone)}
	}
	p := page{Title: "Invoice " + inv.InvoiceNumber, Data: d}
	return h.renderDone(c, "invoice", p, map[string]string{
		"created":   "The invoice was made.",
		"drafted":   "The draft was saved. Nothing is sent until it is finalized.",
		"changed":   "The invoice was changed; its pay link stays the same.",
		"finalized": "The invoice is finalized: its pay link is made.",
		"sent":      "The pay link is on its way to the customer.",
		"cancelled": "The invoice is cancelled: its pay link takes no payment, and nothing more is sent.",
		"recorded":  "The payment was recorded.",
		"removed":   "The payment was removed.",
	})
}

// invoicePDF is GET /portal/invoices/{id}/pdf: the invoice as the API's
// PDF (Accept: application/pdf) has it.
func (h *handler) invoicePDF(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	doc, err := h.PDFs.Invoice(c.Request().Context(), inv, h.Invoices.Link(&inv))
	if err != nil {
		return h.failure(c, err)
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, invoicepdf.Disposition("invoice-"+inv.InvoiceNumber))
	return c.Blob(http.StatusOK, invoicepdf.ContentType, doc)
}

// invoiceActor is the member as the invoice package records who acted
// (createdByName, cancelledByName) and audits it.
func invoiceActor(c echo.Context) invoice.Actor {
	m := visitOf(c).Membership
	return invoice.Actor{OrganizationID: m.OrganizationID, Name: m.PersonName, Audit: actor(c).Audit()}
}

// sendInvoice is POST /portal/invoices/{id}/send: the pay link goes to the
// customer now, or again.
func (h *handler) sendInvoice(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	inv, err := h.Invoices.Send(c.Request().Context(), invoiceActor(c), id)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done=sent")
}

// cancelPage is GET /portal/invoices/{id}/cancel: the confirmation.
func (h *handler) cancelPage(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return h.render(c, http.StatusOK, "invoice-cancel", page{Title: "Cancel invoice " + inv.InvoiceNumber,
		Data: rowOf(inv, inv.Biller.Zone(), h.Now())})
}

// cancelInvoice is POST /portal/invoices/{id}/cancel.
func (h *handler) cancelInvoice(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	inv, err := h.Invoices.Cancel(c.Request().Context(), invoiceActor(c), id)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done=cancelled")
}

// finalizeInvoice is POST /portal/invoices/{id}/finalize: a draft opened,
// its pay link made and sent.
func (h *handler) finalizeInvoice(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	inv, err := h.Invoices.Finalize(c.Request().Context(), invoiceActor(c), id, nil, nil)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done=finalized")
}

// deletePage is GET /portal/invoices/{id}/delete: the confirmation of a
// draft's deletion.
func (h *handler) deletePage(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return h.render(c, http.StatusOK, "invoice-delete", page{Title: "Delete draft " + inv.InvoiceNumber,
		Data: rowOf(inv, inv.Biller.Zone(), h.Now())})
}

// deleteDraft is POST /portal/invoices/{id}/delete.
func (h *handler) deleteDraft(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	if err := h.Invoices.Delete(c.Request().Context(), invoiceActor(c), id); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"?done=deleted")
}
