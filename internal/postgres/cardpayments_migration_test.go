package postgres_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

// Sales recorded before card payments were listed become approved sales,
// on their invoice's MID, made when they were paid.
func TestMigrationMakesOldPaymentsCardPayments(t *testing.T) {
	db := open(t, pgtest.NewEmptyDatabase(t))
	migrateBefore(t, db, "00006")
	org, loc, mid, inv, pay := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	paidAt := time.Date(2025, 3, 18, 19, 45, 12, 0, time.UTC)
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Old Co', 'merchant')`, []any{org}},
		{`INSERT INTO locations (id, organization_id, name, time_zone, status, address_line1, city, state, postal_code)
			VALUES ($1, $2, 'Shop', 'America/Chicago', 'active', '1 Main St', 'Springfield', 'IL', '62701')`, []any{loc, org}},
		{`INSERT INTO merchant_accounts (id, organization_id, location_id, mid) VALUES ($1, $2, $3, '496160873888')`, []any{mid, org, loc}},
		{`INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, amount, amount_paid, customer_email,
				delivery, status, created_at, created_by_name)
			VALUES ($1, $2, $3, 'OLD-1', 10, 4, 'dana@example.com', 'email', 'part_paid', now(), 'key')`, []any{inv, org, mid}},
		{`INSERT INTO payments (id, organization_id, invoice_id, amount, ret_ref, card_brand, last_four, payer_name, paid_at, saved_card)
			VALUES ($1, $2, $3, 4, '343005123105', 'Visa', '1111', 'Dana', $4, true)`, []any{pay, org, inv, paidAt}},
	} {
		if _, err := db.Exec(stmt.sql, stmt.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.Migrate(t.Context(), db.DB); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Kind      string    `db:"kind"`
		Status    string    `db:"status"`
		MID       uuid.UUID `db:"merchant_account_id"`
		Amount    string    `db:"amount"`
		Refunded  string    `db:"amount_refunded"`
		RetRef    string    `db:"ret_ref"`
		CreatedAt time.Time `db:"created_at"`
		SavedCard bool      `db:"saved_card"`
	}
	if err := db.Get(&got, `SELECT kind, status, merchant_account_id, amount::text AS amount, amount_refunded::text AS amount_refunded,
			ret_ref, created_at, saved_card FROM card_payments WHERE id = $1`, pay); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]any{
		"kind": {got.Kind, "sale"}, "status": {got.Status, "approved"}, "merchant_account_id": {got.MID, mid},
		"amount": {got.Amount, "4.00"}, "amount_refunded": {got.Refunded, "0.00"}, "ret_ref": {got.RetRef, "343005123105"},
		"created_at": {got.CreatedAt.UTC(), paidAt}, "saved_card": {got.SavedCard, true},
	}
	for name, w := range want {
		if w[0] != w[1] {
			t.Errorf("%s = %v, want %v", name, w[0], w[1])
		}
	}
	var refunded string
	if err := db.Get(&refunded, `SELECT amount_refunded::text FROM invoices WHERE id = $1`, inv); err != nil || refunded != "0.00" {
		t.Errorf("invoice amount_refunded %q (%v), want 0.00", refunded, err)
	}
}
