// Package invoice holds invoices (payment requests): their rules, their
// states, and their storage.
//
// It owns the tables invoices, invoice_lines, recorded_payments (payments
// made outside the card), reminder_settings and tax_rates (the
// organization's named rates for the lines editor). Every invoice has a
// customer, package customer's, found or made at creation (customerOf);
// the customer's stated preference is read from there (withOwners). An invoice's state moves only through Locked, inside
// the transaction of the function that owns the change. Its card payments
// and its customer's saved cards are the payment package's, read through
// Cards; who bills, the MIDs and their locations' names and time zones are
// directory's (directory.BillerOf, directory.AccountsByID).
package invoice

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/mailaddr"
	"github.com/payreq/payreq/internal/rule"
)

// Status is where an invoice is in its life.
//
//	draft ──finalize──▶ open;  draft ──delete──▶ (gone)
//	open ──payment leaving a balance──▶ part_paid ──payment clearing it──▶ paid
//	open ──payment clearing it──▶ paid
//	open, part_paid ──cancel──▶ cancelled
//
// paid and cancelled are final.
type Status string

// The statuses.
const (
	InDraft   Status = "draft" // a draft: saved unfinished (the type Draft is what a client asks for)
	Open      Status = "open"
	PartPaid  Status = "part_paid"
	Paid      Status = "paid"
	Cancelled Status = "cancelled"
)

// Payable says whether the pay link accepts a payment and a send is
// allowed: a draft has no pay link.
func (s Status) Payable() bool { return s == Open || s == PartPaid }

// Label is the status as people read it: "Part paid".
func (s Status) Label() string {
	switch s {
	case InDraft:
		return "Draft"
	case Open:
		return "Open"
	case PartPaid:
		return "Part paid"
	case Paid:
		return "Paid"
	case Cancelled:
		return "Cancelled"
	}
	return string(s)
}

// Channels a pay link travels by.
const (
	Email = "email"
	Text  = "text"
)

// Line is one line of an invoice.
type Line struct {
	Description string
	Quantity    apd.Decimal
	UnitCost    apd.Decimal
	// TaxRate is the line's tax, a percent (8.25 is 8.25 %); nil: none.
	TaxRate       *apd.Decimal `json:",omitempty"`
	UOM           *string
	CommodityCode *string
	UPC           *string
}

// Payment methods: a card payment's, and those of a payment made outside
// the card processor and recorded by the merchant.
const (
	MethodCard         = "card"
	MethodCash         = "cash"
	MethodCheck        = "check"
	MethodBankTransfer = "bank_transfer"
	MethodOther        = "other"
)

// Payment is money received toward an invoice: an approved sale (a card
// payment of the payment package, as the invoice shows it), or a payment
// made outside the card processor that the merchant recorded (Method other
// than card; RecordPayment).
type Payment struct {
	ID     uuid.UUID
	Amount apd.Decimal
	Method string
	// Reference is a recorded payment's (a check number, a transfer's
	// reference); nil for card payments, whose processor reference is RetRef.
	Reference *string
	RetRef    *string
	CardBrand *string
	LastFour  *string
	PayerName *string
	// PaidAt is when the money was received: a sale's approval, a recorded
	// payment's receivedAt.
	PaidAt time.Time
	// RecordedAt is when payreq recorded it.
	RecordedAt time.Time
	Level3Sent bool
	SavedCard  bool
	// AmountRefunded is the sum of the payment's approved refunds.
	AmountRefunded apd.Decimal
}

// SavedCard is a customer's card stored at the processor.
type SavedCard struct {
	ID          uuid.UUID
	CardBrand   *string
	LastFour    *string
	Expiry      *string
	SavedAt     time.Time
	SavedByName string
	// ChargeConsentAt is when the customer consented to future charges of
	// the card; nil without consent.
	ChargeConsentAt *time.Time
}

