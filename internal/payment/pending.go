package payment

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/invoice"
)

// A pending charge is the durable trace of a charge under way: written
// before the processor is asked, deleted with the outcome. What is left
// behind is voided by SettlePending.

// A pending charge older than pendingMaxAge may be voided without racing
// its own Pay: no payment is recorded later than PayTimeout after its
// pending charge was written.
const (
	pendingMaxAge   = PayTimeout + 2*time.Minute
	settleBatch     = 20
	settleBackoff   = 5 * time.Second
	settleBackoffUp = 10 * time.Minute
)

func (s *Service) writePending(ctx context.Context, orderID uuid.UUID, inv invoice.Invoice, amount apd.Decimal) error {
	now := s.Now()
	_, err := s.DB.ExecContext(ctx, `INSERT INTO pending_charges (order_id, invoice_id, mid, amount, created_at, void_after)
		VALUES ($1, $2, $3, $4, $5, $6)`, orderID, inv.ID, inv.MID, amount.Text('f'), now, now.Add(pendingMaxAge))
	if err != nil {
		return fmt.Errorf("payment: unable to record pending charge: %w", err)
	}
	return nil
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
func (s *Service) forgetPending(ctx context.Context, orderID uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.DB.ExecContext(ctx, `DELETE FROM pending_charges WHERE order_id = $1`, orderID)
}

// voidPendingNow makes a pending charge due for voiding at once: its Pay is
// over, so nothing can record it any more.
func (s *Service) voidPendingNow(ctx context.Context, orderID uuid.UUID, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.DB.ExecContext(ctx, `UPDATE pending_charges SET void_after = $2, last_error = $3 WHERE order_id = $1`,
		orderID, s.Now(), truncate(cause.Error(), 1000))
}

// SettlePending voids, at the processor, the due pending charges: charges
// whose outcome was never recorded. A void that fails is tried again after
// a growing wait, for as long as it takes; each failure is logged as an
// error, since a customer may be charged meanwhile. Several instances may
// run it at once.
func (s *Service) SettlePending(ctx context.Context, log *slog.Logger) error {
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
				c.OrderID, truncate(err.Error(), 1000))
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
func (s *Service) RunSettlement(ctx context.Context, interval time.Duration, log *slog.Logger) {
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
