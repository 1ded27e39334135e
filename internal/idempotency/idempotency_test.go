package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// fixture is an organization on the test database, and a clock.
type fixture struct {
	db  *sqlx.DB
	org uuid.UUID
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db, err := postgres.Open(t.Context(), testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{db: db, org: uuid.New(), now: time.Now().UTC().Truncate(time.Microsecond)}
	if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Idem Co', 'merchant')`, f.org); err != nil {
		t.Fatal(err)
	}
	return f
}

// claim claims k of op for made in a transaction of its own, committed
// unless the claim fails.
func (f *fixture) claim(t *testing.T, op Operation, k Key, made uuid.UUID, now time.Time) (uuid.UUID, error) {
	t.Helper()
	var earlier uuid.UUID
	err := postgres.InTx(context.Background(), f.db, func(tx *sqlx.Tx) error {
		var err error
		earlier, err = Claim(context.Background(), tx, f.org, op, k, made, now)
		return err
	})
	return earlier, err
}

func key(t *testing.T, k string, parts ...any) Key {
	t.Helper()
	out, err := NewKey(k, parts...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type body struct {
	Amount string  `json:"amount"`
	Reason *string `json:"reason,omitempty"`
}

// A key claimed answers what its request made to the same request, within
// the window; another request under it is refused with a KeyReused rule
// error; past the window it is taken over.
func TestClaim(t *testing.T) {
	f := newFixture(t)
	k := key(t, "k-1", body{Amount: "10.00"})
	first := uuid.New()
	for _, c := range []struct {
		name        string
		key         Key
		op          Operation
		at          time.Duration // after the first claim
		wantEarlier uuid.UUID     // uuid.Nil: claimed for this request
		wantReused  bool
	}{
		{name: "a new key is claimed", key: k, op: CreateInvoice},
		{name: "the same request replays the first", key: key(t, "k-1", body{Amount: "10.00"}), op: CreateInvoice,
			at: time.Hour, wantEarlier: first},
		{name: "another request is refused", key: key(t, "k-1", body{Amount: "10.01"}), op: CreateInvoice,
			at: time.Hour, wantReused: true},
		{name: "the key for another operation is another key", key: k, op: RefundCardPayment, at: time.Hour},
		{name: "still the first's at the end of the window", key: k, op: CreateInvoice, at: Window - time.Second, wantEarlier: first},
		{name: "past the window it is taken over", key: key(t, "k-1", body{Amount: "99.00"}), op: CreateInvoice, at: Window},
	} {
		t.Run(c.name, func(t *testing.T) {
			made := first
			if c.at != 0 {
				made = uuid.New()
			}
			earlier, err := f.claim(t, c.op, c.key, made, f.now.Add(c.at))
			switch {
			case c.wantReused:
				if e := rule.As(err); e == nil || e.Kind != rule.KeyReused || !errors.Is(err, ErrReused) {
					t.Fatalf("claim: %v, %v; want a KeyReused rule error", earlier, err)
				}
			case err != nil:
				t.Fatal(err)
			case earlier != c.wantEarlier:
				t.Errorf("earlier %v, want %v", earlier, c.wantEarlier)
			}
		})
	}
}

// Another organization's key of the same name is another key.
func TestClaimIsPerOrganization(t *testing.T) {
	f, g := newFixture(t), newFixture(t)
	k := key(t, "shared", body{Amount: "1.00"})
	if earlier, err := f.claim(t, CreateInvoice, k, uuid.New(), f.now); err != nil || earlier != uuid.Nil {
		t.Fatalf("claim: %v, %v", earlier, err)
	}
	if earlier, err := g.claim(t, CreateInvoice, key(t, "shared", body{Amount: "2.00"}), uuid.New(), g.now); err != nil || earlier != uuid.Nil {
		t.Errorf("the other organization's claim: %v, %v; want its own", earlier, err)
	}
}

// A request refused, or rolled back, leaves no key: the key may make
// another request. So does a released one.
func TestRolledBackAndReleasedKeysAreFree(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	refused := errors.New("refused by a rule")
	k := key(t, "k-2", body{Amount: "5.00"})
	err := postgres.InTx(ctx, f.db, func(tx *sqlx.Tx) error {
		if _, err := Claim(ctx, tx, f.org, CreateInvoice, k, uuid.New(), f.now); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatal(err)
	}
	made := uuid.New()
	if earlier, err := f.claim(t, CreateInvoice, key(t, "k-2", body{Amount: "6.00"}), made, f.now); err != nil || earlier != uuid.Nil {
		t.Fatalf("claim after a rollback: %v, %v; want the key free", earlier, err)
	}
	err = postgres.InTx(ctx, f.db, func(tx *sqlx.Tx) error {
		if err := Release(ctx, tx, f.org, RefundCardPayment, made); err != nil { // another operation's: no effect
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.claim(t, CreateInvoice, key(t, "k-2", body{Amount: "7.00"}), uuid.New(), f.now); !errors.Is(err, ErrReused) {
		t.Fatalf("claim after releasing another operation's key: %v, want ErrReused", err)
	}
	if err := postgres.InTx(ctx, f.db, func(tx *sqlx.Tx) error { return Release(ctx, tx, f.org, CreateInvoice, made) }); err != nil {
		t.Fatal(err)
	}
	if earlier, err := f.claim(t, CreateInvoice, key(t, "k-2", body{Amount: "7.00"}), uuid.New(), f.now); err != nil || earlier != uuid.Nil {
		t.Errorf("claim after a release: %v, %v; want the key free", earlier, err)
	}
}

// Requests with one key at once: one claims it, every other answers what
// that one made.
func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	f := newFixture(t)
	const n = 8
	k := key(t, "k-race", body{Amount: "3.00"})
	type result struct {
		made, earlier uuid.UUID
		err           error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			made := uuid.New()
			earlier, err := f.claim(t, RefundCardPayment, k, made, f.now)
			results <- result{made, earlier, err}
		})
	}
	wg.Wait()
	close(results)
	var winners []uuid.UUID
	var earliers []uuid.UUID
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.earlier == uuid.Nil {
			winners = append(winners, r.made)
		} else {
			earliers = append(earliers, r.earlier)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d requests claimed the key, want 1", len(winners))
	}
	for _, e := range earliers {
		if e != winners[0] {
			t.Errorf("a request answered %v, want the winner's %v", e, winners[0])
		}
	}
}

// Keys past the window are deleted; live ones stay.
func TestDeleteExpired(t *testing.T) {
	f := newFixture(t)
	old, live := key(t, "old", body{Amount: "1.00"}), key(t, "live", body{Amount: "1.00"})
	if _, err := f.claim(t, CreateInvoice, old, uuid.New(), f.now.Add(-Window-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.claim(t, CreateInvoice, live, uuid.New(), f.now.Add(-Window+time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := DeleteExpired(context.Background(), f.db, f.now); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := f.db.Select(&keys, `SELECT key FROM idempotency_keys WHERE organization_id = $1 ORDER BY key`, f.org); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "live" {
		t.Errorf("keys left %v, want [live]", keys)
	}
}

// A request is its parts as decoded: the same values spelt otherwise on
// the wire are the same request. The hash is the one kept before this
// package (the id's 16 bytes, then the JSON), so keys moved from the old
// tables still replay.
func TestNewKey(t *testing.T) {
	var a, b body
	if err := json.Unmarshal([]byte(`{"reason": "returned", "amount": "10.00"}`), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"amount":"10.00","reason":"returned"}`), &b); err != nil {
		t.Fatal(err)
	}
	sale := uuid.New()
	ka, kb := key(t, "k", sale, a), key(t, "k", sale, b)
	if string(ka.hash) != string(kb.hash) {
		t.Errorf("one request spelt two ways hashes two ways")
	}
	if other := key(t, "k", uuid.New(), a); string(other.hash) == string(ka.hash) {
		t.Errorf("the same body on another sale hashes the same")
	}
	normal, _ := json.Marshal(a)
	want := sha256.Sum256(append(sale[:], normal...))
	if string(ka.hash) != string(want[:]) {
		t.Errorf("hash %x, want %x (as the old tables kept it)", ka.hash, want)
	}
}

// A key is 1 to MaxKey characters, counted as characters, not bytes.
func TestNewKeyLength(t *testing.T) {
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{"", false},
		{"k", true},
		{strings.Repeat("k", MaxKey), true},
		{strings.Repeat("é", MaxKey), true},
		{strings.Repeat("k", MaxKey+1), false},
	} {
		_, err := NewKey(c.key, "part")
		if c.ok != (err == nil) {
			t.Errorf("a key of %d characters: %v", len([]rune(c.key)), err)
		}
		if err != nil && (!errors.Is(err, ErrKeyLength) || !rule.Is(err, rule.Invalid)) {
			t.Errorf("a key of %d characters: %v, want ErrKeyLength", len([]rune(c.key)), err)
		}
	}
}
