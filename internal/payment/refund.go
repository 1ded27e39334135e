package payment

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
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

// RefundRequest is a refund as a merchant asks for it.
type RefundRequest struct {
	Actor       invoice.Actor // the organization and the key's name
	SaleID      uuid.UUID
	Amount      *apd.Decimal // nil: all that is left of the sale
	Reason      *string
	Idempotency *invoice.Idempotency
}

// ErrNotRefundable: only an approved sale can be refunded.
var ErrNotRefundable = errors.New("payment: only an approved sale can be refunded")

// ExceedsError: the refund asks for more than is left of the sale.
type ExceedsError struct {
	Refundable apd.Decimal // what may still be refunded
}

func (e *ExceedsError) Error() string {
	return "payment: the refund exceeds what is left of the sale, " + e.Refundable.Text('f')
}

// ErrKeyReused: the Idempotency-Key was used with another body.
var ErrKeyReused = errors.New("payment: idempotency key reused with a different request")

// pendingRefundAge is when a pending refund may be settled without racing
// its own request: none is recorded later than PayTimeout after it.
const pendingRefundAge = PayTimeout + 2*time.Minute

// Refund gives money of an approved sale back to its card. Within one
// transaction: the Idempotency-Key is claimed first (a concurrent request
// with it waits there, then replays), the invoice and the sale are locked
// (refunds of one sale are made one after the other, so their sum never
// exceeds it), a pending refund is committed beside it, the processor is
// asked, and the refund (approved or declined) is recorded with what it
// does to the sale and the invoice. A processor failure records nothing
// (processor.ErrUnavailable). A refund whose answer was lost stays pending
// and is settled by asking the processor: later (SettlePendingRefunds), or
// first thing when its request is retried with the same key. replayed
// says the key's refund was returned as it is.
func (s *Service) Refund(ctx context.Context, r RefundRequest) (refund CardPayment, replayed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, PayTimeout)
	defer cancel()
	org := r.Actor.OrganizationID
	if r.Idempotency != nil {
		if err := s.settleKeyed(ctx, org, r.Idempotency.Key); err != nil {
			return CardPayment{}, false, err
		}
	}
	refundID := uuid.Must(uuid.NewV7())
	var pending *pendingRefund
	var approved bool
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if r.Idempotency != nil {
			earlier, err := claimRefundKey(ctx, tx, org, *r.Idempotency, refundID, s.Now())
			if err != nil || earlier != uuid.Nil {
				refundID, replayed = earlier, true
				return err
			}
		}
		sale, locked, err := lockSale(ctx, tx, org, r.SaleID)
		if err != nil {
			return err
		}
		refundable, err := refundableOf(ctx, tx, sale)
		if err != nil {
			return err
		}
		amount := refundable
		if r.Amount != nil {
			amount = *r.Amount
		}
		if refundable.Sign() <= 0 || amount.Cmp(&refundable) > 0 {
			return &ExceedsError{Refundable: refundable}
		}
		now := s.Now()
		pending = &pendingRefund{RefundID: refundID, OrganizationID: org, SaleID: sale.ID, Amount: amount,
			Whole: amount.Cmp(&sale.Amount) == 0, Reason: r.Reason, CreatedByName: r.Actor.Name, CreatedAt: now,
			SettleAfter: now.Add(pendingRefundAge)}
		if r.Idempotency != nil {
			pending.Key, pending.Hash = &r.Idempotency.Key, r.Idempotency.Hash
		}
		// Committed on its own: should the answer be lost, it stays.
		if err := s.writePendingRefund(ctx, pending); err != nil {
			return err
		}
		res, err := s.Processor.Refund(ctx, pending.ask(sale))
		if err != nil {
			return fmt.Errorf("payment: refund of sale %s: %w", sale.ID, err)
		}
		approved = res.Approved
		return s.recordRefund(ctx, tx, locked, sale, pending, res)
	})
	switch {
	case err != nil && pending != nil && (approved || errors.Is(err, processor.ErrUnsettled)):
		// The processor may have refunded: settle by asking it, at once.
		s.settlePendingRefundNow(ctx, refundID, err)
		return CardPayment{}, false, err
	case err != nil && pending != nil:
		s.forgetPendingRefund(ctx, refundID) // the processor made no refund
		return CardPayment{}, false, err
	case err != nil:
		return CardPayment{}, false, err
	}
	refund, err = s.CardPayment(ctx, org, refundID)
	return refund, replayed, err
}

