package postgres_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

// Resellers made before sign-up pages get a slug from their name on
// upgrade, unique, so that every reseller has its page; merchants get none.
func TestMigrationGivesEveryResellerASlug(t *testing.T) {
	db := open(t, pgtest.NewEmptyDatabase(t))
	migrateBefore(t, db, "00030")
	orgs := []struct {
		name, kind string
		want       *string
	}{
		{"Northwind Partners", "reseller", ptr("northwind-partners")},
		{"NORTHWIND — partners!", "reseller", ptr("northwind-partners-2")},
		{"Ω", "reseller", ptr("reseller")},
		{"A very long reseller name that goes on and on and on", "reseller", ptr("a-very-long-reseller-name-that-goes")},
		{"Northwind Partners", "merchant", nil},
	}
	ids := make([]uuid.UUID, len(orgs))
	for i, o := range orgs {
		ids[i] = uuid.New()
		// One after the other, as made: the older keeps the plain slug.
		if _, err := db.Exec(`INSERT INTO organizations (id, name, kind, created_at) VALUES ($1, $2, $3, now() + $4 * interval '1 second')`,
			ids[i], o.name, o.kind, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.Migrate(t.Context(), db.DB); err != nil {
		t.Fatal(err)
	}
	for i, o := range orgs {
		var slug *string
		if err := db.Get(&slug, `SELECT slug FROM organizations WHERE id = $1`, ids[i]); err != nil {
			t.Fatal(err)
		}
		switch {
		case o.want == nil && slug != nil:
			t.Errorf("%s %q got the slug %q, want none", o.kind, o.name, *slug)
		case o.want != nil && (slug == nil || *slug != *o.want):
			t.Errorf("%s %q got the slug %v, want %s", o.kind, o.name, slug, *o.want)
		}
	}
	if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, 'No Slug', 'reseller')`, uuid.New()); err == nil {
		t.Error("a reseller without a slug was stored")
	}
}

func ptr(s string) *string { return &s }
