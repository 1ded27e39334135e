// Package payment charges cards toward invoices through the card processor
// and refunds them, keeps the cards customers save, and limits attempts per
// pay link. The invoice's state moves only through the invoice package,
// under its row lock.
//
// It owns the tables card_payments (sales, approved and declined, and
// refunds), pending_refunds, refund_idempotency_keys, saved_cards,
// pending_charges, pay_limits, pay_submissions, deposits and
// batch_closings.
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

	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
)

// Service charges and keeps cards.
type Service struct {
	DB        *sqlx.DB
	Processor processor.Processor
	Now       func() time.Time
	// SettlementCutoff is the local time of day (from midnight) at which
	// each MID's open batch closes.
	SettlementCutoff time.Duration
	// Events records each change's event in its transaction.
	Events event.Recorder
}

// Request is a payment as the customer asks for it on the pay page.
type Request struct {
	// AttemptID is the one-time id of the form submitted: a repeat of it
	// gets the first answer, without a second charge.
	AttemptID uuid.UUID
	Card      processor.Card // in memory only; never stored or logged
	Amount    apd.Decimal
	SaveCard  bool
	Prefers   string // invoice.Email, invoice.Text, or "" to leave it as it is
}

// Outcome is the processor's answer: an approved payment as recorded, or a
// decline with its reason.
type Outcome struct {
	Approved      bool
	Payment       invoice.Payment
	DeclineReason string
}

// ErrNotPayable: the invoice is paid or cancelled (perhaps since the page was shown).
var ErrNotPayable = errors.New("payment: invoice is not payable")

// AmountError: the amount is not more than 0 and at most the balance (perhaps
// because another payment came first). Balance is the balance now.
type AmountError struct {
	Balance apd.Decimal
}

func (e *AmountError) Error() string {
	return "payment: amount must be more than 0 and at most the balance of " + e.Balance.Text('f')
}

// ErrVoided: the charge was approved, but recording it failed, so it was
// voided at the processor. Nothing was charged; the customer may try again.
var ErrVoided = errors.New("payment: approved charge could not be recorded and was voided")

// ErrVoidFailed: the charge was approved, recording it failed, and so did
// the void. The card may be charged for now; the pending charge is voided
// later by SettlePending, and the error (with the order id) is logged.
var ErrVoidFailed = errors.New("payment: approved charge could not be recorded, and the void failed")

// PayTimeout bounds a payment: the wait for the invoice's lock, the
// processor call and the recording. The void of a charge whose answer was
// lost runs past it (within voidTimeout). It does not end when the customer
// goes away: a charge under way finishes and is recorded (or voided).
const PayTimeout = 60 * time.Second

// voidTimeout bounds the void after a failed recording.
const voidTimeout = 30 * time.Second

