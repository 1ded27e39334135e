package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/postgres"
)

// sealedColumns are where the vault's values are stored, each beside the
// column naming its key: the applications' (package reseller), the webhook
// endpoints' (package webhook), the people's second factors (package
// people) and the notices not yet delivered (package delivery), each
// package re-sealing its own.
var sealedColumns = []struct{ kind, table, keyColumn string }{
	{"tax ids", "applications", "tax_id_key_id"},
	{"account numbers", "applications", "account_key_id"},
	{"SSNs", "application_owners", "ssn_key_id"},
	{"webhook secrets", "webhook_endpoints", "secret_key_id"},
	{"webhook secrets", "webhook_endpoints", "previous_key_id"},
	{"TOTP secrets", "people", "totp_key_id"},
	{"TOTP secrets", "people", "totp_pending_key_id"},
	{"notices", "outbox", "notice_key_id"},
}

// Remaining is how many values of a kind are still sealed under an older key.
type Remaining struct {
	Kind  string // "tax ids", "account numbers", "SSNs", "webhook secrets", "TOTP secrets", "notices"
	Key   string
	Count int
}

// RemainError: values still sealed under older keys when Reencrypt gave
// up waiting for the rows other transactions held. The older keys must
// stay in the key file.
type RemainError struct {
	Resealed  int
	Remaining []Remaining
}

func (e *RemainError) Error() string {
	n := 0
	for _, r := range e.Remaining {
		n += r.Count
	}
	var b strings.Builder
	fmt.Fprintf(&b, "re-sealed %d values, but %d remain under older keys, in rows other transactions held past the lock timeout:", e.Resealed, n)
	for i, r := range e.Remaining {
		switch {
		case i == 0:
			fmt.Fprintf(&b, " under key %s ", r.Key)
		case r.Key != e.Remaining[i-1].Key:
			fmt.Fprintf(&b, "; under key %s ", r.Key)
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", r.Kind, r.Count)
	}
	return b.String()
}

// Reencrypt re-seals, under the vault's current key, every value sealed
// under another one, and returns how many it re-sealed. The stores'
// batches skip rows other transactions hold; Reencrypt then waits for
// those, up to lockTimeout in all, and goes again. Values still under an
// older key then are a *RemainError: success is never reported while the
// older key is still needed.
func (a *App) Reencrypt(ctx context.Context, lockTimeout time.Duration) (int, error) {
	current := a.Vault.Current()
	deadline := time.Now().Add(lockTimeout)
	total := 0
	for {
		apps, err := a.Resellers.Reencrypt(ctx)
		total += apps
		if err != nil {
			return total, err
		}
		hooks, err := a.Webhooks.Reencrypt(ctx, current)
		total += hooks
		if err != nil {
			return total, err
		}
		totp, err := a.People.Reencrypt(ctx, current)
		total += totp
		if err != nil {
			return total, err
		}
		notices, err := delivery.ReencryptNotices(ctx, a.DB, a.Vault, current)
		total += notices
		if err != nil {
			return total, err
		}
		remaining, err := a.sealedUnderOlderKeys(ctx, current)
		if err != nil || len(remaining) == 0 {
			return total, err
		}
		if !time.Now().Before(deadline) {
			return total, &RemainError{Resealed: total, Remaining: remaining}
		}
		if err := a.waitForLockedRows(ctx, current, deadline); err != nil {
			return total, err
		}
	}
}

// sealedUnderOlderKeys counts the values under another key than current,
// by key, then kind.
func (a *App) sealedUnderOlderKeys(ctx context.Context, current string) ([]Remaining, error) {
	var out []Remaining
	for _, c := range sealedColumns {
		var rows []struct {
			Key   string `db:"key"`
			Count int    `db:"count"`
		}
		if err := a.DB.SelectContext(ctx, &rows, `SELECT `+c.keyColumn+` AS key, count(*) AS count FROM `+c.table+`
			WHERE `+c.keyColumn+` <> $1 GROUP BY 1`, current); err != nil {
			return nil, fmt.Errorf("app: unable to count %s under older keys: %w", c.kind, err)
		}
		for _, r := range rows {
			out = append(out, Remaining{Kind: c.kind, Key: r.Key, Count: r.Count})
		}
	}
	// By key, kinds in sealedColumns' order, a webhook's two secrets as one kind.
	slices.SortStableFunc(out, func(x, y Remaining) int { return strings.Compare(x.Key, y.Key) })
	merged := out[:0]
	for _, r := range out {
		if last := len(merged) - 1; last >= 0 && merged[last].Key == r.Key && merged[last].Kind == r.Kind {
			merged[last].Count += r.Count
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// errLockWait: a row was still held when the lock timeout ran out.
var errLockWait = errors.New("lock wait ended")

// waitForLockedRows locks, and at once releases, every row holding a value
// under an older key: it returns when the transactions that held them have
// ended, or at the deadline.
func (a *App) waitForLockedRows(ctx context.Context, current string, deadline time.Time) error {
	err := postgres.InTx(ctx, a.DB, func(tx *sqlx.Tx) error {
		for _, c := range sealedColumns {
			wait := time.Until(deadline)
			if wait <= 0 {
				return errLockWait
			}
			// lock_timeout bounds each row's wait; the deadline all of them.
			if _, err := tx.ExecContext(ctx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", wait.Milliseconds()+1)); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `SELECT 1 FROM `+c.table+` WHERE `+c.keyColumn+` <> $1 FOR UPDATE`, current)
			var pqErr *pq.Error
			if errors.As(err, &pqErr) && pqErr.Code == "55P03" { // lock_not_available
				return errLockWait
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errLockWait) {
		return fmt.Errorf("app: unable to wait for rows held by other transactions: %w", err)
	}
	return nil
}
