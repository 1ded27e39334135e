package reseller

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/vault"
)

// reencryptBatch is how many rows one transaction re-seals.
const reencryptBatch = 100

// Reencrypt re-seals, under the vault's current key, every tax id, SSN and
// account number sealed under another one, a batch of rows per
// transaction (rows locked, others' skipped and taken in a later batch),
// and returns how many values it re-sealed. Run again, it finds nothing;
// serving goes on meanwhile (a value is read with the key its row names).
func (a *Store) Reencrypt(ctx context.Context) (int, error) {
	current := a.Vault.Current()
	n, err := postgres.InBatches(ctx, a.DB, func(tx *sqlx.Tx) (int, error) {
		var apps []struct {
			ID         uuid.UUID `db:"id"`
			TaxID      []byte    `db:"tax_id_encrypted"`
			TaxKey     string    `db:"tax_id_key_id"`
			Account    []byte    `db:"account_encrypted"`
			AccountKey string    `db:"account_key_id"`
		}
		if err := tx.SelectContext(ctx, &apps, `SELECT id, tax_id_encrypted, tax_id_key_id, account_encrypted, account_key_id
			FROM applications WHERE tax_id_key_id <> $1 OR account_key_id <> $1
			LIMIT $2 FOR UPDATE SKIP LOCKED`, current, reencryptBatch); err != nil {
			return 0, err
		}
		n := 0
		for _, r := range apps {
			for _, v := range []struct {
				sealed    []byte
				key, what string
				columns   string
			}{
				{r.TaxID, r.TaxKey, "tax_id", "tax_id_encrypted = $2, tax_id_key_id = $3"},
				{r.Account, r.AccountKey, "account", "account_encrypted = $2, account_key_id = $3"},
			} {
				if v.key == current {
					continue
				}
				sealed, key, err := vault.Reseal(a.Vault, v.sealed, v.key, fmt.Sprintf("application:%s:%s", r.ID, v.what))
				if err != nil {
					return 0, fmt.Errorf("application %s %s: %w", r.ID, v.what, err)
				}
				if _, err := tx.ExecContext(ctx, `UPDATE applications SET `+v.columns+` WHERE id = $1`, r.ID, sealed, key); err != nil {
					return 0, err
				}
				n++
			}
		}
		var owners []struct {
			ID       uuid.UUID `db:"application_id"`
			Position int       `db:"position"`
			SSN      []byte    `db:"ssn_encrypted"`
			Key      string    `db:"ssn_key_id"`
		}
		if err := tx.SelectContext(ctx, &owners, `SELECT application_id, position, ssn_encrypted, ssn_key_id
			FROM application_owners WHERE ssn_key_id <> $1 LIMIT $2 FOR UPDATE SKIP LOCKED`, current, reencryptBatch); err != nil {
			return 0, err
		}
		for _, o := range owners {
			sealed, key, err := vault.Reseal(a.Vault, o.SSN, o.Key, fmt.Sprintf("application:%s:owner:%d:ssn", o.ID, o.Position))
			if err != nil {
				return 0, fmt.Errorf("application %s owner %d: %w", o.ID, o.Position, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE application_owners SET ssn_encrypted = $3, ssn_key_id = $4
				WHERE application_id = $1 AND position = $2`, o.ID, o.Position, sealed, key); err != nil {
				return 0, err
			}
			n++
		}
		return n, nil
	})
	if err != nil {
		return n, fmt.Errorf("reseller: re-encrypt: %w", err)
	}
	return n, nil
}