// lockSale locks the invoice of an approved sale of the organization, then
// the sale. Sales are locked FOR NO KEY UPDATE so that a pending refund,
// committed meanwhile on another connection, may still reference it.
func lockSale(ctx context.Context, tx *sqlx.Tx, org, saleID uuid.UUID) (CardPayment, *invoice.Locked, error) {
	var invoiceID uuid.UUID
	err := tx.GetContext(ctx, &invoiceID, `SELECT invoice_id FROM card_payments WHERE id = $1 AND organization_id = $2`, saleID, org)
	if errors.Is(err, sql.ErrNoRows) {
		return CardPayment{}, nil, ErrNotFound
	}
	if err != nil {
		return CardPayment{}, nil, fmt.Errorf("payment: unable to read card payment: %w", err)
	}
	locked, err := invoice.Lock(ctx, tx, org, invoiceID)
	if err != nil {
		return CardPayment{}, nil, err
	}
	sale, err := scanCardPayment(tx.QueryRowContext(ctx, selectCardPayment+` WHERE c.id = $1 FOR NO KEY UPDATE OF c`, saleID))
	if err != nil {
		return CardPayment{}, nil, fmt.Errorf("payment: unable to lock card payment: %w", err)
	}
	if sale.Kind != Sale || sale.Status != Approved {
		return CardPayment{}, nil, ErrNotRefundable
	}
	return sale, locked, nil
}

// refundableOf is what is left of a locked sale: its amount less its
// approved refunds and the refunds still pending on it.
func refundableOf(ctx context.Context, tx *sqlx.Tx, sale CardPayment) (apd.Decimal, error) {
	var pending string
	err := tx.GetContext(ctx, &pending, `SELECT coalesce(sum(amount), 0)::text FROM pending_refunds WHERE sale_id = $1`, sale.ID)
	if err != nil {
		return apd.Decimal{}, fmt.Errorf("payment: unable to read pending refunds: %w", err)
	}
	var left, held apd.Decimal
	if _, _, err := held.SetString(pending); err != nil {
		return apd.Decimal{}, err
	}
	if _, err := apd.BaseContext.WithPrecision(34).Sub(&left, &sale.Amount, &sale.AmountRefunded); err != nil {
		return apd.Decimal{}, err
	}
	if _, err := apd.BaseContext.WithPrecision(34).Sub(&left, &left, &held); err != nil {
		return apd.Decimal{}, err
	}
	return left, nil
}

// recordRefund writes the processor's answer to a pending refund, inside
// the transaction holding the sale and its invoice: the refund's card
// payment, and when approved, what it adds to the sale's and the invoice's
// amountRefunded, and its Idempotency-Key when it came with one. It is
// recorded once: a second call for the same refund changes nothing.
func (s *Service) recordRefund(ctx context.Context, tx *sqlx.Tx, locked *invoice.Locked, sale CardPayment, p *pendingRefund, res processor.RefundResult) error {
	refund := CardPayment{
		ID: p.RefundID, OrganizationID: p.OrganizationID, Kind: Refund, Status: Approved, Amount: p.Amount,
		InvoiceID: sale.InvoiceID, MerchantAccountID: sale.MerchantAccountID, CardBrand: sale.CardBrand,
		LastFour: sale.LastFour, PayerName: sale.PayerName, RetRef: optional(res.RetRef), RefundOf: &sale.ID,
		Reason: p.Reason, CreatedAt: p.CreatedAt, CreatedByName: &p.CreatedByName,
	}
	if !res.Approved {
		reason := strings.TrimSpace(res.DeclineReason)
		if reason == "" {
			reason = "The refund was declined."
		}
		refund.Status, refund.DeclineReason, refund.RetRef = Declined, &reason, nil
	}
	inserted, err := insertRefundOnce(ctx, tx, refund)
	if err != nil || !inserted {
		return errors.Join(err, deletePendingRefund(ctx, tx, p.RefundID))
	}
	if res.Approved {
		if _, err := tx.ExecContext(ctx, `UPDATE card_payments SET amount_refunded = amount_refunded + $2 WHERE id = $1`,
			sale.ID, p.Amount.Text('f')); err != nil {
			return fmt.Errorf("payment: unable to record the refund on its sale: %w", err)
		}
		locked.RecordRefund(p.Amount)
		if err := locked.Save(); err != nil {
			return err
		}
	}
	if p.Key != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO refund_idempotency_keys (organization_id, key, request_hash, refund_id, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (organization_id, key) DO NOTHING`,
			p.OrganizationID, *p.Key, p.Hash, p.RefundID, p.CreatedAt); err != nil {
			return fmt.Errorf("payment: unable to keep the refund's idempotency key: %w", err)
		}
	}
	if err := deletePendingRefund(ctx, tx, p.RefundID); err != nil {
		return err
	}
	typ := event.CardPaymentRefunded
	if !res.Approved {
		typ = event.CardPaymentDeclined
	}
	return s.Events.Record(ctx, tx, p.OrganizationID, typ, refund.ID)
}

// insertRefundOnce writes a refund's card payment unless it is there.
func insertRefundOnce(ctx context.Context, tx *sqlx.Tx, refund CardPayment) (bool, error) {
	var exists bool
	if err := tx.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM card_payments WHERE id = $1)`, refund.ID); err != nil {
		return false, fmt.Errorf("payment: unable to read card payment: %w", err)
	}
	if exists {
		return false, nil
	}
	return true, insertCardPayment(ctx, tx, refund)
}

