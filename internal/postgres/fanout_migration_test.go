package postgres_test

import (
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

// Events not yet fanned out when the list of events to fan out replaced
// their dispatched_at are still fanned out after the upgrade; those
// already fanned out are not fanned out again.
func TestMigrationKeepsEventsToFanOut(t *testing.T) {
	db := open(t, pgtest.NewEmptyDatabase(t))
	migrateBefore(t, db, "00040")
	org := uuid.New()
	if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Old Co', 'merchant')`, org); err != nil {
		t.Fatal(err)
	}
	waiting, sent := []uuid.UUID{uuid.New(), uuid.New()}, uuid.New()
	for _, e := range []struct {
		id         uuid.UUID
		dispatched bool
	}{{waiting[0], false}, {sent, true}, {waiting[1], false}} {
		if _, err := db.Exec(`INSERT INTO events (id, organization_id, type, data, created_at, dispatched_at)
			VALUES ($1, $2, 'invoice.paid', '{}', now(), CASE WHEN $3 THEN now() END)`, e.id, org, e.dispatched); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.Migrate(t.Context(), db.DB); err != nil {
		t.Fatal(err)
	}
	var got []uuid.UUID
	if err := db.Select(&got, `SELECT event_id FROM events_to_fan_out`); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	slices.SortFunc(waiting, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	if !slices.Equal(got, waiting) {
		t.Errorf("events to fan out after the upgrade: %v, want the two not dispatched %v (not %s)", got, waiting, sent)
	}
}
