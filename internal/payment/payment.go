// Package payment charges cards toward invoices through the card processor
// and refunds them, keeps the cards customers save, and limits attempts per
// pay link. The invoice's state moves only through the invoice package,
// under its row lock.
//
// It owns the tables card_payments (sales, approved and declined, and
// refunds), pending_refunds, saved_cards,
// pending_charges, auto_charges (the automatic charges of recurring
// invoices' occurrences), pay_limits, pay_submissions, deposits and
// batch_closings. The invoice numbers it shows are invoice's
// (invoice.Numbers); the MIDs and their time zones directory's.
package payment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

// Store charges cards toward invoices, refunds them, keeps saved cards
// and settles deposits.
type Store struct {
	DB        *sqlx.DB
	Processor processor.Processor
	Now       func() time.Time
	// SettlementCutoff is the local time of day (from midnight) at which
	// each MID's open batch closes.
	SettlementCutoff time.Duration
	// Invoices appends the invoice events of a payment (invoice.paid,
	// invoice.part_paid), with their pay links.
	Invoices *invoice.Store
	// Members are told of declines and deposits paid, as each chose
	// (nil: nobody is).
	Members Members
	// CardRemoved is told, in the transaction that removes a saved card,
	// of its removal (recurring.Store.EndAutoPay: the series charged with
	// it stop); nil: nobody is.
	CardRemoved func(ctx context.Context, tx *sqlx.Tx, org, cardID uuid.UUID, at time.Time) error
	// Terminals hold what their pending payments take of a balance
	// (terminal.Store, LeftToPay); nil: there are none.
	Terminals Terminals
}

// Request is a payment as the customer asks for it on the pay page.
type Request struct {
	// AttemptID is the one-time id of the form submitted: a repeat of it
	// gets the first answer, without a second charge.
	AttemptID uuid.UUID
	Card      processor.Card // in memory only; never stored or logged
	Amount    apd.Decimal
	SaveCard  bool
	// ChargeConsent is the exact words of the customer's consent to
	// future charges of the card saved (ChargeConsentWords), ticked with
	// SaveCard; "" without it.
	ChargeConsent string
	Prefers       string // invoice.Email, invoice.Text, or "" to leave it as it is
	// Version is the invoice's version the form was shown with: an
	// invoice changed since (invoice.Store.Update) is not charged
	// (ErrChanged).
	Version int
}

// Outcome is the processor's answer: an approved payment as recorded, or a
// decline with its reason.
type Outcome struct {
	Approved      bool
	Payment       invoice.Payment
	DeclineReason string
}

// ErrNotPayable: the invoice is paid or cancelled (perhaps since the page was shown).
var ErrNotPayable = rule.New(rule.Conflict, "", "Invoice cannot be paid", "The invoice is paid or cancelled, so it takes no payment.")

// ErrChanged: the invoice was changed after the form was shown, so nothing
// was charged: the customer pays what it asks now, from the page again.
var ErrChanged = rule.New(rule.Conflict, "", "Invoice changed",
	"The invoice was changed after this page was shown, so nothing was charged. Check it again, and pay from the page as it is now.")

// ErrVoided: the charge was approved, but recording it failed, so it was
// voided at the processor. Nothing was charged; the customer may try again.
var ErrVoided = errors.New("payment: approved charge could not be recorded and was voided")

// ErrVoidFailed: the charge was approved, recording it failed, and so did
// the void. The card may be charged for now; the pending charge is voided
// later by SettlePending, and the error (with the order id) is logged.
var ErrVoidFailed = errors.New("payment: approved charge could not be recorded, and the void failed")

// PayTimeout bounds a payment: the waits for the invoice's lock, the
// processor call and the recording. The void of a charge whose answer was
// lost runs past it (within voidTimeout). It does not end when the customer
// goes away: a charge under way finishes and is recorded (or voided).
const PayTimeout = 60 * time.Second

// voidTimeout bounds the void after a failed recording.
const voidTimeout = 30 * time.Second