// claimRefundKey records the key as making refund id, inside tx, or
// returns the refund an earlier request with it made within the window,
// as invoice creation does: a concurrent request with the key waits on
// its unique index until the first commits or rolls back.
func claimRefundKey(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, idem invoice.Idempotency, id uuid.UUID, now time.Time) (uuid.UUID, error) {
	err := tx.GetContext(ctx, new(uuid.UUID), `
		INSERT INTO refund_idempotency_keys (organization_id, key, request_hash, refund_id, created_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (organization_id, key) DO UPDATE
			SET request_hash = excluded.request_hash, refund_id = excluded.refund_id, created_at = excluded.created_at
			WHERE refund_idempotency_keys.created_at <= $6
		RETURNING refund_id`, org, idem.Key, idem.Hash, id, now, now.Add(-invoice.IdempotencyWindow))
	if err == nil {
		return uuid.Nil, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return uuid.Nil, fmt.Errorf("payment: unable to claim idempotency key: %w", err)
	}
	var row struct {
		Hash     []byte    `db:"request_hash"`
		RefundID uuid.UUID `db:"refund_id"`
	}
	if err := tx.GetContext(ctx, &row, `SELECT request_hash, refund_id FROM refund_idempotency_keys
		WHERE organization_id = $1 AND key = $2`, org, idem.Key); err != nil {
		return uuid.Nil, fmt.Errorf("payment: unable to read idempotency key: %w", err)
	}
	if subtle.ConstantTimeCompare(row.Hash, idem.Hash) != 1 {
		return uuid.Nil, ErrKeyReused
	}
	return row.RefundID, nil
}

// DeleteExpiredRefundKeys forgets refund Idempotency-Keys older than the window.
func (s *Service) DeleteExpiredRefundKeys(ctx context.Context) error {
	_, err := s.DB.ExecContext(ctx, `DELETE FROM refund_idempotency_keys WHERE created_at < $1`, s.Now().Add(-invoice.IdempotencyWindow))
	if err != nil {
		return fmt.Errorf("payment: unable to delete expired refund idempotency keys: %w", err)
	}
	return nil
}

// pendingRefund is a refund under way (table pending_refunds).
type pendingRefund struct {
	RefundID       uuid.UUID   `db:"refund_id"`
	OrganizationID uuid.UUID   `db:"organization_id"`
	SaleID         uuid.UUID   `db:"sale_id"`
	Amount         apd.Decimal `db:"-"`
	AmountText     string      `db:"amount"`
	Whole          bool        `db:"whole"`
	Reason         *string     `db:"reason"`
	CreatedByName  string      `db:"created_by_name"`
	Key            *string     `db:"idempotency_key"`
	Hash           []byte      `db:"request_hash"`
	CreatedAt      time.Time   `db:"created_at"`
	SettleAfter    time.Time   `db:"settle_after"`
	Attempts       int         `db:"attempts"`
}

