package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/demo"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/pgtest"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// TestPgbenchScriptsRunTheServersSQL fails when a bench/pgbench script no
// longer runs the statements the server sends for its scenario: the baseline
// must price exactly payreq's SQL. Each scenario's work is done through the
// real stores on a connection that records every statement; the script's
// statements must be the same, in the same order, once the values are set
// aside (a script writes literals, pgbench variables and bench_* calls
// where the server sends parameters).
func TestPgbenchScriptsRunTheServersSQL(t *testing.T) {
	ctx := context.Background()
	a := openApp(t)
	seeded, err := demo.Seed(ctx, a.DB, a.Auth, a.Resellers, a.People)
	if err != nil {
		t.Fatal(err)
	}
	org := seeded.Merchant.OrganizationID
	mids, err := a.Directory.MerchantAccounts(ctx, org, nil)
	if err != nil || len(mids) == 0 {
		t.Fatalf("merchant accounts: %v, %v", mids, err)
	}
	rec := &sqlRecorder{}
	db := recordingDB(t, rec)
	invoices := &invoice.Store{DB: db, Now: time.Now, PublicURL: "http://payreq.test", PayLinks: a.Invoices.PayLinks,
		Cards: &payment.Store{DB: db}}
	tokens := &auth.Store{DB: db, Peppers: a.Auth.Peppers, Tokens: a.Auth.Tokens, Now: time.Now,
		RevocationCheckInterval: time.Minute, Organizations: &directory.Store{DB: db}, Members: a.People}
	actor := invoice.Actor{OrganizationID: org, Name: "bench"}
	customers := &customer.Store{DB: db, Now: time.Now, Invoices: invoices, Cards: &payment.Store{DB: db}}
	var made []invoice.Invoice
	create := func() invoice.Invoice {
		t.Helper()
		key := uuid.NewString()
		inv, _, err := invoices.Create(ctx, actor, threeLines(mids[0].ID), &key)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, inv)
		return inv
	}
	for range 30 {
		create()
	}
	var deep string
	if _, deep, err = invoices.List(ctx, org, invoice.Filter{}, 2, ""); err != nil || deep == "" {
		t.Fatalf("a cursor for the deep page: %q, %v", deep, err)
	}

	for _, sc := range []struct {
		script string
		run    func()
	}{
		{"token.sql", func() {
			if err := tokens.CountTokenRequest(ctx, "192.0.2.1"); err != nil {
				t.Fatal(err)
			}
			if _, err := tokens.Exchange(ctx, auth.Credentials{GrantType: "client_credentials",
				ClientID: seeded.Merchant.KeyID, ClientSecret: seeded.Merchant.Secret}); err != nil {
				t.Fatal(err)
			}
		}},
		{"create.sql", func() { create() }},
		{"get.sql", func() {
			if _, err := invoices.Get(ctx, org, made[0].ID); err != nil {
				t.Fatal(err)
			}
		}},
		{"list_first.sql", func() {
			if _, _, err := invoices.List(ctx, org, invoice.Filter{}, 25, ""); err != nil {
				t.Fatal(err)
			}
		}},
		{"list_deep.sql", func() {
			if _, _, err := invoices.List(ctx, org, invoice.Filter{}, 25, deep); err != nil {
				t.Fatal(err)
			}
		}},
		{"customers_search.sql", func() {
			q := "Dana"
			if _, _, err := customers.List(ctx, org, customer.Filter{Q: &q}, 25, ""); err != nil {
				t.Fatal(err)
			}
		}},
		{"send.sql", func() {
			if _, err := invoices.Send(ctx, invoice.Actor{OrganizationID: org}, made[1].ID); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(sc.script, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("pgbench", sc.script))
			if err != nil {
				t.Fatal(err)
			}
			rec.reset()
			sc.run()
			sent := rec.statements()
			want := scriptStatements(string(raw))
			for i := 0; i < max(len(sent), len(want)); i++ {
				var got, exp string
				if i < len(sent) {
					got = shape(sent[i])
				}
				if i < len(want) {
					exp = shape(want[i])
				}
				if got != exp {
					t.Errorf("statement %d differs from the server's:\n server: %s\n script: %s", i+1, got, exp)
				}
			}
		})
	}
}

