package event

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// newEvents is a store of events on a clock the test moves, and a new
// organization; the package's tests share its database, so each claims
// only what it appended (claimed).
func newEvents(t *testing.T) (*Store, uuid.UUID, *time.Time) {
	t.Helper()
	db, err := postgres.Open(context.Background(), testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	org := uuid.Must(uuid.NewV7())
	if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Dana''s Bakery', 'merchant')`, org); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	return &Store{DB: db, Now: func() time.Time { return now }}, org, &now
}

// appendEvents appends one event of each type given, in one transaction.
func appendEvents(t *testing.T, s *Store, org uuid.UUID, at time.Time, types ...string) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	err := postgres.InTx(context.Background(), s.DB, func(tx *sqlx.Tx) error {
		for _, typ := range types {
			var id uuid.UUID
			var err error
			switch typ {
			case InvoiceCreated.Name:
				id, err = Append(context.Background(), tx, org, InvoiceCreated, models.Invoice{InvoiceNumber: "INV-1"}, at)
			case ApplicationSubmitted.Name:
				id, err = Append(context.Background(), tx, org, ApplicationSubmitted, models.Application{}, at)
			case WebhookPing.Name:
				id, err = AppendDispatched(context.Background(), tx, org, WebhookPing, models.WebhookPing{}, at)
			default:
				t.Fatalf("appendEvents: no data for %s", typ)
			}
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// claimed is what Claim answers in tx, of the organization's events only.
func claimed(t *testing.T, tx *sqlx.Tx, org uuid.UUID) []uuid.UUID {
	t.Helper()
	list, err := Claim(context.Background(), tx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for _, d := range list {
		if d.OrganizationID == org {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

func begin(t *testing.T, s *Store) *sqlx.Tx {
	t.Helper()
	tx, err := s.DB.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

// An appended event is claimed once, oldest first; a transaction at once
// skips what another holds; a claim rolled back is claimed again. An event
// whose caller dispatched it is never claimed.
func TestClaim(t *testing.T) {
	s, org, now := newEvents(t)
	ids := appendEvents(t, s, org, *now, InvoiceCreated.Name, InvoiceCreated.Name, WebhookPing.Name)
	fanned := ids[:2]

	first := begin(t, s)
	if got := claimed(t, first, org); !slices.Equal(got, fanned) {
		t.Fatalf("first claim = %v, want %v (not the ping)", got, fanned)
	}
	second := begin(t, s)
	if got := claimed(t, second, org); len(got) != 0 {
		t.Errorf("a claim beside the first = %v, want nothing", got)
	}
	second.Rollback()
	if err := first.Rollback(); err != nil {
		t.Fatal(err)
	}

	again := begin(t, s)
	if got := claimed(t, again, org); !slices.Equal(got, fanned) {
		t.Fatalf("after a rollback = %v, want %v again", got, fanned)
	}
	if err := again.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := claimed(t, begin(t, s), org); len(got) != 0 {
		t.Errorf("after a commit = %v, want nothing left", got)
	}
}

// List and Get show only the events whose data the permissions may read;
// a filter by a type the key may not read is refused as Forbidden, and
// another organization sees none of them.
func TestThePermissionFilter(t *testing.T) {
	s, org, now := newEvents(t)
	ctx := context.Background()
	ids := appendEvents(t, s, org, *now, InvoiceCreated.Name, ApplicationSubmitted.Name, WebhookPing.Name)
	invoice, application, ping := ids[0], ids[1], ids[2]

	list := func(org uuid.UUID, permissions []string, f Filter) []uuid.UUID {
		t.Helper()
		events, _, err := s.List(ctx, org, permissions, f, 25, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []uuid.UUID
		for _, e := range events {
			got = append(got, e.ID)
		}
		return got
	}
	for _, c := range []struct {
		permissions []string
		want        []uuid.UUID
	}{
		{[]string{auth.EventsView}, []uuid.UUID{ping}},
		{[]string{auth.EventsView, auth.PaymentsView}, []uuid.UUID{ping, invoice}},
		{[]string{auth.EventsView, auth.PaymentsView, auth.ApplicationsView}, []uuid.UUID{ping, application, invoice}},
	} {
		if got := list(org, c.permissions, Filter{}); !slices.Equal(got, c.want) {
			t.Errorf("List with %v = %v, want %v (newest first)", c.permissions, got, c.want)
		}
		for _, id := range ids {
			_, err := s.Get(ctx, org, c.permissions, id)
			if readable := slices.Contains(c.want, id); readable != (err == nil) || (!readable && !errors.Is(err, ErrNotFound)) {
				t.Errorf("Get %v with %v: %v, readable %v", id, c.permissions, err, readable)
			}
		}
	}
	typ := InvoiceCreated.Name
	if got := list(org, []string{auth.EventsView, auth.PaymentsView}, Filter{Type: &typ}); !slices.Equal(got, []uuid.UUID{invoice}) {
		t.Errorf("List of %s = %v, want the invoice's", typ, got)
	}
	if _, _, err := s.List(ctx, org, []string{auth.EventsView}, Filter{Type: &typ}, 25, ""); !rule.Is(err, rule.Forbidden) {
		t.Errorf("List of %s without payments.view: %v, want Forbidden", typ, err)
	}
	all := []string{auth.EventsView, auth.PaymentsView, auth.ApplicationsView}
	if got := list(uuid.New(), all, Filter{}); len(got) != 0 {
		t.Errorf("another organization lists %v", got)
	}
	if _, err := s.Get(ctx, uuid.New(), all, invoice); !errors.Is(err, ErrNotFound) {
		t.Errorf("another organization's Get: %v, want ErrNotFound", err)
	}
}

// DeleteOld forgets the events older than Retention and keeps the rest;
// one forgotten before its fan-out is never claimed.
func TestRetention(t *testing.T) {
	s, org, now := newEvents(t)
	ctx := context.Background()
	old := appendEvents(t, s, org, now.Add(-Retention-time.Second), InvoiceCreated.Name)[0]
	kept := appendEvents(t, s, org, now.Add(-Retention+time.Second), InvoiceCreated.Name)[0]
	if err := s.DeleteOld(ctx); err != nil {
		t.Fatal(err)
	}
	all := []string{auth.EventsView, auth.PaymentsView}
	if _, err := s.Get(ctx, org, all, old); !errors.Is(err, ErrNotFound) {
		t.Errorf("an event past the retention: %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, org, all, kept); err != nil {
		t.Errorf("an event within the retention: %v", err)
	}
	if got := claimed(t, begin(t, s), org); !slices.Equal(got, []uuid.UUID{kept}) {
		t.Errorf("claimed = %v, want the kept event alone", got)
	}
}
