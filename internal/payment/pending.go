package payment

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/clip"
)

// A pending charge is the durable trace of a charge under way: written
// under the invoice's row lock before the processor is asked, deleted with
// the outcome. Until then it holds its amount of the invoice's balance, as
// long as its Pay may still record it. What is left behind is voided by
// SettlePending.

// A pending charge older than pendingMaxAge may be voided without racing
// its own Pay: no payment is recorded later than PayTimeout after its
// pending charge was written.
const (
	pendingMaxAge   = PayTimeout + 2*time.Minute
	settleBatch     = 20
	settleBackoff   = 5 * time.Second
	settleBackoffUp = 10 * time.Minute
)

// writePending commits, with the reservation, the trace of the charge
// orderID of r toward the invoice.
func writePending(ctx context.Context, tx *sqlx.Tx, orderID, invoiceID uuid.UUID, mid string, r Request, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO pending_charges (order_id, invoice_id, mid, amount, attempt_id, created_at, void_after)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, orderID, invoiceID, mid, r.Amount.Text('f'), r.AttemptID, now, now.Add(pendingMaxAge))
	if err != nil {
		return fmt.Errorf("payment: unable to record pending charge: %w", err)
	}
	return nil
}

// chargesUnderWay is what the invoice's charges under way hold of its
// balance, read under its row lock, and whether the form attempt is one
// of them. A charge is under way while its Pay may still record it: its
// Pay has not given up on the outcome (last_error), and is not older than
// PayTimeout. Any other pending charge is only ever voided.
func chargesUnderWay(ctx context.Context, tx *sqlx.Tx, invoiceID, attempt uuid.UUID, now time.Time) (held apd.Decimal, form bool, err error) {
	var row struct {
		Held string `db:"held"`
		Form bool   `db:"form"`
	}
	err = tx.GetContext(ctx, &row, `SELECT coalesce(sum(amount), 0)::numeric(11, 2)::text AS held,
			coalesce(bool_or(attempt_id = $2), false) AS form
		FROM pending_charges WHERE invoice_id = $1 AND last_error IS NULL AND created_at > $3`,
		invoiceID, attempt, now.Add(-PayTimeout))
	if err != nil {
		return apd.Decimal{}, false, fmt.Errorf("payment: unable to read the charges under way: %w", err)
	}
	if _, _, err := held.SetString(row.Held); err != nil {
		return apd.Decimal{}, false, fmt.Errorf("payment: charges under way %q: %w", row.Held, err)
	}
	return held, row.Form, nil
}

// underWayPoll is how often a request that waits for another one under
// way (the same pay form, the same refund Idempotency-Key) looks again.
const underWayPoll = 100 * time.Millisecond

// pause waits underWayPoll, or until ctx ends.
func pause(ctx context.Context) error {
	t := time.NewTimer(underWayPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// deletePending forgets a pending charge whose outcome is settled, inside
// the transaction that records it.
func deletePending(ctx context.Context, tx *sqlx.Tx, orderID uuid.UUID) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM pending_charges WHERE order_id = $1`, orderID); err != nil {
		return fmt.Errorf("payment: unable to settle pending charge: %w", err)
	}
	return nil
}

// forgetPending forgets a pending charge that was never made, or voided.
// If that fails the row stays, and is voided again later: harmless.
func (s *Store) forgetPending(ctx context.Context, orderID uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.DB.ExecContext(ctx, `DELETE FROM pending_charges WHERE order_id = $1`, orderID)
}

// voidPendingNow makes a pending charge due for voiding at once: its Pay is
// over, so nothing can record it any more.
func (s *Store) voidPendingNow(ctx context.Context, orderID uuid.UUID, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.DB.ExecContext(ctx, `UPDATE pending_charges SET void_after = $2, last_error = $3 WHERE order_id = $1`,
		orderID, s.Now(), clip.To(cause.Error(), 1000))
}

// SettlePending voids, at the processor, the due pending charges: charges
// whose outcome was never recorded. A void that fails is tried again after
// a growing wait, for as long as it takes; each failure is logged as an
// error, since a customer may be charged meanwhile. Several instances may
// run it at once.
func (s *Store) SettlePending(ctx context.Context, log *slog.Logger) error {
	now := s.Now()
	var due []struct {
		OrderID  uuid.UUID `db:"order_id"`
		MID      string    `db:"mid"`
		Attempts int       `db:"attempts"`
	}
	// Claimed like outbox messages: the next try is scheduled before this
	// one is made, so a crash only delays it.
	err := s.DB.SelectContext(ctx, &due, `WITH due AS (
			SELECT order_id FROM pending_charges WHERE void_after <= $1
			ORDER BY void_after LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE pending_charges p SET attempts = p.attempts + 1,
			void_after = $1 + least($4::interval, $3::interval * power(2, least(p.attempts, 20)))
		FROM due WHERE p.order_id = due.order_id
		RETURNING p.order_id, p.mid, p.attempts`,
		now, settleBatch, settleBackoff.String(), settleBackoffUp.String())
	if err != nil {
		return fmt.Errorf("payment: unable to claim pending charges: %w", err)
	}
	for _, c := range due {
		if err := s.Processor.Void(ctx, c.MID, c.OrderID.String()); err != nil {
			log.Error("payment: pending charge not voided yet; the card may be charged without a payment",
				"order_id", c.OrderID.String(), "attempt", c.Attempts, "error", err.Error())
			_, _ = s.DB.ExecContext(ctx, `UPDATE pending_charges SET last_error = $2 WHERE order_id = $1`,
				c.OrderID, clip.To(err.Error(), 1000))
			continue
		}
		if _, err := s.DB.ExecContext(ctx, `DELETE FROM pending_charges WHERE order_id = $1`, c.OrderID); err != nil {
			return fmt.Errorf("payment: unable to settle pending charge: %w", err)
		}
		log.Warn("payment: pending charge voided", "order_id", c.OrderID.String(), "attempt", c.Attempts)
	}
	return nil
}

// RunSettlement runs SettlePending and SettlePendingRefunds every interval
// until ctx ends.
func (s *Store) RunSettlement(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.SettlePending(ctx, log); err != nil && ctx.Err() == nil {
			log.Error("payment: settle pending charges", "error", err.Error())
		}
		if err := s.SettlePendingRefunds(ctx, log); err != nil && ctx.Err() == nil {
			log.Error("payment: settle pending refunds", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
