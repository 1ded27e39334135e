// Package metrics is what payreq exposes to Prometheus on
// PAYREQ_METRICS_ADDR: requests by operation and status, their durations,
// the outboxes' backlogs, webhook delivery results, rate-limit refusals,
// the database pool and the Go runtime. Labels never hold an id, a key or
// anything a client chose beyond the operation and status code.
package metrics

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/webhook"
)

// Metrics holds payreq's series.
type Metrics struct {
	Registry       *prometheus.Registry
	Requests       *prometheus.CounterVec   // operation, code
	Duration       *prometheus.HistogramVec // operation
	WebhookResults *prometheus.CounterVec   // result: delivered, retry, failed
	RateLimited    prometheus.Counter
	backlogs       *backlogs
}

// backlogEvery is how often the backlogs are counted at most, however
// often Prometheus scrapes: each count reads two tables.
const backlogEvery = 10 * time.Second

// backlogs are the outboxes' counts, as last read.
type backlogs struct {
	count func(context.Context) (outbox, webhooks float64, err error)
	now   func() time.Time

	mu               sync.Mutex
	at               time.Time // of the last count; zero: none yet
	outbox, webhooks float64
}

// read counts the backlogs unless the last count is less than
// backlogEvery old; -1: the database did not answer in time.
func (b *backlogs) read() (outbox, webhooks float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now := b.now(); b.at.IsZero() || now.Sub(b.at) >= backlogEvery {
		b.at = now
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var err error
		if b.outbox, b.webhooks, err = b.count(ctx); err != nil {
			b.outbox, b.webhooks = -1, -1
		}
	}
	return b.outbox, b.webhooks
}

// countBacklogs counts both backlogs on db, each by its owner, in one
// read-only transaction whose statements take at most two seconds each
// (SET LOCAL: it holds through PgBouncer's transactions).
func countBacklogs(db *sqlx.DB) func(context.Context) (float64, float64, error) {
	return func(ctx context.Context) (outbox, webhooks float64, err error) {
		tx, err := db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return 0, 0, err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `SET LOCAL statement_timeout = '2s'`); err != nil {
			return 0, 0, err
		}
		messages, err := delivery.Pending(ctx, tx)
		if err != nil {
			return 0, 0, err
		}
		deliveries, err := webhook.PendingDeliveries(ctx, tx)
		return float64(messages), float64(deliveries), err
	}
}

// New registers every series: the pool's of db, read at each scrape, and
// the backlogs, counted on backlogDB (a small pool of its own, so that
// scrapes never take the API's connections) at most every backlogEvery by
// the clock now.
func New(db *sql.DB, backlogDB *sql.DB, now func() time.Time) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payreq_http_requests_total", Help: "API requests answered, by operationId and HTTP status code.",
		}, []string{"operation", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "payreq_http_request_duration_seconds", Help: "Time to answer an API request, by operationId.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"operation"}),
		WebhookResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payreq_webhook_deliveries_total", Help: "Webhook delivery attempts by result: delivered, retry (a failure with tries left), failed.",
		}, []string{"result"}),
		RateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payreq_rate_limited_total", Help: "API requests refused with 429 by this instance's per-key rate limit.",
		}),
		backlogs: &backlogs{count: countBacklogs(sqlx.NewDb(backlogDB, "postgres")), now: now},
	}
	backlog := func(name, help string, pick func(outbox, webhooks float64) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return pick(m.backlogs.read()) })
	}
	stat := func(name, help string, v func(sql.DBStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(db.Stats()) })
	}
	counter := func(name, help string, v func(sql.DBStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return v(db.Stats()) })
	}
	reg.MustRegister(m.Requests, m.Duration, m.WebhookResults, m.RateLimited,
		backlog("payreq_outbox_pending", "Pay link messages waiting to be delivered, counted at most every 10 s (-1: the database did not answer).",
			func(outbox, _ float64) float64 { return outbox }),
		backlog("payreq_webhook_deliveries_pending", "Webhook deliveries waiting for an attempt, counted at most every 10 s (-1: the database did not answer).",
			func(_, webhooks float64) float64 { return webhooks }),
		stat("payreq_db_max_open_connections", "The pool's limit.", func(s sql.DBStats) float64 { return float64(s.MaxOpenConnections) }),
		stat("payreq_db_open_connections", "Connections open, in use or idle.", func(s sql.DBStats) float64 { return float64(s.OpenConnections) }),
		stat("payreq_db_in_use_connections", "Connections in use.", func(s sql.DBStats) float64 { return float64(s.InUse) }),
		stat("payreq_db_idle_connections", "Idle connections.", func(s sql.DBStats) float64 { return float64(s.Idle) }),
		counter("payreq_db_wait_count_total", "Times a request waited for a connection.", func(s sql.DBStats) float64 { return float64(s.WaitCount) }),
		counter("payreq_db_wait_seconds_total", "Time spent waiting for connections.", func(s sql.DBStats) float64 { return s.WaitDuration.Seconds() }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Handler serves the series in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// Serve serves /metrics on addr until ctx ends; with a token
// (PAYREQ_METRICS_TOKEN_FILE), only to scrapes that send it as a bearer
// token.
func (m *Metrics) Serve(ctx context.Context, addr, token string, log *slog.Logger) error {
	srv := m.server(addr, token)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("serving metrics", "addr", addr, "bearer_token", token != "")
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

// server is the metrics listener: a scrape takes well under a second, so
// a slow or idle client is cut off soon.
func (m *Metrics) server(addr, token string) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", bearer(token, m.Handler()))
	return &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
}

// bearer lets through only requests with Authorization: Bearer <token>,
// compared in constant time (of the digests, so the length does not show
// either); an empty token lets every request through.
func bearer(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte("Bearer " + token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="payreq metrics"`)
			http.Error(w, "Send Authorization: Bearer <the token in PAYREQ_METRICS_TOKEN_FILE>.", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
