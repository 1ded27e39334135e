package invoice

import (
	"context"
	"testing"
)

// The number suggested for the next invoice follows the newest invoice's
// prefix: the highest trailing number of that prefix's invoices (by value,
// whatever their padding), plus one, zero-padded alike; INV-0001 without
// invoices or after a number ending in no digit; another organization's
// invoices count for nothing.
func TestNextNumber(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newShop(t)
	next := func(want string) {
		t.Helper()
		got, err := s.store.NextNumber(ctx, s.actor.OrganizationID)
		if err != nil || got != want {
			t.Errorf("next number %q %v, want %q", got, err, want)
		}
	}
	issue := func(number string) {
		t.Helper()
		if _, _, err := s.store.Create(ctx, s.actor, s.draft(number, "5"), nil); err != nil {
			t.Fatal(err)
		}
	}
	next("INV-0001")
	issue("INV-0041")
	next("INV-0042")
	issue("INV-0099")
	next("INV-0100")
	issue("INV-7") // narrower but lower: the highest stays 0099
	next("INV-0100")
	issue("2026-A-9")
	next("2026-A-10")
	issue("INV-9999")
	next("INV-10000")
	issue("INV-10%_1") // LIKE's wildcards are text here
	next("INV-10%_2")
	issue("ACME") // no trailing digits: the INV- numbers again
	next("INV-10000")
	issue("Ünï-08")
	next("Ünï-09")

	other := newShop(t)
	if got, err := other.store.NextNumber(ctx, other.actor.OrganizationID); err != nil || got != "INV-0001" {
		t.Errorf("another organization's next number %q %v", got, err)
	}
}
