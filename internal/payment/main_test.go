package payment

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// fixture is a merchant with one MID, and a Service on the test database
// whose processor is a gate.
type fixture struct {
	db      *sqlx.DB
	svc     *Store
	gate    *gate
	org     uuid.UUID
	account uuid.UUID
	mid     string
}

// newFixture makes a merchant; pool is the most connections the Service
// may hold (0: the default).
func newFixture(t *testing.T, pool int) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, testDSN, postgres.Pool{MaxOpenConns: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{db: db, gate: newGate(), org: uuid.Must(uuid.NewV7()), account: uuid.Must(uuid.NewV7()),
		mid: "4961" + uuid.NewString()[:8]}
	links, err := invoice.NewPayLinks(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	f.svc = &Store{DB: db, Processor: f.gate, Now: time.Now, SettlementCutoff: 22 * time.Hour,
		Invoices: &invoice.Store{DB: db, Now: time.Now, PublicURL: "https://payreq.test", PayLinks: links}}
	f.svc.Invoices.Cards = f.svc
	f.svc.Invoices.Terminals = noTerminals{}
	location := uuid.Must(uuid.NewV7())
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Dana''s Bakery', 'merchant')`, []any{f.org}},
		{`INSERT INTO locations (id, organization_id, name, time_zone, status, address_line1, city, state, postal_code)
			VALUES ($1, $2, 'Main Street', 'America/Chicago', 'active', '1 Main St', 'Austin', 'TX', '78701')`, []any{location, f.org}},
		{`INSERT INTO merchant_accounts (id, organization_id, location_id, mid) VALUES ($1, $2, $3, $4)`, []any{f.account, f.org, location, f.mid}},
	} {
		if _, err := db.Exec(q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// invoice makes an invoice of amount with paid of it paid, in status.
func (f *fixture) invoice(t *testing.T, amount, paid string, status invoice.Status) invoice.Invoice {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := f.db.Exec(`
		WITH c AS (
			INSERT INTO customers (id, organization_id, email, created_at, updated_at)
			VALUES (gen_random_uuid(), $2, 'dana@example.com', now(), now())
			ON CONFLICT (organization_id, lower(email)) DO UPDATE SET email = EXCLUDED.email
			RETURNING id
		)
		INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, amount, amount_paid,
			customer_email, delivery, status, created_at, created_by_name, customer_id)
		SELECT $1, $2, $3, $4, $5, $6, 'dana@example.com', 'email', $7, now(), 'test', c.id FROM c`,
		id, f.org, f.account, "INV-"+id.String(), amount, paid, string(status))
	if err != nil {
		t.Fatal(err)
	}
	return f.read(t, id)
}

func (f *fixture) read(t *testing.T, id uuid.UUID) invoice.Invoice {
	t.Helper()
	inv, err := f.svc.Invoices.Get(context.Background(), f.org, id)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// pay pays amount toward inv with card, on a new form.
func (f *fixture) pay(inv invoice.Invoice, card, amount string) (Outcome, error) {
	return f.svc.Pay(context.Background(), inv, Request{AttemptID: uuid.New(), Version: inv.Version, Amount: dec(amount),
		Card: processor.Card{Number: card, Expiry: "1299", CVV: "123", Name: "Dana Whitfield"}})
}

// sale pays the whole of a new invoice of amount and returns its sale.
func (f *fixture) sale(t *testing.T, amount string) CardPayment {
	t.Helper()
	out, err := f.pay(f.invoice(t, amount, "0", invoice.Open), processor.TestCardApprove, amount)
	if err != nil || !out.Approved {
		t.Fatalf("pay: %+v, %v", out, err)
	}
	sale, err := f.svc.CardPayment(context.Background(), f.org, out.Payment.ID)
	if err != nil {
		t.Fatal(err)
	}
	return sale
}

// count is a count(*) query's answer.
func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.db.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// events are the types of the organization's events, in the order
// appended.
func (f *fixture) events(t *testing.T) []string {
	t.Helper()
	var types []string
	if err := f.db.Select(&types, `SELECT type FROM events WHERE organization_id = $1 ORDER BY id`, f.org); err != nil {
		t.Fatal(err)
	}
	return types
}

// gate is the simulator; while held, each charge, refund, profile deletion
// and settlement waits at it, after telling reached, until the test sends
// on release. It counts what it was asked.
type gate struct {
	*processor.Simulator
	held    atomic.Bool
	reached chan string
	release chan struct{}
	mu      sync.Mutex
	asked   map[string]int // "charge", "void", "refund", "delete", "settle"
}

func newGate() *gate {
	return &gate{Simulator: processor.NewSimulator(), reached: make(chan string, 16), release: make(chan struct{}),
		asked: map[string]int{}}
}

func (g *gate) pass(ctx context.Context, what string) error {
	g.mu.Lock()
	g.asked[what]++
	g.mu.Unlock()
	if !g.held.Load() {
		return nil
	}
	g.reached <- what
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// times is how many times what was asked.
func (g *gate) times(what string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked[what]
}

// waitReached waits until something waits at the gate and says what; the
// minute only stops a test that would otherwise wait for ever.
func (g *gate) waitReached(t *testing.T) string {
	t.Helper()
	select {
	case what := <-g.reached:
		return what
	case <-time.After(time.Minute):
		t.Fatal("nothing reached the processor")
		return ""
	}
}

func (g *gate) AuthorizeCapture(ctx context.Context, c processor.Charge) (processor.Result, error) {
	if err := g.pass(ctx, "charge"); err != nil {
		return processor.Result{}, err
	}
	return g.Simulator.AuthorizeCapture(ctx, c)
}

func (g *gate) Void(ctx context.Context, merchantID, orderID string) error {
	g.mu.Lock()
	g.asked["void"]++
	g.mu.Unlock()
	return g.Simulator.Void(ctx, merchantID, orderID)
}

func (g *gate) Refund(ctx context.Context, r processor.Refund) (processor.RefundResult, error) {
	if err := g.pass(ctx, "refund"); err != nil {
		return processor.RefundResult{}, err
	}
	return g.Simulator.Refund(ctx, r)
}

func (g *gate) DeleteProfile(ctx context.Context, merchantID, profileID, accountID string) error {
	if err := g.pass(ctx, "delete"); err != nil {
		return err
	}
	return g.Simulator.DeleteProfile(ctx, merchantID, profileID, accountID)
}

func (g *gate) Settle(ctx context.Context, b processor.Batch) ([]processor.Funding, error) {
	if err := g.pass(ctx, "settle"); err != nil {
		return nil, err
	}
	return g.Simulator.Settle(ctx, b)
}

// noTerminals: no terminal takes payments in these tests.
type noTerminals struct{}

func (noTerminals) PendingFor(context.Context, sqlx.QueryerContext, uuid.UUID) (bool, error) {
	return false, nil
}
