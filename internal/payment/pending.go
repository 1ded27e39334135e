package payment

import (
	"context"
	"fmt"
	"log/slog"
	"time"

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

// form is where a pay form stands, read under its invoice's row lock.
type form struct {
	answered bool // its first POST was answered: prior
	prior    Outcome
	underWay bool // its first POST is at the processor
}

// formState reads, in one statement under the invoice's row lock, the
// answer already given to the form attempt, and whether it is under way.
// A charge is under way while its Pay may still record it: its Pay has not
// given up on the outcome (last_error), and is not older than PayTimeout.
// Any other pending charge is only ever voided.
func formState(ctx context.Context, tx *sqlx.Tx, invoiceID, attempt uuid.UUID, now time.Time) (form, error) {
	var row struct {
		UnderWay      bool       `db:"under_way"`
		Answered      bool       `db:"answered"`
		PaymentID     *uuid.UUID `db:"payment_id"`
		DeclineReason *string    `db:"decline_reason"`
	}
	err := tx.GetContext(ctx, &row, `SELECT u.under_way, s.attempt_id IS NOT NULL AS answered, s.payment_id, s.decline_reason
		FROM (SELECT coalesce(bool_or(attempt_id = $2), false) AS under_way
			FROM pending_charges WHERE invoice_id = $1 AND last_error IS NULL AND created_at > $3) u
		LEFT JOIN pay_submissions s ON s.attempt_id = $2 AND s.invoice_id = $1`,
		invoiceID, attempt, now.Add(-PayTimeout))
	if err != nil {
		return form{}, fmt.Errorf("payment: unable to read the pay form: %w", err)
	}
	return form{answered: row.Answered, underWay: row.UnderWay, prior: outcomeOf(row.PaymentID, row.DeclineReason)}, nil
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
	err := s.claimDue(ctx, &due, "pending_charges", "order_id", "void_after", "p.order_id, p.mid, p.attempts", now)
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

// claimDue claims up to settleBatch rows of table (pending charges or
// refunds, by their key) whose due column has come at now, and reads
// returning of each into dest. They are claimed like outbox messages: each
// one's next try is scheduled, after a wait that doubles with its attempts
// (settleBackoff up to settleBackoffUp), before this one is made, so that
// a crash only delays it and instances side by side take different rows.
func (s *Store) claimDue(ctx context.Context, dest any, table, key, due, returning string, now time.Time) error {
	return s.DB.SelectContext(ctx, dest, fmt.Sprintf(`WITH due AS (
			SELECT %[2]s FROM %[1]s WHERE %[3]s <= $1
			ORDER BY %[3]s LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE %[1]s p SET attempts = p.attempts + 1,
			%[3]s = $1 + least($4::interval, $3::interval * power(2, least(p.attempts, 20)))
		FROM due WHERE p.%[2]s = due.%[2]s
		RETURNING %[4]s`, table, key, due, returning),
		now, settleBatch, settleBackoff.String(), settleBackoffUp.String())
}

// RunSettlement runs SettlePending, SettlePendingRefunds and ChargeDue
// (the automatic charges that fell due) every interval until ctx ends.
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
		asked, errs := s.ChargeDue(ctx)
		for _, err := range errs {
			if ctx.Err() == nil {
				log.Error("payment: automatic charges", "error", err.Error())
			}
		}
		if asked > 0 {
			log.Info("payment: automatic charges asked", "asked", asked)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
