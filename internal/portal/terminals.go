package portal

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/terminal"
	"github.com/payreq/payreq/internal/web"
)

// Card terminals (issue 40): /portal/terminals lists the organization's
// to members with accounts.view, and Owners and Admins register, rename
// and remove them (terminal.Store.AddAs, Rename, RemoveAs, audited). An
// open invoice is collected at one of its MID's terminals
// (terminal.Store.Create); the payment's page refreshes itself every 2 s
// while the terminal waits for the card, then shows the outcome.

const terminalsPath = "/portal/terminals"

// terminalRow is a terminal as the pages show it.
type terminalRow struct {
	terminal.Terminal
	Location string
	Seen     string // when it last answered, in words
}

// StatusLabel is the terminal's status in words.
func (r terminalRow) StatusLabel() string {
	switch r.Status {
	case terminal.Online:
		return "Online"
	case terminal.Busy:
		return "Busy: a payment waits on it"
	}
	return "Offline"
}

type midChoice struct {
	ID    uuid.UUID
	Label string
}

type terminalsData struct {
	Terminals []terminalRow
	Manages   bool
	MIDs      []midChoice
}

// ago is how long before now t was, in words.
func ago(t *time.Time, now time.Time) string {
	if t == nil {
		return "Never"
	}
	d := now.Sub(*t)
	switch {
	case d < 2*time.Second:
		return "Just now"
	case d < 2*time.Minute:
		return fmt.Sprintf("%d seconds ago", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%d minutes ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d hours ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// midChoices are the organization's MIDs, each with its location's name.
func (h *handler) midChoices(c echo.Context) ([]midChoice, map[uuid.UUID]string, error) {
	ctx := c.Request().Context()
	org := visitOf(c).Membership.OrganizationID
	locs, err := h.Directory.Locations(ctx, org)
	if err != nil {
		return nil, nil, err
	}
	names := map[uuid.UUID]string{}
	for _, l := range locs {
		names[l.ID] = l.Name
	}
	mids, err := h.Directory.MerchantAccounts(ctx, org, nil)
	if err != nil {
		return nil, nil, err
	}
	out := make([]midChoice, len(mids))
	for i, m := range mids {
		out[i] = midChoice{ID: m.ID, Label: m.MID + " · " + names[m.LocationID]}
	}
	return out, names, nil
}

func (h *handler) rowOfTerminal(t terminal.Terminal, locations map[uuid.UUID]string) terminalRow {
	return terminalRow{Terminal: t, Location: locations[t.LocationID], Seen: ago(t.LastSeenAt, h.Now())}
}

// terminalsPage is the list with, for a manager, the form adding one
// (form nil: empty).
func (h *handler) terminalsPage(c echo.Context, form url.Values) (*formPage, error) {
	m := visitOf(c).Membership
	ts, err := h.Terminals.List(c.Request().Context(), &m.OrganizationID)
	if err != nil {
		return nil, err
	}
	mids, locations, err := h.midChoices(c)
	if err != nil {
		return nil, err
	}
	d := terminalsData{Manages: m.Manages(), MIDs: mids}
	for _, t := range ts {
		d.Terminals = append(d.Terminals, h.rowOfTerminal(t, locations))
	}
	if form == nil {
		form = url.Values{}
	}
	return &formPage{name: "terminals", page: page{Title: "Terminals", Form: form, Data: d},
		fields: []string{"name", "mid", "hsn"}}, nil
}

var terminalNotices = map[string]string{"added": "The terminal was added.", "removed": "The terminal was removed."}

// terminals is GET /portal/terminals.
func (h *handler) terminals(c echo.Context) error {
	form, err := h.terminalsPage(c, nil)
	if err != nil {
		return h.failure(c, err)
	}
	return h.renderDone(c, form.name, form.page, terminalNotices)
}

func terminalActor(c echo.Context) terminal.Actor {
	return terminal.Actor{OrganizationID: visitOf(c).Membership.OrganizationID, Audit: actor(c).Audit()}
}

// addTerminal is POST /portal/terminals: name, mid (the MID's id) and
// hsn (the terminal's serial number).
func (h *handler) addTerminal(c echo.Context) error {
	f := c.Request().PostForm
	form, err := h.terminalsPage(c, f)
	if err != nil {
		return h.failure(c, err)
	}
	n := terminal.NewTerminal{HSN: f.Get("hsn"), Name: f.Get("name")}
	mid, ok := parseID(f.Get("mid"))
	if !ok {
		form.page.Errors.Add("mid", "Choose the MID the terminal takes payments for.")
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	n.MerchantAccountID = mid
	if _, err := h.Terminals.AddAs(c.Request().Context(), terminalActor(c), n); err != nil {
		return h.answer(c, err, form)
	}
	return c.Redirect(http.StatusSeeOther, terminalsPath+"?done=added")
}

// terminalOf is the terminal of the path's id, of the member's
// organization (another's is a 404).
func (h *handler) terminalOf(c echo.Context) (terminal.Terminal, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return terminal.Terminal{}, terminal.ErrNotFound
	}
	return h.Terminals.Get(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
}

func (h *handler) terminalForm(c echo.Context, t terminal.Terminal, form url.Values) (*formPage, error) {
	_, locations, err := h.midChoices(c)
	if err != nil {
		return nil, err
	}
	if form == nil {
		form = url.Values{"name": {t.Name}}
	}
	return &formPage{name: "terminal", page: page{Title: "Terminal " + t.Name, Form: form, Data: h.rowOfTerminal(t, locations)},
		fields: []string{"name"}}, nil
}

// terminalPage is GET /portal/terminals/{id}: rename or remove it.
func (h *handler) terminalPage(c echo.Context) error {
	t, err := h.terminalOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form, err := h.terminalForm(c, t, nil)
	if err != nil {
		return h.failure(c, err)
	}
	return h.renderDone(c, form.name, form.page, map[string]string{"renamed": "The terminal was renamed."})
}

// renameTerminal is POST /portal/terminals/{id}: name.
func (h *handler) renameTerminal(c echo.Context) error {
	t, err := h.terminalOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form, err := h.terminalForm(c, t, c.Request().PostForm)
	if err != nil {
		return h.failure(c, err)
	}
	if _, err := h.Terminals.Rename(c.Request().Context(), terminalActor(c), t.ID, c.Request().PostForm.Get("name")); err != nil {
		return h.answer(c, err, form)
	}
	return c.Redirect(http.StatusSeeOther, terminalsPath+"/"+t.ID.String()+"?done=renamed")
}

// removeTerminal is POST /portal/terminals/{id}/remove.
func (h *handler) removeTerminal(c echo.Context) error {
	t, err := h.terminalOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if _, err := h.Terminals.RemoveAs(c.Request().Context(), terminalActor(c), t.ID); err != nil {
		form, ferr := h.terminalForm(c, t, nil)
		if ferr != nil {
			return h.failure(c, ferr)
		}
		return h.answer(c, err, form)
	}
	return c.Redirect(http.StatusSeeOther, terminalsPath+"?done=removed")
}

type collectData struct {
	invoiceRow
	Terminals []terminalRow
}

// collectForm is the form collecting inv at a terminal: its MID's online
// terminals, the amount (form nil: the balance, a new key).
func (h *handler) collectForm(c echo.Context, inv invoice.Invoice, form url.Values) (*formPage, error) {
	org := visitOf(c).Membership.OrganizationID
	ts, err := h.Terminals.List(c.Request().Context(), &org)
	if err != nil {
		return nil, err
	}
	d := collectData{invoiceRow: rowOf(inv, inv.Biller.Zone(), h.Now())}
	for _, t := range ts {
		if t.MerchantAccountID == inv.MerchantAccountID && t.Status == terminal.Online {
			d.Terminals = append(d.Terminals, h.rowOfTerminal(t, nil))
		}
	}
	if form == nil {
		b := inv.Balance()
		form = url.Values{"amount": {b.Text('f')}, idempotencyField: {newFormKey()}}
		if len(d.Terminals) == 1 {
			form.Set("terminalId", d.Terminals[0].ID.String())
		}
	}
	return &formPage{name: "invoice-terminal", page: page{Title: "Collect invoice " + inv.InvoiceNumber + " at a terminal", Form: form, Data: d},
		fields: []string{"terminalId", "amount"}}, nil
}

// collectPage is GET /portal/invoices/{id}/terminal.
func (h *handler) collectPage(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form, err := h.collectForm(c, inv, nil)
	if err != nil {
		return h.failure(c, err)
	}
	return h.render(c, http.StatusOK, form.name, form.page)
}

// collect is POST /portal/invoices/{id}/terminal: terminalId, amount and
// the form's idempotency key (the form sent twice asks once); then the
// payment's page.
func (h *handler) collect(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	form, err := h.collectForm(c, inv, f)
	if err != nil {
		return h.failure(c, err)
	}
	n := terminal.NewPayment{InvoiceID: inv.ID}
	if id, ok := parseID(f.Get("terminalId")); ok {
		n.TerminalID = id
	} else {
		form.page.Errors.Add("terminalId", "Choose the terminal the customer pays on.")
	}
	if amount, msg := web.ReadMoney(f.Get("amount"), "Enter the amount in dollars and cents, such as 40.00."); msg == "" {
		n.Amount = new(apd.Decimal)
		n.Amount.Set(&amount)
	} else {
		form.page.Errors.Add("amount", msg)
	}
	if len(form.page.Errors) > 0 {
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	key := f.Get(idempotencyField)
	p, _, err := h.Terminals.Create(c.Request().Context(), visitOf(c).Membership.OrganizationID, n, &key)
	if err != nil {
		return h.answer(c, keyRefusal(err, form, idempotencyField, "asked a terminal for a payment"), form)
	}
	return c.Redirect(http.StatusSeeOther, terminalPaymentsPath+"/"+p.ID.String())
}

const terminalPaymentsPath = "/portal/terminal-payments"

type terminalPaymentData struct {
	terminal.Payment
	Terminal      string
	InvoiceNumber string
	CanCancel     bool
	CardPayments  bool // the member may open the card payment
}

// Pending says whether the terminal still waits for the card.
func (d terminalPaymentData) Pending() bool { return d.Status == terminal.Pending }

// EntryModeLabel is how the card was read, in words.
func (d terminalPaymentData) EntryModeLabel() string {
	if d.EntryMode == nil {
		return ""
	}
	switch *d.EntryMode {
	case "chip":
		return "Chip"
	case "contactless":
		return "Contactless"
	case "swipe":
		return "Swiped"
	}
	return "Keyed in"
}

// terminalPayment is GET /portal/terminal-payments/{id}: while pending a
// page that reloads itself every 2 s (the Refresh header: no script),
// with Cancel; then the outcome, an approval's receipt.
func (h *handler) terminalPayment(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	p, err := h.Terminals.Payment(ctx, m.OrganizationID, id)
	if err != nil {
		return h.answer(c, err, nil)
	}
	inv, err := h.Invoices.Document(ctx, m.OrganizationID, p.InvoiceID, nil)
	if err != nil {
		return h.failure(c, err)
	}
	d := terminalPaymentData{Payment: p, InvoiceNumber: inv.InvoiceNumber,
		CanCancel: m.Can(auth.PaymentsCreate), CardPayments: m.Can(auth.PaymentsView)}
	if t, err := h.Terminals.Get(ctx, m.OrganizationID, p.TerminalID); err == nil {
		d.Terminal = t.Name
	} else if !errors.Is(err, terminal.ErrNotFound) {
		return h.failure(c, err)
	}
	title := map[string]string{terminal.Pending: "Waiting for the card", terminal.Approved: "Payment approved",
		terminal.Declined: "Payment declined", terminal.Cancelled: "Payment cancelled", terminal.TimedOut: "Payment timed out",
		terminal.Failed: "Payment failed"}[p.Status]
	if d.Pending() {
		c.Response().Header().Set("Refresh", "2")
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	}
	return h.render(c, http.StatusOK, "terminal-payment", page{Title: title, Data: d})
}

// cancelTerminalPayment is POST /portal/terminal-payments/{id}/cancel.
func (h *handler) cancelTerminalPayment(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	p, err := h.Terminals.Cancel(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, terminalPaymentsPath+"/"+p.ID.String())
}
