// Package metrics is what payreq exposes to Prometheus on
// PAYREQ_METRICS_ADDR: requests by operation and status, their durations,
// the outboxes' backlogs, webhook delivery results, rate-limit refusals,
// the database pool and the Go runtime. Labels never hold an id, a key or
// anything a client chose beyond the operation and status code.
package metrics

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds payreq's series.
type Metrics struct {
	Registry       *prometheus.Registry
	Requests       *prometheus.CounterVec   // operation, code
	Duration       *prometheus.HistogramVec // operation
	WebhookResults *prometheus.CounterVec   // result: delivered, retry, failed
	RateLimited    prometheus.Counter
}

// New registers every series; db's pool and backlogs are read at each scrape.
func New(db *sql.DB) *Metrics {
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
	}
	backlog := func(name, help, query string) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var n float64
			if err := db.QueryRowContext(ctx, query).Scan(&n); err != nil {
				return -1
			}
			return n
		})
	}
	stat := func(name, help string, v func(sql.DBStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(db.Stats()) })
	}
	counter := func(name, help string, v func(sql.DBStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return v(db.Stats()) })
	}
	reg.MustRegister(m.Requests, m.Duration, m.WebhookResults, m.RateLimited,
		backlog("payreq_outbox_pending", "Pay link messages waiting to be delivered (-1: the database did not answer).",
			`SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL`),
		backlog("payreq_webhook_deliveries_pending", "Webhook deliveries waiting for an attempt (-1: the database did not answer).",
			`SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'`),
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

// Serve serves /metrics on addr until ctx ends.
func (m *Metrics) Serve(ctx context.Context, addr string, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("serving metrics", "addr", addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
