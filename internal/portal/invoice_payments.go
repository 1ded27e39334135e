package portal

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/web"
)

// Payments made outside the card processor (cash, checks, transfers),
// recorded and removed with invoice.Store.RecordPayment and RemovePayment,
// as POST and DELETE /payment-requests/{id}/payments do.

var recordedMethods = []struct{ Value, Label string }{
	{invoice.MethodCash, "Cash"}, {invoice.MethodCheck, "Check"},
	{invoice.MethodBankTransfer, "Bank transfer"}, {invoice.MethodOther, "Other"},
}

type paymentFormData struct {
	invoiceRow
	Methods []struct{ Value, Label string }
	Today   string
}

// paymentForm is the form for inv, empty (form nil: a new key, the
// balance, today) or as sent.
func (h *handler) paymentForm(inv invoice.Invoice, form url.Values) *formPage {
	zone := inv.Biller.Zone()
	today := h.Now().In(zone).Format(time.DateOnly)
	if form == nil {
		b := inv.Balance()
		form = url.Values{"amount": {b.Text('f')}, "receivedAt": {today}, idempotencyField: {newFormKey()}}
	}
	return &formPage{name: "invoice-payment", page: page{Title: "Record a payment toward invoice " + inv.InvoiceNumber, Form: form,
		Data: paymentFormData{invoiceRow: rowOf(inv, zone, h.Now()), Methods: recordedMethods, Today: today}},
		fields: []string{"amount", "method", "reference", "receivedAt"}}
}

// paymentPage is GET /portal/invoices/{id}/payments: the form recording a
// payment made outside the card.
func (h *handler) paymentPage(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form := h.paymentForm(inv, nil)
	return h.render(c, http.StatusOK, form.name, form.page)
}

// recordPayment is POST /portal/invoices/{id}/payments: amount, method,
// reference, receivedAt (a day: today means now, another day its start in
// the location's time zone) and the form's idempotency key, so that the
// form sent twice records once.
func (h *handler) recordPayment(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	form := h.paymentForm(inv, f)
	p := invoice.RecordedPayment{Method: f.Get("method")}
	if s := strings.TrimSpace(f.Get("reference")); s != "" {
		p.Reference = &s
	}
	if amount, msg := web.ReadMoney(f.Get("amount"), "Enter the amount in dollars and cents, such as 40.00."); msg == "" {
		p.Amount = amount
	} else {
		form.page.Errors.Add("amount", msg)
	}
	zone := inv.Biller.Zone()
	if s := strings.TrimSpace(f.Get("receivedAt")); s != "" && s != h.Now().In(zone).Format(time.DateOnly) {
		if t, err := time.ParseInLocation(time.DateOnly, s, zone); err == nil {
			p.ReceivedAt = &t
		} else {
			form.page.Errors.Add("receivedAt", "Enter the day the money came as YYYY-MM-DD, such as 2026-11-30.")
		}
	}
	if len(form.page.Errors) > 0 {
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	key := f.Get(idempotencyField)
	inv, _, err = h.Invoices.RecordPayment(c.Request().Context(), invoiceActor(c), inv.ID, p, &key)
	if err != nil {
		return h.answer(c, keyRefusal(err, form, idempotencyField, "recorded a payment"), form)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done=recorded")
}

// removePayment is POST /portal/invoices/{id}/payments/{paymentId}/remove.
func (h *handler) removePayment(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	paymentID, ok2 := parseID(c.Param("paymentId"))
	if !ok || !ok2 {
		return h.notFound(c)
	}
	inv, err := h.Invoices.RemovePayment(c.Request().Context(), invoiceActor(c), id, paymentID)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done=removed")
}
