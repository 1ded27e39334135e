package portal

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// Making an invoice: GET /portal/invoices/new is the form, POST
// /portal/invoices makes it with invoice.Store.Create, as POST
// /payment-requests does (same rules, events and idempotency).

const (
	// formLineRows is how many rows of lines the form shows without
	// JavaScript; the script adds more, up to maxFormLines.
	formLineRows = 5
	// maxFormLines bounds the lines the portal's form takes (the page
	// stays light and the form under its size limit); the API takes 500.
	maxFormLines = 100
)

type invoiceFormData struct {
	Accounts  []account
	Rows      []int
	MaxLines  int
	Reminders invoice.ReminderSettings
}

// invoiceFields are the form's fields in order, as the domain names them
// (so that its refusals land beside them), for rows of lines.
func invoiceFields(rows int) []string {
	fields := []string{"merchantAccountId", "invoiceNumber", "customerName", "customerCompany", "customerEmail",
		"customerPhone", "poNumber", "amount", "dueDate", "memo", "lines"}
	for i := range rows {
		fields = append(fields, lineField(i, "description"), lineField(i, "quantity"), lineField(i, "unitCost"))
	}
	return append(fields, "delivery", "send", "sendAt", "reminders")
}

func lineField(i int, name string) string { return fmt.Sprintf("lines[%d].%s", i, name) }

// lineRows is how many rows of lines form holds (at least formLineRows).
func lineRows(form url.Values) int {
	n := formLineRows
	for i := formLineRows; i < maxFormLines+1; i++ {
		if _, ok := form[lineField(i, "description")]; ok {
			n = i + 1
		}
	}
	return min(n, maxFormLines)
}

// invoiceForm is the form, empty (form nil: a new key, the defaults) or
// as sent.
func (h *handler) invoiceForm(c echo.Context, form url.Values) (*formPage, error) {
	ctx := c.Request().Context()
	org := visitOf(c).Membership.OrganizationID
	all, err := h.accounts(c)
	if err != nil {
		return nil, err
	}
	var active []account
	for _, a := range all {
		if a.Active {
			active = append(active, a)
		}
	}
	rs, err := h.Invoices.ReminderSettings(ctx, org)
	if err != nil {
		return nil, err
	}
	if form == nil {
		form = url.Values{"delivery": {invoice.Email}, "send": {"now"}, idempotencyField: {newFormKey()}}
	}
	rows := lineRows(form)
	d := invoiceFormData{Accounts: active, MaxLines: maxFormLines, Reminders: rs}
	for i := range rows {
		d.Rows = append(d.Rows, i)
	}
	return &formPage{name: "invoice-new", page: page{Title: "New invoice", Form: form, Data: d}, fields: invoiceFields(rows)}, nil
}

// newInvoice is GET /portal/invoices/new.
func (h *handler) newInvoice(c echo.Context) error {
	h.allowScript(c, linesScript)
	form, err := h.invoiceForm(c, nil)
	if err != nil {
		return h.failure(c, err)
	}
	return h.render(c, http.StatusOK, form.name, form.page)
}

