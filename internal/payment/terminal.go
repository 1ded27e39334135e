package payment

import (
	"context"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/processor"
)

// TerminalSale is a sale a card terminal made toward an invoice, as the
// gateway answered it (package terminal asks the terminal, outside any
// transaction, and records the answer with RecordTerminalSale).
type TerminalSale struct {
	OrganizationID uuid.UUID
	InvoiceID      uuid.UUID
	TerminalID     uuid.UUID
	Amount         apd.Decimal
	Result         processor.TerminalResult
}

// RecordTerminalSale records a terminal's sale inside tx, the transaction
// that records the terminal payment's outcome, exactly as a pay-page sale
// is recorded: a card payment (with its entry mode and terminal), on
// approval the invoice's payment and card_payment.approved then
// invoice.part_paid or invoice.paid; on decline a declined card payment
// (failedAttempts grows) and card_payment.declined. An approval the
// invoice can no longer take (paid or cancelled meanwhile, or above its
// balance) records nothing and is refused (ErrNotPayable or the invoice's
// refusal of the amount): the caller rolls back and voids the charge.
func (s *Store) RecordTerminalSale(ctx context.Context, tx *sqlx.Tx, ts TerminalSale, now time.Time) (CardPayment, error) {
	locked, err := invoice.Lock(ctx, tx, ts.OrganizationID, ts.InvoiceID)
	if err != nil {
		return CardPayment{}, err
	}
	res := ts.Result
	sale := CardPayment{
		ID: uuid.Must(uuid.NewV7()), OrganizationID: locked.OrganizationID, Kind: Sale, Status: Approved, Amount: ts.Amount,
		InvoiceID: locked.ID, MerchantAccountID: locked.MerchantAccountID, CardBrand: optional.String(BrandName(res.CardBrand)),
		LastFour: optional.String(res.LastFour), CreatedAt: now, EntryMode: optional.String(res.EntryMode), TerminalID: &ts.TerminalID,
	}
	if !res.Approved {
		locked.RecordDecline()
		reason := strings.TrimSpace(res.DeclineReason)
		if reason == "" {
			reason = "The card was declined."
		}
		sale.Status, sale.DeclineReason = Declined, &reason
		stored, err := insertCardPayment(ctx, tx, sale)
		if err != nil {
			return CardPayment{}, err
		}
		if err := locked.Save(); err != nil {
			return CardPayment{}, err
		}
		if _, err := event.Append(ctx, tx, locked.OrganizationID, event.CardPaymentDeclined, stored.Model(), now); err != nil {
			return CardPayment{}, err
		}
		return stored, s.notifyDeclined(ctx, tx, locked, stored, now)
	}
	if !locked.Status.Payable() {
		return CardPayment{}, ErrNotPayable
	}
	if err := invoice.CheckPayment(&locked.Invoice, ts.Amount); err != nil {
		return CardPayment{}, err
	}
	sale.RetRef = optional.String(res.RetRef)
	if err := locked.RecordPayment(ts.Amount, now, false); err != nil {
		return CardPayment{}, err
	}
	stored, err := insertCardPayment(ctx, tx, sale)
	if err != nil {
		return CardPayment{}, err
	}
	if err := locked.Save(); err != nil {
		return CardPayment{}, err
	}
	if _, err := event.Append(ctx, tx, locked.OrganizationID, event.CardPaymentApproved, stored.Model(), now); err != nil {
		return CardPayment{}, err
	}
	paid := event.InvoicePartPaid
	if locked.Status == invoice.Paid {
		paid = event.InvoicePaid
	}
	if _, err = s.Invoices.AppendEvent(ctx, tx, locked.OrganizationID, locked.ID, paid, now); err != nil {
		return CardPayment{}, err
	}
	return stored, queueReceipt(ctx, tx, locked, stored.ID, now)
}
