package delivery

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// newDB opens a fresh migrated database of the test's own, so that no other
// test's worker ever sees its messages.
func newDB(t *testing.T) *sqlx.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), pgtest.NewDatabase(t), postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

const (
	testPublicURL    = "https://pay.example.com"
	testLocation     = "Dana's Bakery & Café"
	testOrganization = "Dana Holdings"
	testCustomer     = "dana@example.net"
	testPhone        = "+15551234567"
	testAmount       = "1234.50"
	testAmountShown  = "$1,234.50"
	testDueDate      = "2026-03-05"
	testDueShown     = "March 5, 2026"
)

// invoice is what a test knows of the invoice it inserted.
type invoice struct {
	OrganizationID uuid.UUID
	ID             uuid.UUID
	Number         string
}

func (inv invoice) payLink() string { return testPayLink(inv.ID) }

func testPayLink(id uuid.UUID) string { return testPublicURL + "/pay/tok_" + id.String() }

// testInvoices stands for the invoice package (which imports this one):
// what a message shows of an invoice, and the record of a failed send.
type testInvoices struct{ db *sqlx.DB }

func (ti testInvoices) Bill(ctx context.Context, org, id uuid.UUID) (Bill, error) {
	var (
		status string
		b      Bill
		name   sql.NullString
		mid    uuid.UUID
	)
	err := ti.db.QueryRowContext(ctx, `SELECT status, invoice_number, to_char(amount, 'FM$999,999,990.00'),
			to_char(amount - amount_paid, 'FM$999,999,990.00'), due_date, customer_name, merchant_account_id,
			CASE WHEN tax_amount <> 0 THEN to_char(amount - tax_amount, 'FM$999,999,990.00') ELSE '' END,
			CASE WHEN tax_amount <> 0 THEN to_char(tax_amount, 'FM$999,999,990.00') ELSE '' END
		FROM invoices WHERE id = $1 AND organization_id = $2`, id, org).Scan(
		&status, &b.InvoiceNumber, &b.Amount, &b.Balance, &b.DueDate, &name, &mid, &b.Subtotal, &b.Tax)
	if err != nil {
		return Bill{}, err
	}
	if b.Biller, err = directory.BillerOf(ctx, ti.db, org, mid); err != nil {
		return Bill{}, err
	}
	if err := ti.db.SelectContext(ctx, &b.Lines, `SELECT description, quantity::text AS quantity,
			to_char(unit_cost, 'FM$999,999,990.00') AS unit_cost, to_char(quantity * unit_cost, 'FM$999,999,990.00') AS amount
		FROM invoice_lines WHERE invoice_id = $1 ORDER BY position`, id); err != nil {
		return Bill{}, err
	}
	b.Cancelled, b.CustomerName, b.PayLink = status == "cancelled", name.String, testPayLink(id)
	b.Payable = status == "open" || status == "part_paid"
	return b, nil
}

func (ti testInvoices) SendFailed(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, problem string) error {
	_, err := tx.ExecContext(ctx, `UPDATE invoices SET send_problem = $3 WHERE id = $1 AND organization_id = $2`, id, org, problem)
	return err
}

// newInvoice inserts an organization, a location, a MID and an open invoice
// on it.
func newInvoice(t *testing.T, db *sqlx.DB) invoice {
	t.Helper()
	inv := invoice{OrganizationID: uuid.New(), ID: uuid.New(), Number: "INV-" + uuid.NewString()[:8]}
	loc, mid, customerID := uuid.New(), uuid.New(), uuid.New()
	ctx := context.Background()
	err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		stmts := []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO organizations (id, name, kind) VALUES ($1, $2, 'merchant')`,
				[]any{inv.OrganizationID, testOrganization}},
			{`INSERT INTO locations (id, organization_id, name, time_zone, status, address_line1, city, state, postal_code, email)
				VALUES ($1, $2, $3, 'America/Chicago', 'active', '1 Main St', 'Springfield', 'IL', '62701', 'shop@dana.example')`,
				[]any{loc, inv.OrganizationID, testLocation}},
			// A MID belongs to one organization: each invoice's its own.
			{`INSERT INTO merchant_accounts (id, organization_id, location_id, mid) VALUES ($1, $2, $3, $4)`,
				[]any{mid, inv.OrganizationID, loc, fmt.Sprintf("%015d", binary.BigEndian.Uint64(mid[:8])%1e15)}},
			{`INSERT INTO customers (id, organization_id, email, created_at, updated_at) VALUES ($1, $2, $3, now(), now())`,
				[]any{customerID, inv.OrganizationID, testCustomer}},
			{`INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, amount,
					customer_name, customer_email, customer_phone, delivery, due_date, status,
					created_at, created_by_name, customer_id)
				VALUES ($1, $2, $3, $4, $5, 'Dana Scully', $6, $7, 'email', $8, 'open', now(), 'test key', $9)`,
				[]any{inv.ID, inv.OrganizationID, mid, inv.Number, testAmount, testCustomer, testPhone, testDueDate, customerID}},
		}
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s.sql, s.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal("insert invoice:", err)
	}
	return inv
}

// enqueue commits one message for the invoice and returns its id.
func enqueue(t *testing.T, db *sqlx.DB, inv invoice, channel, recipient string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		return Enqueue(context.Background(), tx, Message{ID: id, OrganizationID: inv.OrganizationID,
			InvoiceID: inv.ID, Channel: channel, Recipient: recipient, At: time.Now()})
	})
	if err != nil {
		t.Fatal("enqueue:", err)
	}
	return id
}

// testConfig is quick: short polls and backoffs, a lease long enough for any
// delivery in a test.
func testConfig(t *testing.T) Config {
	return Config{
		DataDir:      t.TempDir(),
		PollInterval: 20 * time.Millisecond,
		Lease:        10 * time.Second,
		BackoffBase:  20 * time.Millisecond,
		BackoffMax:   100 * time.Millisecond,
		MaxAttempts:  3,
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

func newWorker(t *testing.T, db *sqlx.DB, cfg Config) *Worker {
	t.Helper()
	if cfg.Invoices == nil {
		cfg.Invoices = testInvoices{db}
	}
	w, err := NewWorker(db, cfg, testLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// run runs the worker until the test ends or stop is called, and checks that
// it stops then.
func run(t *testing.T, w *Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("worker did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting until", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type outboxRow struct {
	Attempts    int            `db:"attempts"`
	LastError   sql.NullString `db:"last_error"`
	CreatedAt   time.Time      `db:"created_at"`
	DeliveredAt sql.NullTime   `db:"delivered_at"`
	FailedAt    sql.NullTime   `db:"failed_at"`
	CancelledAt sql.NullTime   `db:"cancelled_at"`
}

func readOutbox(t *testing.T, db *sqlx.DB, id uuid.UUID) outboxRow {
	t.Helper()
	var r outboxRow
	if err := db.Get(&r, `SELECT attempts, last_error, created_at, delivered_at, failed_at, cancelled_at
		FROM outbox WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return r
}

func delivered(t *testing.T, db *sqlx.DB, id uuid.UUID) func() bool {
	return func() bool { return readOutbox(t, db, id).DeliveredAt.Valid }
}

func failed(t *testing.T, db *sqlx.DB, id uuid.UUID) func() bool {
	return func() bool { return readOutbox(t, db, id).FailedAt.Valid }
}

func readSendProblem(t *testing.T, db *sqlx.DB, inv invoice) string {
	t.Helper()
	var p sql.NullString
	if err := db.Get(&p, `SELECT send_problem FROM invoices WHERE id = $1`, inv.ID); err != nil {
		t.Fatal(err)
	}
	return p.String
}
