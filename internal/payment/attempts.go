package payment

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/postgres"
)

// Attempts per pay link: at most AttemptLimit in any AttemptWindow, counted
// in the database so the limit holds across every instance.
const (
	AttemptLimit  = 10
	AttemptWindow = time.Hour
)

// Attempt counts one pay attempt on the invoice's link. When the link has
// had AttemptLimit attempts within the last AttemptWindow it counts nothing
// and answers how long until the oldest of them leaves the window (at
// least a second); 0 means the attempt is allowed.
func (s *Service) Attempt(ctx context.Context, invoiceID uuid.UUID) (wait time.Duration, err error) {
	// The database keeps microseconds; so does the arithmetic here.
	now := s.Now().Truncate(time.Microsecond)
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		// Serialises the count-then-insert of one link across instances.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "pay-attempts/"+invoiceID.String()); err != nil {
			return fmt.Errorf("payment: unable to lock pay attempts: %w", err)
		}
		var recent []time.Time
		err := tx.SelectContext(ctx, &recent, `SELECT attempted_at FROM pay_attempts
			WHERE invoice_id = $1 AND attempted_at > $2 ORDER BY attempted_at DESC LIMIT $3`,
			invoiceID, now.Add(-AttemptWindow), AttemptLimit)
		if err != nil {
			return fmt.Errorf("payment: unable to count pay attempts: %w", err)
		}
		if len(recent) >= AttemptLimit {
			// The oldest of the last AttemptLimit attempts frees a place when it expires.
			wait = max(recent[AttemptLimit-1].Add(AttemptWindow).Sub(now), time.Second)
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO pay_attempts (invoice_id, attempted_at) VALUES ($1, $2)`, invoiceID, now); err != nil {
			return fmt.Errorf("payment: unable to count pay attempt: %w", err)
		}
		return nil
	})
	return wait, err
}

// DeleteOldAttempts forgets attempts that no longer count.
func (s *Service) DeleteOldAttempts(ctx context.Context) error {
	_, err := s.DB.ExecContext(ctx, `DELETE FROM pay_attempts WHERE attempted_at < $1`, s.Now().Add(-AttemptWindow))
	if err != nil {
		return fmt.Errorf("payment: unable to delete old pay attempts: %w", err)
	}
	return nil
}
