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

// Refund gives money of an approved sale back to its card, in three steps
// so that no transaction is open, and no connection held, while the
// processor is asked, as Pay does:
//
//  1. reserve: a request with an Idempotency-Key made already replays its
//     refund (replayed; ErrKeyReused for another body); then, under the
//     invoice's and the sale's row locks, the amount must be at most what
//     is left of the sale less the refunds under way (ExceedsError), and a
//     pending refund is written, which holds that amount until the
//     answer is recorded. So refunds asked at once never add up to more
//     than the sale.
//  2. the processor is asked.
//  3. record, under the row locks again: the refund (approved or
//     declined) with what it does to the sale and the invoice, its key,
//     and the pending refund deleted.
//
// A request with the key of a refund under way waits for it, then replays
// it. A processor failure records nothing (processor.ErrUnavailable). A
// refund whose answer was lost stays pending and is settled by asking the
// processor: later (SettlePendingRefunds), or first thing when its request
// is retried with the same key.
func (s *Service) Refund(ctx context.Context, r RefundRequest) (refund CardPayment, replayed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, PayTimeout)
	defer cancel()
	org := r.Actor.OrganizationID
	h, err := s.reserveRefund(ctx, r)
	for err == nil && (h.wait || h.lost != nil) {
		if h.lost != nil {
			err = s.settleRefund(ctx, h.lost)
		} else if err = pause(ctx); err != nil {
			err = fmt.Errorf("payment: waiting for the refund under way with the Idempotency-Key: %w", err)
		}
		if err == nil {
			h, err = s.reserveRefund(ctx, r)
		}
	}
	switch {
	case err != nil:
		return CardPayment{}, false, err
	case h.earlier != uuid.Nil:
		refund, err = s.CardPayment(ctx, org, h.earlier)
		return refund, true, err
	}
	p := h.pending
	res, err := s.Processor.Refund(ctx, p.ask(h.sale))
	if err == nil {
		err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error { return s.recordRefund(ctx, tx, p, res) })
	} else {
		err = fmt.Errorf("payment: refund of sale %s: %w", h.sale.ID, err)
	}
	switch {
	case err != nil && (res.Approved || errors.Is(err, processor.ErrUnsettled)):
		// The processor may have refunded: settle by asking it, at once.
		s.settlePendingRefundNow(ctx, p.RefundID, err)
		return CardPayment{}, false, err
	case err != nil:
		s.forgetPendingRefund(ctx, p.RefundID) // the processor made no refund
		return CardPayment{}, false, err
	}
	refund, err = s.CardPayment(ctx, org, p.RefundID)
	return refund, false, err
}

// refundHold is what reserving a refund came to: the key's refund made
// already (earlier), a wait for the key's refund under way (wait), the
// key's refund whose answer was lost, to settle first (lost), or a refund
// whose pending refund is committed, so that the processor may be asked.
type refundHold struct {
	earlier uuid.UUID
	wait    bool
	lost    *pendingRefund
	pending *pendingRefund
	sale    CardPayment
}

// reserveRefund is step 1 of Refund, in a transaction of its own.
func (s *Service) reserveRefund(ctx context.Context, r RefundRequest) (h refundHold, err error) {
	org := r.Actor.OrganizationID
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		if r.Idempotency != nil {
			var err error
			if h, err = keyedRefund(ctx, tx, org, *r.Idempotency, now); err != nil || h.earlier != uuid.Nil || h.wait || h.lost != nil {
				return err
			}
		}
		sale, _, err := lockSale(ctx, tx, org, r.SaleID)
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
		p := &pendingRefund{RefundID: uuid.Must(uuid.NewV7()), OrganizationID: org, SaleID: sale.ID, Amount: amount,
			Whole: amount.Cmp(&sale.Amount) == 0, Reason: r.Reason, CreatedByName: r.Actor.Name, CreatedAt: now,
			SettleAfter: now.Add(pendingRefundAge)}
		if r.Idempotency != nil {
			p.Key, p.Hash = &r.Idempotency.Key, r.Idempotency.Hash
		}
		h.pending, h.sale = p, sale
		return writePendingRefund(ctx, tx, p)
	})
	return h, err
}