// Draft is an invoice as a client asks for it.
type Draft struct {
	MerchantAccountID uuid.UUID
	InvoiceNumber     string
	Amount            apd.Decimal
	PONumber          *string
	CustomerName      *string
	CustomerCompany   *string
	CustomerEmail     *string
	CustomerPhone     *string
	Delivery          *string
	Memo              *string
	DueDate           *time.Time
	Lines             []Line // nil: no lines given
	Send              *bool
	// SendAt schedules the send: the link goes out then, not now. (Left
	// out of the idempotency hash when nil, as are Reminders: requests
	// hashed before these fields existed hash alike.)
	SendAt *time.Time `json:",omitempty"`
	// Reminders: true or false for this invoice; nil follows the
	// organization's reminder settings.
	Reminders *bool `json:",omitempty"`
	// AsDraft saves the invoice as a draft: no pay link, never sent,
	// until Finalize. (Left out of the idempotency hash when false.)
	AsDraft bool `json:",omitempty"`
	// CustomerID names the invoice's customer, whose details fill the
	// customer fields left nil; nil: the customer with CustomerEmail, made
	// when there is none.
	CustomerID *uuid.UUID `json:",omitempty"`
}

// Invoice is a stored invoice.
type Invoice struct {
	ID                uuid.UUID
	OrganizationID    uuid.UUID
	MerchantAccountID uuid.UUID
	MID               string
	LocationName      *string
	InvoiceNumber     string
	PONumber          *string
	Amount            apd.Decimal
	AmountPaid        apd.Decimal
	AmountRefunded    apd.Decimal // the approved refunds of its sales
	CustomerID        uuid.UUID
	CustomerName      *string
	CustomerCompany   *string
	CustomerEmail     string
	CustomerPhone     *string
	Delivery          string
	SentVia           *string
	SentAt            *time.Time
	SendProblem       *string
	Memo              *string
	DueDate           *time.Time
	LineCount         int
	// TaxAmount is the sum of the lines' tax amounts (0 without lines);
	// the subtotal is Amount − TaxAmount.
	TaxAmount       apd.Decimal
	Status          Status
	FailedAttempts  int
	Problem         *string
	PaidAt          *time.Time
	Level3Sent      bool
	CreatedAt       time.Time
	CreatedByName   string
	CancelledAt     *time.Time
	CancelledByName *string
	// CustomerPrefers is the customer's stated choice (package customer's).
	CustomerPrefers *string
	// ScheduledSendAt is when the pay link is to go out; nil when no send
	// is scheduled.
	ScheduledSendAt *time.Time
	// Reminders is the invoice's own choice; nil follows the organization's.
	Reminders      *bool
	RemindersSent  int
	LastRemindedAt *time.Time
	// Version counts the changes of the invoice's own fields: 1 when
	// made, one more at each Update.
	Version int
	// Biller: who bills, for the pay page and the PDF (read by Document
	// and ByPayToken only).
	Biller directory.Biller

	// Filled by full reads only (Get, Document, ByPayToken).
	Lines      []Line
	Payments   []Payment
	SavedCards []SavedCard
}

// Balance is amount − amountPaid.
func (inv *Invoice) Balance() apd.Decimal { return cents(sub(inv.Amount, inv.AmountPaid)) }

// BalanceAfter is the balance right after payment p (one of inv.Payments),
// as its receipt says it: payments recorded later do not change it.
func (inv *Invoice) BalanceAfter(p Payment) apd.Decimal {
	balance := inv.Amount
	for _, q := range inv.Payments {
		if q.RecordedAt.Before(p.RecordedAt) || q.RecordedAt.Equal(p.RecordedAt) && q.ID.String() <= p.ID.String() {
			balance = sub(balance, q.Amount)
		}
	}
	return balance
}

// ErrNotFound: no such invoice in the caller's organization.
var ErrNotFound = rule.New(rule.NotFound, "", "Invoice not found", "No invoice with this id exists in your organization.")

// fieldErrors are the messages of an Invalid refusal, keyed by the field as
// the request names it.
type fieldErrors map[string][]string

func (v fieldErrors) add(field, format string, args ...any) {
	v[field] = append(v[field], fmt.Sprintf(format, args...))
}

// AmountProblem says what is wrong with an amount of money (an invoice's,
// a refund's), or "".
func AmountProblem(d apd.Decimal) string {
	switch {
	case d.Sign() <= 0:
		return "must be greater than 0"
	case places(d) > 2:
		return "must have at most 2 decimal places"
	case d.Cmp(&maxAmount) > 0:
		return "must be at most 999999999.99"
	}
	return ""
}

func unprocessable(field, title, message string) *rule.Error {
	return rule.New(rule.Unprocessable, field, title, message)
}

