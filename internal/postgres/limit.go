package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Limit is a count of attempts per subject (a pay link, a client address)
// in a sliding window, kept in a table of (subject, attempted_at) so that
// it holds across every instance.
type Limit struct {
	// Table is the table of the attempts: a name of the code's own, never
	// one from a request.
	Table  string
	Max    int
	Window time.Duration
}

// Attempt counts one attempt of subject at now. When subject has had Max
// attempts within the last Window it counts nothing and answers how long
// until the oldest of them leaves the window (at least a second); 0 means
// the attempt is allowed.
func (l Limit) Attempt(ctx context.Context, db *sqlx.DB, subject string, now time.Time) (wait time.Duration, err error) {
	now = now.Truncate(time.Microsecond) // as stored, so that the arithmetic agrees
	err = InTx(ctx, db, func(tx *sqlx.Tx) error {
		// Serialises the count-then-insert of one subject across instances.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, l.Table+"/"+subject); err != nil {
			return fmt.Errorf("postgres: unable to lock the limit of %s: %w", l.Table, err)
		}
		var recent []time.Time
		err := tx.SelectContext(ctx, &recent, `SELECT attempted_at FROM `+l.Table+`
			WHERE subject = $1 AND attempted_at > $2 ORDER BY attempted_at DESC LIMIT $3`,
			subject, now.Add(-l.Window), l.Max)
		if err != nil {
			return fmt.Errorf("postgres: unable to count attempts in %s: %w", l.Table, err)
		}
		if len(recent) >= l.Max {
			// The oldest of the last Max attempts frees a place when it expires.
			wait = max(recent[l.Max-1].Add(l.Window).Sub(now), time.Second)
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+l.Table+` (subject, attempted_at) VALUES ($1, $2)`, subject, now); err != nil {
			return fmt.Errorf("postgres: unable to count an attempt in %s: %w", l.Table, err)
		}
		return nil
	})
	return wait, err
}