// Pay charges r.Card for r.Amount toward inv (read by its pay link) in
// three steps, so that no transaction is open, and no connection held,
// while the processor is asked:
//
//  1. reserve, under the invoice's row lock: a form already answered gets
//     its answer again; the invoice must be at the version the form was
//     shown with (ErrChanged: nothing is charged at an amount or lines
//     the invoice no longer has); the amount must be at most the balance less what
//     the payments under way hold (amountRefused); a pending charge is
//     written, which holds the amount until the outcome is recorded. So two
//     customers paying the whole balance at once: the second is refused
//     here, before the processor is asked, and the invoice never goes past
//     its amount.
//  2. the processor is asked.
//  3. record, under the row lock again: on approval the payment, the saved
//     card and the preference; on decline failedAttempts grows; either way
//     the card payment, the form's answer and the events, and the pending
//     charge is deleted.
//
// The same form sent again while its first POST is under way waits for the
// first's answer and gets it. A processor failure (processor.ErrUnavailable)
// records nothing. If recording fails after an approval, the charge is
// voided by its order id (ErrVoided, with ErrNotPayable when the invoice was
// cancelled meanwhile; ErrVoidFailed when the void fails too). The pending
// charge covers every charge whose outcome is lost (processor.ErrUnsettled,
// ErrVoidFailed, a crash): SettlePending voids it later.
func (s *Store) Pay(ctx context.Context, inv invoice.Invoice, r Request) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, PayTimeout)
	defer cancel()
	h, err := s.reserve(ctx, inv, r)
	for err == nil && h.wait {
		if err = pause(ctx); err != nil {
			err = fmt.Errorf("payment: waiting for the answer to the first POST of form %s: %w", r.AttemptID, err)
		} else {
			h, err = s.reserve(ctx, inv, r)
		}
	}
	switch {
	case err != nil:
		return Outcome{}, err
	case h.answered:
		return h.prior, nil
	}
	return s.askAndRecord(ctx, inv, h, r)
}

// askAndRecord is steps 2 and 3 of a charge reserved as h (Pay's, or an
// automatic charge's): the processor asked with no transaction open, its
// answer recorded, and an approval that cannot be recorded voided.
func (s *Store) askAndRecord(ctx context.Context, inv invoice.Invoice, h hold, r Request) (Outcome, error) {
	res, err := s.Processor.AuthorizeCapture(ctx, h.charge)
	if err != nil {
		err = fmt.Errorf("payment: charge for invoice %s: %w", inv.ID, err)
		if errors.Is(err, processor.ErrUnsettled) {
			s.voidPendingNow(ctx, h.id, err)
		} else {
			s.forgetPending(ctx, h.id) // nothing charged
		}
		return Outcome{}, err
	}
	out, err := s.record(ctx, inv, h, r, res)
	switch {
	case err == nil:
		return out, nil
	case !res.Approved:
		s.forgetPending(ctx, h.id) // declined: nothing charged
		return Outcome{}, err
	}
	// An approval not recorded. A failed commit may have gone through: the
	// pending charge says.
	pending, perr := s.isPending(ctx, h.id)
	switch {
	case perr != nil:
		return Outcome{}, fmt.Errorf("payment: order %s of invoice %s: record: %w; cannot tell whether it was recorded: %w: %w",
			h.id, inv.ID, err, processor.ErrUnsettled, perr)
	case !pending:
		return out, nil // recorded after all
	}
	vctx, vcancel := context.WithTimeout(context.WithoutCancel(ctx), voidTimeout)
	defer vcancel()
	if verr := s.Processor.Void(vctx, h.charge.MerchantID, h.charge.OrderID); verr != nil {
		s.voidPendingNow(ctx, h.id, verr)
		return Outcome{}, fmt.Errorf("%w: order %s of invoice %s: record: %w; void: %w", ErrVoidFailed, h.id, inv.ID, err, verr)
	}
	s.forgetPending(ctx, h.id)
	return Outcome{}, fmt.Errorf("%w: order %s: %w", ErrVoided, h.id, err)
}

// hold is what reserving a charge came to: the form's earlier answer
// (answered), a wait for its first POST (wait), or a charge whose pending
// charge is committed, so that the processor may be asked.
type hold struct {
	answered bool
	prior    Outcome
	wait     bool
	id       uuid.UUID // the payment's, sent as the order id
	charge   processor.Charge
}