// ask is what the processor is asked for the refund of sale.
func (p *pendingRefund) ask(sale CardPayment) processor.Refund {
	return processor.Refund{MerchantID: sale.MID, OrderID: p.RefundID.String(), SaleRetRef: deref(sale.RetRef),
		SaleOrder: sale.ID.String(), LastFour: deref(sale.LastFour), Amount: p.Amount, Whole: p.Whole}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (s *Service) writePendingRefund(ctx context.Context, p *pendingRefund) error {
	_, err := s.DB.ExecContext(ctx, `INSERT INTO pending_refunds (refund_id, organization_id, sale_id, amount, whole, reason,
			created_by_name, idempotency_key, request_hash, created_at, settle_after)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		p.RefundID, p.OrganizationID, p.SaleID, p.Amount.Text('f'), p.Whole, p.Reason, p.CreatedByName, p.Key, p.Hash,
		p.CreatedAt, p.SettleAfter)
	if err != nil {
		return fmt.Errorf("payment: unable to record pending refund: %w", err)
	}
	return nil
}

func deletePendingRefund(ctx context.Context, tx *sqlx.Tx, id uuid.UUID) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM pending_refunds WHERE refund_id = $1`, id); err != nil {
		return fmt.Errorf("payment: unable to settle pending refund: %w", err)
	}
	return nil
}

// forgetPendingRefund forgets a refund the processor did not make. Should
// that fail, the row is settled later by asking the processor: harmless.
func (s *Service) forgetPendingRefund(ctx context.Context, id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.DB.ExecContext(ctx, `DELETE FROM pending_refunds WHERE refund_id = $1`, id)
}

// settlePendingRefundNow makes a pending refund due at once: its request
// is over, so nothing else will record it.
func (s *Service) settlePendingRefundNow(ctx context.Context, id uuid.UUID, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.DB.ExecContext(ctx, `UPDATE pending_refunds SET settle_after = $2, last_error = $3 WHERE refund_id = $1`,
		id, s.Now(), truncate(cause.Error(), 1000))
}

const selectPendingRefund = `SELECT refund_id, organization_id, sale_id, amount::text AS amount, whole, reason,
	created_by_name, idempotency_key, request_hash, created_at, settle_after, attempts FROM pending_refunds`

// settleKeyed settles, before its retry goes on, a pending refund left by
// an earlier request with the same Idempotency-Key.
func (s *Service) settleKeyed(ctx context.Context, org uuid.UUID, key string) error {
	var p pendingRefund
	err := s.DB.GetContext(ctx, &p, selectPendingRefund+` WHERE organization_id = $1 AND idempotency_key = $2`, org, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("payment: unable to read pending refund: %w", err)
	}
	return s.settleRefund(ctx, &p)
}

// settleRefund asks the processor what became of a pending refund and
// records it (approved or declined), or forgets it when the processor made
// none.
func (s *Service) settleRefund(ctx context.Context, p *pendingRefund) error {
	if _, _, err := p.Amount.SetString(p.AmountText); err != nil {
		return fmt.Errorf("payment: pending refund %s: amount %q: %w", p.RefundID, p.AmountText, err)
	}
	sale, err := s.CardPayment(ctx, p.OrganizationID, p.SaleID)
	if err != nil {
		return err
	}
	res, found, err := s.Processor.InquireRefund(ctx, p.ask(sale))
	if err != nil {
		return fmt.Errorf("payment: inquire refund %s: %w", p.RefundID, err)
	}
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if !found {
			return deletePendingRefund(ctx, tx, p.RefundID)
		}
		sale, locked, err := lockSale(ctx, tx, p.OrganizationID, p.SaleID)
		if err != nil {
			return err
		}
		return s.recordRefund(ctx, tx, locked, sale, p, res)
	})
}

// SettlePendingRefunds settles the due pending refunds: refunds whose
// answer was lost. One that cannot be settled yet (the processor does not
// answer) is tried again after a growing wait; each failure is logged.
// Several instances may run it at once.
func (s *Service) SettlePendingRefunds(ctx context.Context, log *slog.Logger) error {
	now := s.Now()
	var due []pendingRefund
	err := s.DB.SelectContext(ctx, &due, `WITH due AS (
			SELECT refund_id FROM pending_refunds WHERE settle_after <= $1
			ORDER BY settle_after LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE pending_refunds p SET attempts = p.attempts + 1,
			settle_after = $1 + least($4::interval, $3::interval * power(2, least(p.attempts, 20)))
		FROM due WHERE p.refund_id = due.refund_id
		RETURNING p.refund_id, p.organization_id, p.sale_id, p.amount::text AS amount, p.whole, p.reason,
			p.created_by_name, p.idempotency_key, p.request_hash, p.created_at, p.settle_after, p.attempts`,
		now, settleBatch, settleBackoff.String(), settleBackoffUp.String())
	if err != nil {
		return fmt.Errorf("payment: unable to claim pending refunds: %w", err)
	}
	for i := range due {
		p := &due[i]
		if err := s.settleRefund(ctx, p); err != nil {
			log.Error("payment: pending refund not settled yet", "refund_id", p.RefundID.String(), "attempt", p.Attempts, "error", err.Error())
			_, _ = s.DB.ExecContext(ctx, `UPDATE pending_refunds SET last_error = $2 WHERE refund_id = $1`, p.RefundID, truncate(err.Error(), 1000))
			continue
		}
		log.Warn("payment: pending refund settled", "refund_id", p.RefundID.String(), "attempt", p.Attempts)
	}
	return nil
}
