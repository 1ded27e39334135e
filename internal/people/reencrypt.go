package people

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/vault"
)

// reencryptBatch is how many people one transaction re-seals.
const reencryptBatch = 100

// Reencrypt re-seals, under the key current, every TOTP secret (set up or
// pending) sealed under another key, a batch of rows per transaction (rows
// locked, others' skipped and taken in a later call), and returns how many
// it re-sealed. Signing in goes on meanwhile: a secret is opened with the
// key its row names.
func (s *Store) Reencrypt(ctx context.Context, current string) (int, error) {
	n, err := postgres.InBatches(ctx, s.DB, func(tx *sqlx.Tx) (int, error) {
		var rows []struct {
			ID         uuid.UUID `db:"id"`
			Secret     []byte    `db:"totp_secret"`
			SecretKey  *string   `db:"totp_key_id"`
			Pending    []byte    `db:"totp_pending"`
			PendingKey *string   `db:"totp_pending_key_id"`
		}
		if err := tx.SelectContext(ctx, &rows, `SELECT id, totp_secret, totp_key_id, totp_pending, totp_pending_key_id
			FROM people WHERE totp_key_id <> $1 OR totp_pending_key_id <> $1
			LIMIT $2 FOR UPDATE SKIP LOCKED`, current, reencryptBatch); err != nil {
			return 0, err
		}
		n := 0
		for _, r := range rows {
			for _, v := range []struct {
				sealed        []byte
				key           *string
				what, columns string
			}{
				{r.Secret, r.SecretKey, "secret", "totp_secret = $2, totp_key_id = $3"},
				{r.Pending, r.PendingKey, "pending", "totp_pending = $2, totp_pending_key_id = $3"},
			} {
				if v.key == nil || *v.key == current {
					continue
				}
				sealed, key, err := vault.Reseal(s.Vault, v.sealed, *v.key, totpAAD(r.ID, v.what))
				if err != nil {
					return 0, fmt.Errorf("person %s TOTP %s: %w", r.ID, v.what, err)
				}
				if _, err := tx.ExecContext(ctx, `UPDATE people SET `+v.columns+` WHERE id = $1`, r.ID, sealed, key); err != nil {
					return 0, err
				}
				n++
			}
		}
		return n, nil
	})
	if err != nil {
		return n, fmt.Errorf("people: unable to re-seal TOTP secrets: %w", err)
	}
	return n, nil
}
