package portal

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// maxRefundsShown is how many refunds of a sale its page lists.
const maxRefundsShown = 100

type cardPaymentData struct {
	Payment payment.CardPayment
	// Refunds are a sale's, newest first.
	Refunds []payment.CardPayment
	// Left is what is left of a sale to refund (its amount less its
	// approved refunds; refunds under way are the store's to count).
	Left apd.Decimal
	// Refundable: the refund form is shown (an approved sale with
	// something left, to a member holding payments.refund).
	Refundable bool
	// Zone is the organization's time zone, in which times are shown.
	Zone *time.Location
}

// refunders are the members who see a sale and refund it: its page needs
// payments.view, the refund payments.refund, as in the API.
func refunders(m people.Membership) *rule.Error {
	if r := requires(auth.PaymentsView)(m); r != nil {
		return r
	}
	return requires(auth.PaymentsRefund)(m)
}

// cardPaymentPage is the page of a card payment; form is the refund form
// as sent (nil: a new one, with a new key).
func (h *handler) cardPaymentPage(c echo.Context, p payment.CardPayment, form url.Values) (*formPage, error) {
	m := visitOf(c).Membership
	zone, err := h.zoneOf(c)
	if err != nil {
		return nil, err
	}
	d := cardPaymentData{Payment: p, Zone: zone}
	if p.Kind == payment.Sale {
		refunds, _, err := h.Payments.CardPayments(c.Request().Context(), m.OrganizationID, payment.Filter{RefundOf: &p.ID}, maxRefundsShown, "")
		if err != nil {
			return nil, err
		}
		d.Refunds = refunds
		if _, err := apd.BaseContext.WithPrecision(34).Sub(&d.Left, &p.Amount, &p.AmountRefunded); err != nil {
			return nil, err
		}
		d.Refundable = p.Status == payment.Approved && d.Left.Sign() > 0 && refunders(*m) == nil
	}
	if form == nil {
		// The amount is filled with what is left: an empty one is refused.
		form = url.Values{"key": {newFormKey()}, "amount": {d.Left.Text('f')}}
	}
	title := "Sale"
	if p.Kind == payment.Refund {
		title = "Refund"
	}
	return &formPage{name: "card-payment", page: page{Title: title + " of " + invoice.Money(p.Amount) + " on " + p.InvoiceNumber,
		Form: form, Data: d}, fields: []string{"amount", "reason"}}, nil
}

// cardPaymentOf reads the path's card payment, of the member's
// organization.
func (h *handler) cardPaymentOf(c echo.Context) (payment.CardPayment, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return payment.CardPayment{}, errNotFound
	}
	return h.Payments.CardPayment(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
}

// cardPayment is GET /portal/card-payments/{id}: a sale or a refund, a
// sale's refunds, and the form that refunds it.
func (h *handler) cardPayment(c echo.Context) error {
	p, err := h.cardPaymentOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form, err := h.cardPaymentPage(c, p, nil)
	if err != nil {
		return h.failure(c, err)
	}
	if c.QueryParam("done") == "refunded" {
		switch p.Status {
		case payment.Approved:
			form.page.Notice = "The refund of " + invoice.Money(p.Amount) + " is approved: the money goes back to the card."
		default:
			form.page.Alert = "The refund was declined: " + strings.TrimSuffix(optional.Value(p.DeclineReason), ".") + ". Nothing was refunded."
		}
	}
	return h.render(c, http.StatusOK, form.name, form.page)
}

// refundConfirmData is the confirmation page of a refund: what moves,
// to which card, of whose invoice, before anything does.
type refundConfirmData struct {
	Sale     payment.CardPayment
	Amount   apd.Decimal
	Reason   string
	Customer string
	Zone     *time.Location
}