// createInvoice is POST /portal/invoices: the form's values as a draft
// for invoice.Store.Create with the form's idempotency key. A form sent
// twice makes one invoice, and both answers lead to it.
func (h *handler) createInvoice(c echo.Context) error {
	h.allowScript(c, linesScript) // the form may come back
	f := c.Request().PostForm
	form, err := h.invoiceForm(c, f)
	if err != nil {
		return h.failure(c, err)
	}
	zones := map[uuid.UUID]*time.Location{}
	for _, a := range form.page.Data.(invoiceFormData).Accounts {
		zones[a.ID] = a.Zone
	}
	d, rows, errs := draftOf(f, zones)
	if len(errs) > 0 {
		// What the domain would refuse too, so that every message shows at once.
		if r := rule.As(invoice.Validate(d)); r != nil {
			for _, e := range web.FromRule(renumber(r, rows), form.fields) {
				errs.Add(e.Field, e.Message)
			}
		}
		form.page.Errors = errs
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	key := f.Get(idempotencyField)
	inv, _, err := h.Invoices.Create(c.Request().Context(), invoiceActor(c), d, &key)
	if r := rule.As(keyRefusal(err, form, idempotencyField, "made an invoice")); r != nil {
		return h.refused(c, renumber(r, rows), form)
	}
	if err != nil {
		return h.failure(c, err)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done=created")
}

// renumber is r with its lines named by the form's rows: the draft leaves
// out blank rows, so its line i is the form's row rows[i].
func renumber(r *rule.Error, rows []int) *rule.Error {
	if len(r.Fields) == 0 {
		return r
	}
	out := *r
	out.Fields = map[string][]string{}
	for field, msgs := range r.Fields {
		if m := lineKey.FindStringSubmatch(field); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil && i < len(rows) {
				field = lineField(rows[i], m[2])
			}
		}
		out.Fields[field] = msgs
	}
	return &out
}

var lineKey = regexp.MustCompile(`^lines\[(\d+)\]\.(\w+)$`)

// draftOf reads the form as a draft: what cannot be read at all (a number
// that is no number, a date that is no date) is refused here, beside its
// field; every rule is the domain's. rows are the form's rows of the
// draft's lines (blank rows are left out).
func draftOf(f url.Values, zones map[uuid.UUID]*time.Location) (d invoice.Draft, rows []int, errs web.Errors) {
	text := func(name string) *string {
		s := strings.TrimSpace(f.Get(name))
		if s == "" {
			return nil
		}
		return &s
	}
	d.InvoiceNumber = strings.TrimSpace(f.Get("invoiceNumber"))
	d.PONumber, d.CustomerName, d.CustomerCompany = text("poNumber"), text("customerName"), text("customerCompany")
	d.CustomerEmail, d.CustomerPhone, d.Memo, d.Delivery = text("customerEmail"), text("customerPhone"), text("memo"), text("delivery")

	zone := time.UTC
	if id, err := uuid.Parse(f.Get("merchantAccountId")); err != nil {
		errs.Add("merchantAccountId", "Choose the merchant account (MID) the customer pays into.")
	} else {
		d.MerchantAccountID = id
		if z := zones[id]; z != nil {
			zone = z
		}
	}
	if s := strings.TrimSpace(f.Get("amount")); s == "" {
		errs.Add("amount", "Enter the amount of the invoice, such as 120.50.")
	} else if a, msg := web.ReadMoney(s, "Enter the amount in dollars and cents, such as 120.50."); msg == "" {
		d.Amount = a
	} else {
		errs.Add("amount", msg)
	}
	if s := strings.TrimSpace(f.Get("dueDate")); s != "" {
		if t, err := time.Parse(time.DateOnly, s); err == nil {
			d.DueDate = &t
		} else {
			errs.Add("dueDate", "Enter a date as YYYY-MM-DD, such as 2026-12-31.")
		}
	}

	for i := range maxFormLines + 1 {
		desc, hasDesc := f[lineField(i, "description")]
		qty, hasQty := f[lineField(i, "quantity")]
		cost, hasCost := f[lineField(i, "unitCost")]
		if !hasDesc && !hasQty && !hasCost {
			break
		}
		if i == maxFormLines {
			errs.Add("lines", fmt.Sprintf("The portal takes up to %d lines; make invoices with more through the API.", maxFormLines))
			break
		}
		l := invoice.Line{Description: strings.TrimSpace(first(desc))}
		q, c := strings.TrimSpace(first(qty)), strings.TrimSpace(first(cost))
		if l.Description == "" && q == "" && c == "" {
			continue
		}
		if v, ok := web.Decimal(q, false); ok {
			l.Quantity = v
		} else {
			errs.Add(lineField(i, "quantity"), "Enter a number, such as 2 or 1.5.")
		}
		if v, msg := web.ReadMoney(c, "Enter an amount, such as 19.99 (negative for a discount)."); msg == "" {
			l.UnitCost = v
		} else {
			errs.Add(lineField(i, "unitCost"), msg)
		}
		d.Lines = append(d.Lines, l)
		rows = append(rows, i)
	}

	switch f.Get("send") {
	case "now":
		d.Send = ptrTo(true)
	case "no":
		d.Send = ptrTo(false)
	case "schedule":
		s := strings.TrimSpace(f.Get("sendAt"))
		t, err := time.ParseInLocation("2006-01-02T15:04", s, zone)
		if err != nil {
			errs.Add("sendAt", "Enter the day and time to send the pay link, in the time zone of the MID's location.")
		} else {
			d.SendAt = &t
		}
	default:
		errs.Add("send", "Choose when the pay link goes to the customer.")
	}
	switch f.Get("reminders") {
	case "":
	case "on":
		d.Reminders = ptrTo(true)
	case "off":
		d.Reminders = ptrTo(false)
	default:
		errs.Add("reminders", "Choose one of the choices offered.")
	}
	return d, rows, errs
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func ptrTo[T any](v T) *T { return &v }