// Validate checks every field rule of a draft: an Invalid *rule.Error names
// every value refused. The API's schema checks shapes and lengths first;
// this checks them again for fronts without one, and what a schema cannot:
// values, sums and combinations.
func Validate(d Draft) error {
	v := fieldErrors{}
	length := func(field string, s *string, min, max int) {
		if s == nil {
			return
		}
		if !utf8.ValidString(*s) {
			v.add(field, "must be valid UTF-8 text")
			return
		}
		if n := utf8.RuneCountInString(*s); n < min || n > max {
			v.add(field, "must be %d to %d characters", min, max)
		}
	}
	length("invoiceNumber", &d.InvoiceNumber, 1, 64)
	if strings.TrimSpace(d.InvoiceNumber) == "" && d.InvoiceNumber != "" {
		v.add("invoiceNumber", "must not be blank")
	}
	length("poNumber", d.PONumber, 0, 64)
	length("customerName", d.CustomerName, 0, 200)
	length("customerCompany", d.CustomerCompany, 0, 200)
	length("customerPhone", d.CustomerPhone, 0, 32)
	length("memo", d.Memo, 0, 2000)

	switch {
	case d.CustomerEmail == nil && d.CustomerID != nil: // the customer's (checkCustomerFields)
	case d.CustomerEmail == nil || strings.TrimSpace(*d.CustomerEmail) == "":
		v.add("customerEmail", "is required: the pay link and receipts go to this address")
	case len(*d.CustomerEmail) > 254 || !mailaddr.Valid(*d.CustomerEmail):
		v.add("customerEmail", "must be a valid email address of at most 254 characters")
	}

	if msg := AmountProblem(d.Amount); msg != "" {
		v.add("amount", "%s", msg)
	}

	if d.Delivery != nil && *d.Delivery != Email && *d.Delivery != Text {
		v.add("delivery", "must be email or text")
	}
	if d.CustomerID == nil { // else the customer's phone may fill it (checkCustomerFields)
		phoneForText(d, v)
	}

	if d.Lines != nil {
		if len(d.Lines) == 0 || len(d.Lines) > 500 {
			v.add("lines", "must hold 1 to 500 lines, or be null")
		}
		sum := apd.Decimal{}
		linesValid := true
		for i, l := range d.Lines {
			f := func(name string) string { return fmt.Sprintf("lines[%d].%s", i, name) }
			length(f("description"), &l.Description, 1, 500)
			length(f("uom"), l.UOM, 0, 32)
			length(f("commodityCode"), l.CommodityCode, 0, 32)
			length(f("upc"), l.UPC, 0, 32)
			ok := true
			switch {
			case l.Quantity.Sign() <= 0:
				v.add(f("quantity"), "must be greater than 0")
				ok = false
			case places(l.Quantity) > 4:
				v.add(f("quantity"), "must have at most 4 decimal places")
				ok = false
			case l.Quantity.Cmp(&maxUnit) > 0:
				v.add(f("quantity"), "must be at most 9999999999999")
				ok = false
			}
			var abs apd.Decimal
			abs.Abs(&l.UnitCost)
			switch {
			case places(l.UnitCost) > 4:
				v.add(f("unitCost"), "must have at most 4 decimal places")
				ok = false
			case abs.Cmp(&maxUnit) > 0:
				v.add(f("unitCost"), "must be between -9999999999999 and 9999999999999")
				ok = false
			}
			if msg := TaxRateProblem(l.TaxRate); msg != "" {
				v.add(f("taxRate"), "%s", msg)
				ok = false
			}
			if ok {
				sum = add(sum, add(LineTotal(l), LineTax(l)))
			} else {
				linesValid = false
			}
		}
		if linesValid && len(d.Lines) > 0 && d.Amount.Sign() > 0 && sum.Cmp(&d.Amount) != 0 {
			v.add("lines", "lines add up to %s (each line's quantity × unitCost rounded half up to cents, plus its tax: amount × taxRate ÷ 100 rounded half up to cents) but amount is %s",
				text(cents(sum)), text(cents(d.Amount)))
		}
	}
	checkSend(v, d.Send, d.SendAt)
	if d.AsDraft && d.Send != nil && *d.Send {
		v.add("send", "cannot be true for a draft, which has no pay link until it is finalized; it is sent when finalized")
	}
	if d.AsDraft && d.SendAt != nil {
		v.add("sendAt", "cannot be given for a draft, which has no pay link until it is finalized; give it when finalizing")
	}
	if len(v) > 0 {
		return rule.InvalidFields(v)
	}
	return nil
}

