package postgres_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

// A database where two organizations hold one MID is not migrated to one
// MID per organization behind the operator's back: the migration stops,
// naming the MID and both organizations, and nothing changes.
func TestMigrationRefusesAMIDInTwoOrganizations(t *testing.T) {
	db := open(t, pgtest.NewEmptyDatabase(t))
	migrateBefore(t, db, "00010")
	var orgs []string
	for range 2 {
		org, loc := uuid.New(), uuid.New()
		orgs = append(orgs, org.String())
		for _, stmt := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Co', 'merchant')`, []any{org}},
			{`INSERT INTO locations (id, organization_id, name, time_zone, status, address_line1, city, state, postal_code)
				VALUES ($1, $2, 'Shop', 'America/Chicago', 'active', '1 Main St', 'Springfield', 'IL', '62701')`, []any{loc, org}},
			{`INSERT INTO merchant_accounts (id, organization_id, location_id, mid) VALUES ($1, $2, $3, '496160873888')`, []any{uuid.New(), org, loc}},
		} {
			if _, err := db.Exec(stmt.sql, stmt.args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	err := postgres.Migrate(t.Context(), db.DB)
	if err == nil || !strings.Contains(err.Error(), "MID 496160873888 is held by organizations") ||
		!strings.Contains(err.Error(), orgs[0]) || !strings.Contains(err.Error(), orgs[1]) {
		t.Fatalf("migrate: %v, want a refusal naming the MID and both organizations", err)
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM merchant_accounts WHERE mid = '496160873888'`); err != nil || n != 2 {
		t.Errorf("%d rows hold the MID after the refusal (%v), want the 2 there were", n, err)
	}
}