// Pay charges r.Card for r.Amount toward inv (read by its pay link), under
// the invoice's row lock: two customers paying at once are charged one after
// the other, and the second sees the first's payment, so the invoice never
// goes past its amount. On approval the payment, the saved card and the
// preference are written in the same transaction; on decline failedAttempts
// grows. A processor failure (processor.ErrUnavailable) records nothing. If
// the transaction fails after an approval, the charge is voided by its
// order id (ErrVoided; ErrVoidFailed when the void fails too). A pending
// charge, committed before the processor is asked and deleted with the
// outcome, covers every charge whose outcome is lost (processor.ErrUnsettled,
// ErrVoidFailed, a crash): SettlePending voids it later.
func (s *Service) Pay(ctx context.Context, inv invoice.Invoice, r Request) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, PayTimeout)
	defer cancel()
	if prior, found, err := s.Submitted(ctx, inv.ID, r.AttemptID); err != nil || found {
		return prior, err
	}
	paymentID := uuid.Must(uuid.NewV7())
	items := Level3Items(inv.Lines)
	// No charge without a durable trace: should its outcome be lost, the
	// pending charge is voided later (SettlePending).
	if err := s.writePending(ctx, paymentID, inv, r.Amount); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	var approved bool
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		locked, err := invoice.Lock(ctx, tx, inv.OrganizationID, inv.ID)
		if err != nil {
			return err
		}
		// A repeat that waited on the lock for the first of its form.
		prior, found, err := submitted(ctx, tx, inv.ID, r.AttemptID)
		if err != nil {
			return err
		}
		if found {
			out = prior
			return deletePending(ctx, tx, paymentID)
		}
		if err := invoice.CheckPayment(&locked.Invoice, r.Amount); err != nil {
			if !locked.Status.Payable() {
				return ErrNotPayable
			}
			return &AmountError{Balance: locked.Balance()}
		}
		res, err := s.Processor.AuthorizeCapture(ctx, processor.Charge{
			MerchantID: locked.MID, OrderID: paymentID.String(), Amount: r.Amount, Card: r.Card,
			Items: items, SaveProfile: r.SaveCard,
		})
		if err != nil {
			return fmt.Errorf("payment: charge for invoice %s: %w", locked.ID, err)
		}
		now := s.Now()
		sale := CardPayment{
			ID: paymentID, OrganizationID: locked.OrganizationID, Kind: Sale, Status: Approved, Amount: r.Amount,
			InvoiceID: locked.ID, MerchantAccountID: locked.MerchantAccountID, CardBrand: optional(BrandName(res.CardBrand)),
			LastFour: optional(res.LastFour), PayerName: optional(r.Card.Name), CreatedAt: now,
		}
		if !res.Approved {
			// A declined sale is a card payment too; failedAttempts counts it.
			locked.RecordDecline()
			if err := deletePending(ctx, tx, paymentID); err != nil {
				return err
			}
			out = Outcome{DeclineReason: res.DeclineReason}
			if strings.TrimSpace(out.DeclineReason) == "" {
				out.DeclineReason = "The card was declined."
			}
			sale.Status, sale.DeclineReason = Declined, &out.DeclineReason
			if err := insertCardPayment(ctx, tx, sale); err != nil {
				return err
			}
			if err := recordSubmission(ctx, tx, locked.ID, r.AttemptID, out, now); err != nil {
				return err
			}
			if err := locked.Save(); err != nil {
				return err
			}
			return s.Events.Record(ctx, tx, locked.OrganizationID, event.CardPaymentDeclined, sale.ID)
		}
		approved = true
		sale.RetRef, sale.Level3Sent = optional(res.RetRef), items != nil
		p := invoice.Payment{
			ID: paymentID, Amount: r.Amount, RetRef: sale.RetRef, CardBrand: sale.CardBrand,
			LastFour: sale.LastFour, PayerName: sale.PayerName, PaidAt: now, Level3Sent: sale.Level3Sent,
		}
		if r.SaveCard && res.ProfileID != "" {
			err := saveCard(ctx, tx, savedCard{
				OrganizationID: locked.OrganizationID, MerchantAccountID: locked.MerchantAccountID,
				CustomerEmail: locked.CustomerEmail, ProfileID: res.ProfileID, AccountID: res.AccountID,
				CardBrand: p.CardBrand, LastFour: p.LastFour, Expiry: r.Card.Expiry, SavedAt: now, SavedByName: r.Card.Name,
			})
			if err != nil {
				return err
			}
			p.SavedCard, sale.SavedCard = true, true
		}
		if err := locked.RecordPayment(r.Amount, now, sale.Level3Sent); err != nil {
			return err
		}
		if err := insertCardPayment(ctx, tx, sale); err != nil {
			return err
		}
		// In the payment's transaction: the pending charge is gone if and
		// only if the payment is recorded.
		if err := deletePending(ctx, tx, paymentID); err != nil {
			return err
		}
		if r.Prefers != "" {
			if err := locked.SetPreference(r.Prefers, now); err != nil {
				return err
			}
		}
		out = Outcome{Approved: true, Payment: p}
		if err := recordSubmission(ctx, tx, locked.ID, r.AttemptID, out, now); err != nil {
			return err
		}
		if err := locked.Save(); err != nil {
			return err
		}
		if err := s.Events.Record(ctx, tx, locked.OrganizationID, event.CardPaymentApproved, sale.ID); err != nil {
			return err
		}
		paid := event.InvoicePartPaid
		if locked.Status == invoice.Paid {
			paid = event.InvoicePaid
		}
		return s.Events.Record(ctx, tx, locked.OrganizationID, paid, locked.ID)
	})
	switch {
	case err != nil && approved:
		// A failed commit may have gone through: the pending charge says.
		pending, perr := s.isPending(ctx, paymentID)
		switch {
		case perr != nil:
			return Outcome{}, fmt.Errorf("payment: order %s of invoice %s: record: %w; cannot tell whether it was recorded: %w: %w",
				paymentID, inv.ID, err, processor.ErrUnsettled, perr)
		case !pending:
			return out, nil // recorded after all
		}
		vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), voidTimeout)
		defer cancel()
		if verr := s.Processor.Void(vctx, inv.MID, paymentID.String()); verr != nil {
			s.voidPendingNow(ctx, paymentID, verr)
			return Outcome{}, fmt.Errorf("%w: order %s of invoice %s: record: %w; void: %w", ErrVoidFailed, paymentID, inv.ID, err, verr)
		}
		s.forgetPending(ctx, paymentID)
		return Outcome{}, fmt.Errorf("%w: order %s: %w", ErrVoided, paymentID, err)
	case errors.Is(err, processor.ErrUnsettled):
		s.voidPendingNow(ctx, paymentID, err)
		return Outcome{}, err
	case err != nil:
		s.forgetPending(ctx, paymentID) // nothing charged, or voided already
		return Outcome{}, err
	}
	return out, nil
}

// isPending reports whether the order's pending charge is still there,
// that is whether its payment is not recorded.
func (s *Service) isPending(ctx context.Context, orderID uuid.UUID) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var pending bool
	err := s.DB.GetContext(ctx, &pending, `SELECT EXISTS (SELECT 1 FROM pending_charges WHERE order_id = $1)`, orderID)
	return pending, err
}

// Level3Items are the lines as line-level data, when every line has a
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
			LineTotal: invoice.LineTotal(l), UOM: *l.UOM, CommodityCode: *l.CommodityCode, UPC: *l.UPC}
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

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