// checkSend refuses a scheduled send with send false (on creation and
// when a draft is finalized).
func checkSend(v fieldErrors, send *bool, sendAt *time.Time) {
	if sendAt != nil && send != nil && !*send {
		v.add("sendAt", "cannot be given with send: false; leave send null or true to send at sendAt")
	}
}

// phoneForText refuses text delivery without a phone.
func phoneForText(d Draft, v fieldErrors) {
	if d.Delivery != nil && *d.Delivery == Text && (d.CustomerPhone == nil || strings.TrimSpace(*d.CustomerPhone) == "") {
		v.add("customerPhone", "is required when delivery is text")
	}
}

// checkCustomerFields checks the rules Validate leaves to after a draft
// naming its customer took the customer's details.
func checkCustomerFields(d Draft) error {
	v := fieldErrors{}
	phoneForText(d, v)
	if len(v) > 0 {
		return rule.InvalidFields(v)
	}
	return nil
}

// checkSendAt refuses a scheduled send that is not in the future, or more
// than a year ahead of now.
func checkSendAt(at *time.Time, now time.Time) error {
	switch {
	case at == nil:
		return nil
	case !at.After(now):
		return rule.InvalidField("sendAt", "must be in the future; leave it null to send now")
	case at.After(now.AddDate(1, 0, 0)):
		return rule.InvalidField("sendAt", "must be at most a year ahead")
	}
	return nil
}

// channel is how the pay link goes: the customer's stated preference wins
// over the invoice's delivery; text needs a phone, else email.
func channel(inv *Invoice) (ch, recipient string) {
	ch = inv.Delivery
	if inv.CustomerPrefers != nil {
		ch = *inv.CustomerPrefers
	}
	if ch == Text && inv.CustomerPhone != nil && strings.TrimSpace(*inv.CustomerPhone) != "" {
		return Text, *inv.CustomerPhone
	}
	return Email, inv.CustomerEmail
}

// markSent records a send at `at` over ch.
func markSent(inv *Invoice, ch string, at time.Time) {
	inv.SentVia = &ch
	inv.SentAt = &at
	inv.SendProblem = nil
	inv.ScheduledSendAt = nil
}

// cancel moves an open or part-paid invoice to cancelled.
func cancel(inv *Invoice, by string, at time.Time) error {
	if !inv.Status.Payable() {
		return rule.New(rule.Conflict, "", "Invoice cannot be cancelled",
			fmt.Sprintf("The invoice is %s; only open and part_paid invoices can be cancelled (a draft is deleted instead).", inv.Status))
	}
	inv.Status = Cancelled
	inv.CancelledAt = &at
	inv.CancelledByName = &by
	inv.ScheduledSendAt = nil // nothing is sent
	return nil
}

// CheckPayment says whether amount may be paid toward inv now: the invoice
// must be open or part-paid, and the amount more than 0, in cents, and at
// most the balance. ApplyPayment checks the same; callers check first when
// something irreversible (a charge) comes between.
func CheckPayment(inv *Invoice, amount apd.Decimal) error {
	if !inv.Status.Payable() {
		return rule.Newf(rule.Conflict, "", "Invoice cannot be paid", "The invoice is %s, so it takes no payment (its balance is %s).",
			inv.Status, text(inv.Balance()))
	}
	balance := inv.Balance()
	if amount.Sign() <= 0 || places(amount) > 2 || amount.Cmp(&balance) > 0 {
		e := rule.Newf(rule.Unprocessable, "amount", "Payment amount not allowed",
			"The amount must be more than 0, in cents, and at most the balance of %s.", text(balance))
		e.Suggest = text(balance)
		return e
	}
	return nil
}

// ApplyPayment records amount paid at `at`: the balance shrinks, and the
// status becomes part_paid, or paid (with paidAt) when nothing is left. It
// refuses a payment on a final invoice, a non-positive one, and one that
// would take the invoice past its amount.
func ApplyPayment(inv *Invoice, amount apd.Decimal, at time.Time) error {
	if err := CheckPayment(inv, amount); err != nil {
		return err
	}
	inv.AmountPaid = cents(add(inv.AmountPaid, amount))
	if b := inv.Balance(); b.Sign() == 0 {
		inv.Status = Paid
		inv.PaidAt = &at
		inv.ScheduledSendAt = nil // nothing is left to ask for
	} else {
		inv.Status = PartPaid
	}
	return nil
}
