package postgres_test

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

// Invoices made before pay tokens were enciphered keep their links: the
// migration keeps the SHA-256 of each token, and the token itself is gone.
func TestMigrationKeepsOldPayLinksByTheirDigest(t *testing.T) {
	db := open(t, pgtest.NewEmptyDatabase(t))
	migrateBefore(t, db, "00005")
	org, loc, mid, inv := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	const token = "k3J9x-old-random-token_0123456789abcdefABCD"
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Old Co', 'merchant')`, []any{org}},
		{`INSERT INTO locations (id, organization_id, name, time_zone, status, address_line1, city, state, postal_code)
			VALUES ($1, $2, 'Shop', 'America/Chicago', 'active', '1 Main St', 'Springfield', 'IL', '62701')`, []any{loc, org}},
		{`INSERT INTO merchant_accounts (id, organization_id, location_id, mid) VALUES ($1, $2, $3, '496160873888')`, []any{mid, org, loc}},
		{`INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, amount, customer_email,
				delivery, status, created_at, created_by_name, pay_token)
			VALUES ($1, $2, $3, 'OLD-1', 10, 'dana@example.com', 'email', 'open', now(), 'key', $4)`, []any{inv, org, mid, token}},
	} {
		if _, err := db.Exec(stmt.sql, stmt.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.Migrate(t.Context(), db.DB); err != nil {
		t.Fatal(err)
	}
	var digest []byte
	if err := db.Get(&digest, `SELECT legacy_pay_token_digest FROM invoices WHERE id = $1`, inv); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte(token))
	if !bytes.Equal(digest, want[:]) {
		t.Errorf("digest %x, want the SHA-256 of the old token %x", digest, want)
	}
	var columns int
	if err := db.Get(&columns, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'invoices' AND column_name = 'pay_token'`); err != nil {
		t.Fatal(err)
	}
	if columns != 0 {
		t.Error("the pay_token column is still there")
	}
}
