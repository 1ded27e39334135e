package payment

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/postgres"
)

// The pay page's limits, counted in the database so that they hold across
// every instance: POSTs with a valid form token per pay link (against card
// testing), and POSTs per client address across every pay page (against
// one address trying many links).
const (
	LinkLimit    = 10
	AddressLimit = 60
	LimitWindow  = time.Hour
)

// AttemptOnLink counts a pay attempt on an invoice's link; see attempt.
func (s *Store) AttemptOnLink(ctx context.Context, invoiceID uuid.UUID) (time.Duration, error) {
	return s.attempt(ctx, "link:"+invoiceID.String(), LinkLimit)
}

// AttemptFrom counts a pay page POST from a client address; see attempt.
func (s *Store) AttemptFrom(ctx context.Context, address string) (time.Duration, error) {
	return s.attempt(ctx, "address:"+address, AddressLimit)
}

// attempt counts one attempt of subject. When subject has had limit
// attempts within the last LimitWindow it counts nothing and answers how
// long until the oldest of them leaves the window (at least a second); 0
// means the attempt is allowed.
func (s *Store) attempt(ctx context.Context, subject string, limit int) (wait time.Duration, err error) {
	// The database keeps microseconds; so does the arithmetic here.
	now := s.Now().Truncate(time.Microsecond)
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		// Serialises the count-then-insert of one subject across instances.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "pay-limits/"+subject); err != nil {
			return fmt.Errorf("payment: unable to lock pay limit: %w", err)
		}
		var recent []time.Time
		err := tx.SelectContext(ctx, &recent, `SELECT attempted_at FROM pay_limits
			WHERE subject = $1 AND attempted_at > $2 ORDER BY attempted_at DESC LIMIT $3`,
			subject, now.Add(-LimitWindow), limit)
		if err != nil {
			return fmt.Errorf("payment: unable to count pay attempts: %w", err)
		}
		if len(recent) >= limit {
			// The oldest of the last limit attempts frees a place when it expires.
			wait = max(recent[limit-1].Add(LimitWindow).Sub(now), time.Second)
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO pay_limits (subject, attempted_at) VALUES ($1, $2)`, subject, now); err != nil {
			return fmt.Errorf("payment: unable to count pay attempt: %w", err)
		}
		return nil
	})
	return wait, err
}

// DeleteOldAttempts forgets attempts that no longer count, and the answers
// of pay forms posted more than a day ago.
func (s *Store) DeleteOldAttempts(ctx context.Context) error {
	if _, err := s.DB.ExecContext(ctx, `DELETE FROM pay_limits WHERE attempted_at < $1`, s.Now().Add(-LimitWindow)); err != nil {
		return fmt.Errorf("payment: unable to delete old pay attempts: %w", err)
	}
	if _, err := s.DB.ExecContext(ctx, `DELETE FROM pay_submissions WHERE created_at < $1`, s.Now().Add(-SubmissionWindow)); err != nil {
		return fmt.Errorf("payment: unable to delete old pay submissions: %w", err)
	}
	return nil
}