// reserve is step 1 of Pay, in a transaction of its own.
func (s *Store) reserve(ctx context.Context, inv invoice.Invoice, r Request) (h hold, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		locked, err := invoice.Lock(ctx, tx, inv.OrganizationID, inv.ID)
		if err != nil {
			return err
		}
		now := s.Now()
		form, err := formState(ctx, tx, inv.ID, r.AttemptID, now)
		switch {
		case err != nil:
			return err
		case form.answered:
			h.prior, h.answered = form.prior, true
			return nil
		case form.underWay:
			h.wait = true
			return nil
		}
		if !locked.Status.Payable() {
			return ErrNotPayable
		}
		// Under the row lock that a change of the invoice takes too: a
		// change committed before this is seen here, and one after waits
		// and then finds the pending charge written below.
		if r.Version != locked.Version || inv.Version != locked.Version {
			return ErrChanged
		}
		left, err := s.LeftToPay(ctx, tx, &locked.Invoice)
		if err != nil {
			return err
		}
		if _, err := left.Take(&r.Amount); err != nil {
			return err
		}
		if err := invoice.CheckPayment(&locked.Invoice, r.Amount); err != nil {
			return err
		}
		h.id = uuid.Must(uuid.NewV7())
		h.charge = processor.Charge{MerchantID: locked.MID, OrderID: h.id.String(), Amount: r.Amount, Card: r.Card,
			Items: Level3Items(inv.Lines), TaxAmount: inv.TaxAmount, SaveProfile: r.SaveCard}
		// No charge without a durable trace: should its outcome be lost,
		// the pending charge is voided later (SettlePending).
		return writePending(ctx, tx, h.id, locked.ID, locked.MID, r, now)
	})
	return h, err
}

// record is step 3 of Pay: the processor's answer res to the charge h,
// in a transaction of its own.
func (s *Store) record(ctx context.Context, inv invoice.Invoice, h hold, r Request, res processor.Result) (out Outcome, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		locked, err := invoice.Lock(ctx, tx, inv.OrganizationID, inv.ID)
		if err != nil {
			return err
		}
		now := s.Now()
		sale := CardPayment{
			ID: h.id, OrganizationID: locked.OrganizationID, Kind: Sale, Status: Approved, Amount: r.Amount,
			InvoiceID: locked.ID, MerchantAccountID: locked.MerchantAccountID, CardBrand: optional.String(BrandName(res.CardBrand)),
			LastFour: optional.String(res.LastFour), PayerName: optional.String(r.Card.Name), CreatedAt: now,
		}
		if !res.Approved {
			// A declined sale is a card payment too; failedAttempts counts it.
			locked.RecordDecline()
			if err := deletePending(ctx, tx, h.id); err != nil {
				return err
			}
			out = Outcome{DeclineReason: res.DeclineReason}
			if strings.TrimSpace(out.DeclineReason) == "" {
				out.DeclineReason = "The card was declined."
			}
			sale.Status, sale.DeclineReason = Declined, &out.DeclineReason
			stored, err := insertCardPayment(ctx, tx, sale)
			if err != nil {
				return err
			}
			if err := recordSubmission(ctx, tx, locked.ID, r.AttemptID, out, now); err != nil {
				return err
			}
			if err := locked.Save(); err != nil {
				return err
			}
			if _, err = event.Append(ctx, tx, locked.OrganizationID, event.CardPaymentDeclined, stored.Model(), now); err != nil {
				return err
			}
			return s.notifyDeclined(ctx, tx, locked, stored, now)
		}
		// Cancelled while the processor was asked: the charge is voided.
		if !locked.Status.Payable() {
			return ErrNotPayable
		}
		sale.RetRef, sale.Level3Sent = optional.String(res.RetRef), h.charge.Items != nil
		p := invoice.Payment{
			ID: h.id, Amount: r.Amount, RetRef: sale.RetRef, CardBrand: sale.CardBrand,
			LastFour: sale.LastFour, PayerName: sale.PayerName, PaidAt: now, Level3Sent: sale.Level3Sent,
		}
		// The customer changes on the pay page by a card saved or a
		// preference stated: its event goes with the payment's.
		var customerChanged bool
		if r.SaveCard && res.ProfileID != "" {
			saved, err := saveCard(ctx, tx, savedCard{
				OrganizationID: locked.OrganizationID, MerchantAccountID: locked.MerchantAccountID,
				CustomerID: locked.CustomerID, ProfileID: res.ProfileID, AccountID: res.AccountID,
				CardBrand: p.CardBrand, LastFour: p.LastFour, Expiry: r.Card.Expiry, SavedAt: now, SavedByName: r.Card.Name,
				ChargeConsent: r.ChargeConsent,
			})
			if err != nil {
				return err
			}
			p.SavedCard, sale.SavedCard, customerChanged = true, true, saved
		}
		if err := locked.RecordPayment(r.Amount, now, sale.Level3Sent); err != nil {
			return err
		}
		stored, err := insertCardPayment(ctx, tx, sale)
		if err != nil {
			return err
		}
		// In the payment's transaction: the pending charge is gone if and
		// only if the payment is recorded.
		if err := deletePending(ctx, tx, h.id); err != nil {
			return err
		}
		if r.Prefers != "" {
			changed, err := locked.SetPreference(r.Prefers, now)
			if err != nil {
				return err
			}
			customerChanged = customerChanged || changed
		}
		out = Outcome{Approved: true, Payment: p}
		if err := recordSubmission(ctx, tx, locked.ID, r.AttemptID, out, now); err != nil {
			return err
		}
		if err := locked.Save(); err != nil {
			return err
		}
		if _, err := event.Append(ctx, tx, locked.OrganizationID, event.CardPaymentApproved, stored.Model(), now); err != nil {
			return err
		}
		paid := event.InvoicePartPaid
		if locked.Status == invoice.Paid {
			paid = event.InvoicePaid
		}
		if _, err = s.Invoices.AppendEvent(ctx, tx, locked.OrganizationID, locked.ID, paid, now); err != nil {
			return err
		}
		if customerChanged {
			// After the invoice's save: its open balance as paid.
			if err := customer.AppendUpdated(ctx, tx, locked.OrganizationID, locked.CustomerID, s.Invoices, s, now); err != nil {
				return err
			}
		}
		return queueReceipt(ctx, tx, locked, stored.ID, now)
	})
	return out, err
}