// refund is POST /portal/card-payments/{id}/refund: amount (required,
// at most what is left), reason, and key, the form's own idempotency key.
// Sent from the sale's page (no confirmed=yes) it moves nothing: it
// answers the confirmation page naming the amount, the card and the
// customer, whose form sends the same values with confirmed=yes (or
// edit=yes: the sale's page again, the values kept). Confirmed, it
// refunds through payment.Store.Refund as the API does, and answers 303
// to the refund's page; the same form sent again answers the same.
func (h *handler) refund(c echo.Context) error {
	ctx := c.Request().Context()
	sale, err := h.cardPaymentOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	form, err := h.cardPaymentPage(c, sale, f)
	if err != nil {
		return h.failure(c, err)
	}
	if sale.Kind != payment.Sale || sale.Status != payment.Approved {
		return h.answer(c, payment.ErrNotRefundable, form)
	}
	if f.Get("edit") == "yes" {
		return h.render(c, http.StatusOK, form.name, form.page)
	}
	shown := form.page.Data.(cardPaymentData)
	left := shown.Left
	s := strings.TrimSpace(f.Get("amount"))
	if s == "" {
		return h.refused(c, rule.InvalidField("amount", "Enter the amount to refund: at most "+invoice.Money(left)+"."), form)
	}
	amount, msg := web.ReadMoney(s, "Enter an amount in dollars and cents, such as 12.30.")
	if msg == "" {
		msg = invoice.AmountProblem(amount)
	}
	if msg != "" {
		return h.refused(c, rule.InvalidField("amount", msg), form)
	}
	if amount.Cmp(&left) > 0 {
		// What payment.Store.Refund would refuse, said before the
		// confirmation rather than after.
		return h.refused(c, rule.New(rule.Unprocessable, "amount", "Refund exceeds refundable amount",
			"At most "+invoice.Money(left)+" of this sale can still be refunded."), form)
	}
	key := f.Get("key")
	r := payment.RefundRequest{Actor: invoiceActor(c), SaleID: sale.ID, Key: &key, Amount: &amount}
	if s := strings.TrimSpace(f.Get("reason")); s != "" {
		r.Reason = &s
	}
	if f.Get("confirmed") != "yes" {
		inv, err := h.Invoices.Document(ctx, visitOf(c).Membership.OrganizationID, sale.InvoiceID, nil)
		if err != nil {
			return h.failure(c, err)
		}
		customer := optional.Value(inv.CustomerName)
		if customer == "" {
			customer = inv.CustomerEmail
		}
		return h.render(c, http.StatusOK, "refund-confirm", page{Title: "Refund " + invoice.Money(amount) + "?", Form: f,
			Data: refundConfirmData{Sale: sale, Amount: amount, Reason: optional.Value(r.Reason), Customer: customer, Zone: shown.Zone}})
	}
	refund, _, err := h.Payments.Refund(ctx, r)
	switch {
	case web.OutageOf(err) == web.Processor:
		// A 502, as the API answers it.
		h.Log.WarnContext(ctx, "refund not made: card processor failed", "card_payment_id", sale.ID.String(), "error", err.Error())
		web.RetryLater(c)
		form.page.Alert = "The card processor failed, so no refund is recorded. Send the form again: a refund is never made twice."
		return h.render(c, http.StatusBadGateway, form.name, form.page)
	case err != nil:
		return h.answer(c, keyRefusal(err, form, "key", "made a refund"), form)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/card-payments/"+refund.ID.String()+"?done=refunded")
}

const cardPaymentsPath = "/portal/card-payments"

var (
	cardPaymentKinds    = []string{payment.Sale, payment.Refund}
	cardPaymentStatuses = []string{payment.Approved, payment.Declined}
)

type cardPaymentsData struct {
	listData[cardPaymentRow]
	Kinds, Statuses []string
	MIDs            []midOption
	// InvoiceID and DepositID narrow the list when it is opened from an
	// invoice's or a deposit's page (hidden fields of its form).
	InvoiceID, DepositID string
}

// cardPaymentRow is a card payment as the list shows it, its time in the
// organization's time zone.
type cardPaymentRow struct {
	payment.CardPayment
	Zone *time.Location
}

// FeeText is the processor's fee of the payment, "—" while it is not known.
func (r cardPaymentRow) FeeText() string {
	if r.FeeAmount == nil {
		return "—"
	}
	return invoice.Money(*r.FeeAmount)
}

// cardPayments is GET /portal/card-payments: the organization's card
// payments, newest first, a page at a time, with the API's filters (kind,
// status, MID, invoice, deposit, the days they were made); ?format=csv
// exports them all.
func (h *handler) cardPayments(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	q, err := h.listQuery(c)
	if err != nil {
		return h.failure(c, err)
	}
	f := payment.Filter{Kind: q.Choice("kind", cardPaymentKinds), Status: q.Choice("status", cardPaymentStatuses),
		MerchantAccountID: q.ID("merchantAccountId"), InvoiceID: q.ID("invoiceId"), DepositID: q.ID("depositId")}
	f.CreatedFrom, f.CreatedTo = q.Dates("createdFrom", "createdTo")
	mids, err := h.accounts(c)
	if err != nil {
		return h.failure(c, err)
	}
	data := cardPaymentsData{Kinds: cardPaymentKinds, Statuses: cardPaymentStatuses, MIDs: midOptions(mids, q.Values.Get("merchantAccountId")),
		InvoiceID: q.Values.Get("invoiceId"), DepositID: q.Values.Get("depositId")}
	data.Zone = q.Zone.String()
	list := func(ctx context.Context, limit int, cursor string) ([]payment.CardPayment, string, error) {
		return h.Payments.CardPayments(ctx, m.OrganizationID, f, limit, cursor)
	}
	if !q.Failed() {
		if q.CSV {
			return streamCSV(h, c, csvExport[payment.CardPayment]{Name: "card-payments", Zone: q.Zone, Columns: cardPaymentColumns(q.Zone), Page: list})
		}
		row := func(p payment.CardPayment) cardPaymentRow { return cardPaymentRow{CardPayment: p, Zone: q.Zone} }
		if err := fillList(ctx, q, &data.listData, cardPaymentsPath, list, row); err != nil {
			return h.failure(c, err)
		}
	}
	return h.renderList(c, q, "card-payments", "Card payments", data)
}

// cardPaymentColumns are the columns of the card payments' CSV: the API's
// names for its fields, times in zone.
func cardPaymentColumns(zone *time.Location) []csvColumn[payment.CardPayment] {
	id := func(u *uuid.UUID) string {
		if u == nil {
			return ""
		}
		return u.String()
	}
	return []csvColumn[payment.CardPayment]{
		{"id", func(p payment.CardPayment) string { return p.ID.String() }},
		{"kind", func(p payment.CardPayment) string { return p.Kind }},
		{"status", func(p payment.CardPayment) string { return p.Status }},
		{"amount", func(p payment.CardPayment) string {
			if p.Kind == payment.Refund {
				return csvMinus(p.Amount)
			}
			return p.Amount.Text('f')
		}},
		{"invoiceId", func(p payment.CardPayment) string { return p.InvoiceID.String() }},
		{"invoiceNumber", func(p payment.CardPayment) string { return p.InvoiceNumber }},
		{"merchantAccountId", func(p payment.CardPayment) string { return p.MerchantAccountID.String() }},
		{"mid", func(p payment.CardPayment) string { return p.MID }},
		{"cardBrand", func(p payment.CardPayment) string { return optional.Value(p.CardBrand) }},
		{"lastFour", func(p payment.CardPayment) string { return optional.Value(p.LastFour) }},
		{"payerName", func(p payment.CardPayment) string { return optional.Value(p.PayerName) }},
		{"retRef", func(p payment.CardPayment) string { return optional.Value(p.RetRef) }},
		{"declineReason", func(p payment.CardPayment) string { return optional.Value(p.DeclineReason) }},
		{"level3Sent", func(p payment.CardPayment) string { return strconv.FormatBool(p.Level3Sent) }},
		{"savedCard", func(p payment.CardPayment) string { return strconv.FormatBool(p.SavedCard) }},
		{"refundOf", func(p payment.CardPayment) string { return id(p.RefundOf) }},
		{"amountRefunded", func(p payment.CardPayment) string { return p.AmountRefunded.Text('f') }},
		{"reason", func(p payment.CardPayment) string { return optional.Value(p.Reason) }},
		{"depositId", func(p payment.CardPayment) string { return id(p.DepositID) }},
		{"createdAt", func(p payment.CardPayment) string { return csvTime(&p.CreatedAt, zone) }},
		{"createdByName", func(p payment.CardPayment) string { return optional.Value(p.CreatedByName) }},
	}
}