// keyedRefund is what became of the requests with the Idempotency-Key, as
// on invoice creation: the refund made with it within the window (or
// ErrKeyReused when made for another request), or the refund under way or
// lost with it. Requests with one key are looked at one at a time, on every
// instance: the lock is held until tx ends.
func keyedRefund(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, idem invoice.Idempotency, now time.Time) (refundHold, error) {
	if err := lockRefundKey(ctx, tx, org, idem.Key); err != nil {
		return refundHold{}, err
	}
	var made struct {
		Hash     []byte    `db:"request_hash"`
		RefundID uuid.UUID `db:"refund_id"`
	}
	err := tx.GetContext(ctx, &made, `SELECT request_hash, refund_id FROM refund_idempotency_keys
		WHERE organization_id = $1 AND key = $2 AND created_at > $3`, org, idem.Key, now.Add(-invoice.IdempotencyWindow))
	switch {
	case err == nil && subtle.ConstantTimeCompare(made.Hash, idem.Hash) != 1:
		return refundHold{}, ErrKeyReused
	case err == nil:
		return refundHold{earlier: made.RefundID}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return refundHold{}, fmt.Errorf("payment: unable to read idempotency key: %w", err)
	}
	var p pendingRefund
	err = tx.GetContext(ctx, &p, selectPendingRefund+` WHERE organization_id = $1 AND idempotency_key = $2`, org, idem.Key)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return refundHold{}, nil
	case err != nil:
		return refundHold{}, fmt.Errorf("payment: unable to read pending refund: %w", err)
	case subtle.ConstantTimeCompare(p.Hash, idem.Hash) != 1:
		return refundHold{}, ErrKeyReused
	case p.LastError == nil && p.CreatedAt.After(now.Add(-PayTimeout)):
		// Its request may still record it.
		return refundHold{wait: true}, nil
	}
	return refundHold{lost: &p}, nil
}

// lockSale locks the invoice of an approved sale of the organization, then
// the sale. Sales are locked FOR NO KEY UPDATE: enough to keep their
// amountRefunded, and rows that reference them (pending refunds, refunds)
// may still be written by others meanwhile.
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

// lockRefundKey holds the organization's Idempotency-Key until tx ends:
// what its requests find (a refund made with it, or one under way) is
// read, and changed, one transaction at a time, on every instance. Taken
// before the sale's row locks.
func lockRefundKey(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, key string) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "refund-key/"+org.String()+"/"+key); err != nil {
		return fmt.Errorf("payment: unable to lock idempotency key: %w", err)
	}
	return nil
}

// recordRefund writes the processor's answer to a pending refund, inside
// tx, under the key's lock (lockRefundKey) and the sale's and its
// invoice's row locks: the refund's card payment, and when approved, what
// it adds to the sale's and the invoice's amountRefunded, and its
// Idempotency-Key when it came with one. It is recorded once: a second
// call for the same refund changes nothing.
func (s *Service) recordRefund(ctx context.Context, tx *sqlx.Tx, p *pendingRefund, res processor.RefundResult) error {
	if p.Key != nil {
		if err := lockRefundKey(ctx, tx, p.OrganizationID, *p.Key); err != nil {
			return err
		}
	}
	sale, locked, err := lockSale(ctx, tx, p.OrganizationID, p.SaleID)
	if err != nil {
		return err
	}
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
	stored, inserted, err := insertRefundOnce(ctx, tx, refund)
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
		// A key older than the window, not deleted yet, is taken over.
		if _, err := tx.ExecContext(ctx, `INSERT INTO refund_idempotency_keys (organization_id, key, request_hash, refund_id, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (organization_id, key) DO UPDATE
				SET request_hash = excluded.request_hash, refund_id = excluded.refund_id, created_at = excluded.created_at
				WHERE refund_idempotency_keys.created_at <= $6`,
			p.OrganizationID, *p.Key, p.Hash, p.RefundID, p.CreatedAt, p.CreatedAt.Add(-invoice.IdempotencyWindow)); err != nil {
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
	_, err = event.Append(ctx, tx, p.OrganizationID, typ, stored.Wire(), s.Now())
	return err
}

// insertRefundOnce writes a refund's card payment unless it is there, and
// returns it as stored.
func insertRefundOnce(ctx context.Context, tx *sqlx.Tx, refund CardPayment) (CardPayment, bool, error) {
	var exists bool
	if err := tx.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM card_payments WHERE id = $1)`, refund.ID); err != nil {
		return CardPayment{}, false, fmt.Errorf("payment: unable to read card payment: %w", err)
	}
	if exists {
		return CardPayment{}, false, nil
	}
	stored, err := insertCardPayment(ctx, tx, refund)
	return stored, err == nil, err
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
	LastError      *string     `db:"last_error"`
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

// writePendingRefund commits, with the reservation, the trace of a refund
// under way.
func writePendingRefund(ctx context.Context, tx *sqlx.Tx, p *pendingRefund) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO pending_refunds (refund_id, organization_id, sale_id, amount, whole, reason,
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
	created_by_name, idempotency_key, request_hash, created_at, settle_after, attempts, last_error FROM pending_refunds`

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
		return s.recordRefund(ctx, tx, p, res)
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
			p.created_by_name, p.idempotency_key, p.request_hash, p.created_at, p.settle_after, p.attempts, p.last_error`,
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