// isPending reports whether the order's pending charge is still there,
// that is whether its payment is not recorded.
func (s *Store) isPending(ctx context.Context, orderID uuid.UUID) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var pending bool
	err := s.DB.GetContext(ctx, &pending, `SELECT EXISTS (SELECT 1 FROM pending_charges WHERE order_id = $1)`, orderID)
	return pending, err
}

// Level3Items are the lines as line-level data, each with its tax
// amount (the charge carries the order's total tax beside them), when
// every line has a
// commodity code, a unit of measure and a UPC; nil otherwise (and when
// there are no lines).
func Level3Items(lines []invoice.Line) []processor.Item {
	if len(lines) == 0 {
		return nil
	}
	items := make([]processor.Item, len(lines))
	for i, l := range lines {
		if blank(l.CommodityCode) || blank(l.UOM) || blank(l.UPC) {
			return nil
		}
		items[i] = processor.Item{Description: l.Description, Quantity: invoice.Plain(l.Quantity), UnitCost: invoice.Plain(l.UnitCost),
			LineTotal: invoice.LineTotal(l), TaxAmount: invoice.LineTax(l), UOM: *l.UOM, CommodityCode: *l.CommodityCode, UPC: *l.UPC}
	}
	return items
}

func blank(s *string) bool { return s == nil || strings.TrimSpace(*s) == "" }

// BrandName is how a card brand is shown: "Visa", "Mastercard", …
func BrandName(brand string) string {
	switch strings.ToLower(brand) {
	case "visa":
		return "Visa"
	case "mastercard":
		return "Mastercard"
	case "amex":
		return "American Express"
	case "discover":
		return "Discover"
	case "jcb":
		return "JCB"
	case "diners":
		return "Diners Club"
	case "", "unknown":
		return ""
	}
	return brand
}
