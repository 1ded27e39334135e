package webhook

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// clock is the tests' time: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is an organization with a Store on the test database, on a
// clock of its own.
type fixture struct {
	db    *sqlx.DB
	store *Store
	clock *clock
	org   uuid.UUID
}

// Secrets are kept as they are: sealing is package vault's to test.
func seal(plaintext, _ string) ([]byte, string, error) { return []byte(plaintext), "k1", nil }
func open(sealed []byte, _, _ string) (string, error)  { return string(sealed), nil }
func quiet() *slog.Logger                              { return slog.New(slog.DiscardHandler) }
func permissions(kind string) []string                 { return auth.PermissionsFor(kind) }
func noLookups(context.Context, string, string) ([]netip.Addr, error) {
	return nil, &net.DNSError{IsNotFound: true}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db, err := postgres.Open(t.Context(), testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := &clock{t: time.Now().UTC().Truncate(time.Second)}
	f := &fixture{db: db, clock: c, org: uuid.Must(uuid.NewV7()),
		store: &Store{DB: db, Now: c.now, Seal: seal, Open: open, AllowPrivate: true, Resolver: resolver(noLookups)}}
	f.organization(t, f.org, auth.KindMerchant)
	return f
}

func (f *fixture) organization(t testing.TB, id uuid.UUID, kind string) {
	t.Helper()
	// A reseller has a slug (its sign-up page's).
	if _, err := f.db.Exec(`INSERT INTO organizations (id, name, kind, slug)
		VALUES ($1, 'Dana''s Bakery', $2, CASE WHEN $2 = 'reseller' THEN $3 END)`, id, kind, "r-"+id.String()); err != nil {
		t.Fatal(err)
	}
	// Its endpoints go with its test, so that no later test's worker
	// attempts their deliveries.
	t.Cleanup(func() { _, _ = f.db.Exec(`DELETE FROM webhook_endpoints WHERE organization_id = $1`, id) })
}

// worker is a delivery worker on the fixture's clock retrying on schedule.
func (f *fixture) worker(schedule ...time.Duration) *Worker {
	return NewWorker(f.db, open, WorkerConfig{Timeout: 5 * time.Second, Schedule: schedule, AllowPrivate: true}, quiet(), f.clock.now)
}

// endpoint registers url for types.
func (f *fixture) endpoint(t testing.TB, url string, types ...string) Endpoint {
	t.Helper()
	e, _, _, err := f.store.Create(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, NewEndpoint{URL: url, EventTypes: types}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// appendEvent records an event of the fixture's organization now.
func appendEvent[D event.Data](t testing.TB, f *fixture, org uuid.UUID, typ event.Type[D], data D) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	err := postgres.InTx(context.Background(), f.db, func(tx *sqlx.Tx) error {
		var err error
		id, err = event.Append(context.Background(), tx, org, typ, data, f.clock.now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// paid records an invoice.paid event of the fixture's organization.
func (f *fixture) paid(t testing.TB) uuid.UUID {
	t.Helper()
	return appendEvent(t, f, f.org, event.InvoicePaid, models.Invoice{InvoiceNumber: "INV-1"})
}

// delivery is an event's delivery to an endpoint as stored.
type delivery struct {
	Status         string     `db:"status"`
	Attempts       int        `db:"attempts"`
	NextAttemptAt  time.Time  `db:"next_attempt_at"`
	LastStatusCode *int       `db:"last_status_code"`
	LastError      *string    `db:"last_error"`
	DeliveredAt    *time.Time `db:"delivered_at"`
}

func (f *fixture) delivery(t *testing.T, eventID, endpointID uuid.UUID) delivery {
	t.Helper()
	var d delivery
	if err := f.db.Get(&d, `SELECT status, attempts, next_attempt_at, last_status_code, last_error, delivered_at
		FROM webhook_deliveries WHERE event_id = $1 AND endpoint_id = $2`, eventID, endpointID); err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) read(t *testing.T, id uuid.UUID) Endpoint {
	t.Helper()
	e, err := f.store.Endpoint(context.Background(), f.org, id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// deliverDue runs one round of deliveries and fails t on an error.
func deliverDue(t *testing.T, w *Worker) int {
	t.Helper()
	n, err := w.DeliverDue(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func fanOut(t *testing.T, w *Worker) int {
	t.Helper()
	n, _, err := w.FanOut(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// receiver is a webhook endpoint's server: it answers each request with
// answer, and keeps the webhook-id of each.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	ids    []string
	answer func(w http.ResponseWriter)
}

func newReceiver(t testing.TB, answer func(w http.ResponseWriter)) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.ids = append(r.ids, req.Header.Get("webhook-id"))
		answer := r.answer
		r.mu.Unlock()
		answer(w)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

func (r *receiver) set(answer func(w http.ResponseWriter)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = answer
}

func status(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

// resolver is a Resolver that is a function.
type resolver func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (r resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return r(ctx, network, host)
}

// BenchmarkDeliveries fans out and delivers b.N events of an organization
// with one endpoint subscribed to everything, by one worker, to a
// receiver answering 204. Beside the time, WAL-B/op is what PostgreSQL
// wrote for each event's delivery (its rows, their index entries): the
// measure of the writes a delivery costs, which no load on the machine
// changes.
func BenchmarkDeliveries(b *testing.B) {
	f := newFixture(b)
	rec := newReceiver(b, status(204))
	f.endpoint(b, rec.URL, "*")
	w := f.worker()
	for range b.N {
		f.paid(b)
	}
	var start string
	if err := f.db.Get(&start, `SELECT pg_current_wal_insert_lsn()::text`); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for {
		fanned, _, err := w.FanOut(ctx, fanOutBatch)
		if err != nil {
			b.Fatal(err)
		}
		due, err := w.DeliverDue(ctx, claimBatch)
		if err != nil {
			b.Fatal(err)
		}
		if fanned == 0 && due == 0 {
			break
		}
	}
	b.StopTimer()
	var wal float64
	if err := f.db.Get(&wal, `SELECT pg_current_wal_insert_lsn() - $1::pg_lsn`, start); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(wal/float64(b.N), "WAL-B/op")
	if got := len(rec.got()); got != b.N {
		b.Fatalf("the receiver got %d events, want %d", got, b.N)
	}
}