func openApp(t *testing.T) *app.App {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL, cfg.DataDir = testDSN, dir
	cfg.SigningKeyFile, cfg.PepperFile, cfg.EncryptionKeyFile = dir+"/signing-key.pem", dir+"/pepper", dir+"/encryption-key"
	a, err := app.Open(context.Background(), cfg, app.Options{GenerateSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func threeLines(mid uuid.UUID) invoice.Draft {
	email := "dana@example.com"
	send := false
	dec := func(s string) apd.Decimal {
		d, _, err := apd.NewFromString(s)
		if err != nil {
			panic(err)
		}
		return *d
	}
	return invoice.Draft{
		MerchantAccountID: mid, InvoiceNumber: "BENCH-" + uuid.NewString(), Amount: dec("60.00"),
		CustomerName: &email, CustomerEmail: &email, Send: &send,
		Lines: []invoice.Line{
			{Description: "a", Quantity: dec("1"), UnitCost: dec("10")},
			{Description: "b", Quantity: dec("2"), UnitCost: dec("10")},
			{Description: "c", Quantity: dec("3"), UnitCost: dec("10")},
		},
	}
}

// scriptStatements are a pgbench script's SQL statements, without its
// comments, meta-commands and transaction control.
func scriptStatements(script string) []string {
	var lines []string
	for _, l := range strings.Split(script, "\n") {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "--") || strings.HasPrefix(t, `\`) {
			continue
		}
		lines = append(lines, l)
	}
	var out []string
	// A statement ends at ; or, storing its answer in variables, at \gset.
	for _, st := range strings.Split(strings.ReplaceAll(strings.Join(lines, "\n"), `\gset`, ";"), ";") {
		st = strings.TrimSpace(st)
		switch {
		case st == "", strings.HasPrefix(st, "BEGIN"), st == "COMMIT":
			continue
		}
		out = append(out, st)
	}
	return out
}

var (
	// What stands for a value: parameters, pgbench variables, literals,
	// and the functions a script calls where the server sends a value it
	// made (ids, times) or one it was asked for (bench_sample_*,
	// bench_customer_*).
	valueShapes = regexp.MustCompile(`bench_[a-z_]+\(:n\)|now\(\) - interval '[^']*'|now\(\)|gen_random_uuid\(\)|'(?:[^']|'')*'|\$\d+|(^|[^:]):[A-Za-z_][A-Za-z0-9_]*|\b\d+\b|\bNULL\b|\btrue\b|\bfalse\b`)
	// A column set to itself: where the server writes back the value it
	// read, a script writes the row's own (pgbench variables hold no NULL).
	selfAssignment = regexp.MustCompile(`\b([a-z_]+) = ([a-z_]+)\b`)
	alias          = regexp.MustCompile(`\s+AS\s+[a-z_]+\b`)
	space          = regexp.MustCompile(`\s+`)
	punctuation    = regexp.MustCompile(`\s*([(),=<>])\s*`)
)

// shape is a statement with its values set aside: every value is ?, and
// spacing and column aliases do not count.
func shape(sql string) string {
	s := valueShapes.ReplaceAllStringFunc(sql, func(m string) string {
		if m[0] != ':' && m[0] != '$' && m[0] != '\'' && len(m) > 1 && m[1] == ':' {
			return m[:1] + "?" // the character before a pgbench variable stays
		}
		return "?"
	})
	s = selfAssignment.ReplaceAllStringFunc(s, func(m string) string {
		p := selfAssignment.FindStringSubmatch(m)
		if p[1] == p[2] {
			return p[1] + " = ?"
		}
		return m
	})
	s = alias.ReplaceAllString(s, "")
	s = space.ReplaceAllString(strings.TrimSpace(s), " ")
	return punctuation.ReplaceAllString(s, "$1")
}

// sqlRecorder keeps the statements sent through a recording connection.
type sqlRecorder struct {
	mu   sync.Mutex
	sent []string
}

func (r *sqlRecorder) add(q string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, q)
}

func (r *sqlRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = nil
}

func (r *sqlRecorder) statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sent...)
}

func recordingDB(t *testing.T, rec *sqlRecorder) *sqlx.DB {
	t.Helper()
	connector, err := pq.NewConnector(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	db := sqlx.NewDb(sql.OpenDB(recordingConnector{connector, rec}), "postgres")
	t.Cleanup(func() { db.Close() })
	return db
}

type recordingConnector struct {
	driver.Connector
	rec *sqlRecorder
}

func (c recordingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{conn.(pqConn), c.rec}, nil
}

// pqConn is what lib/pq's connection implements and database/sql uses.
type pqConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.QueryerContext
	driver.ExecerContext
}

type recordingConn struct {
	pqConn
	rec *sqlRecorder
}

func (c *recordingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.rec.add(q)
	return c.pqConn.QueryContext(ctx, q, args)
}

func (c *recordingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.rec.add(q)
	return c.pqConn.ExecContext(ctx, q, args)
}

func (c *recordingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.rec.add(q)
	return c.pqConn.PrepareContext(ctx, q)
}
