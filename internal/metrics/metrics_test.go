package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

func openDB(t *testing.T) *sqlx.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), testDSN, postgres.Pool{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// scrape asks srv for /metrics with the Authorization header given.
func scrape(t *testing.T, srv *httptest.Server, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// With a token, the metrics listener answers only scrapes that send it as
// a bearer token; its server has read, write and idle timeouts.
func TestListenerWantsTheBearerToken(t *testing.T) {
	db := openDB(t)
	m := New(db.DB, db.DB, time.Now)
	const token = "0123456789abcdef0123456789abcdef"
	s := m.server("127.0.0.1:0", token)
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("timeouts: header %v, read %v, write %v, idle %v", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
	srv := httptest.NewServer(s.Handler)
	defer srv.Close()
	for _, auth := range []string{"", "Bearer", "Bearer " + token[:31], "Bearer " + token + "x", "Basic " + token, token} {
		if code, body := scrape(t, srv, auth); code != http.StatusUnauthorized || strings.Contains(body, "payreq_") {
			t.Errorf("Authorization %q: %d %.60q, want 401 and no series", auth, code, body)
		}
	}
	if code, body := scrape(t, srv, "Bearer "+token); code != http.StatusOK || !strings.Contains(body, "payreq_outbox_pending 0") {
		t.Errorf("the right token: %d %.200q", code, body)
	}

	// Without a token (a loopback address), every scrape is answered.
	open := httptest.NewServer(m.server("127.0.0.1:0", "").Handler)
	defer open.Close()
	if code, _ := scrape(t, open, ""); code != http.StatusOK {
		t.Errorf("no token: %d", code)
	}
}

// The backlogs are counted at most once per 10 s, however often
// Prometheus scrapes: scrapes in between get the counts of the last one.
func TestBacklogsCountedAtMostEvery10s(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	m := New(db.DB, db.DB, func() time.Time { return now })
	queries := 0
	count := m.backlogs.count
	m.backlogs.count = func(ctx context.Context) (float64, float64, error) {
		queries++
		return count(ctx)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 1}, {0, 1}, {time.Second, 1}, {8 * time.Second, 1}, {time.Second, 2}, {0, 2}, {time.Minute, 3}} {
		now = now.Add(step.advance)
		if code, body := scrape(t, srv, ""); code != http.StatusOK || !strings.Contains(body, "payreq_webhook_deliveries_pending 0") {
			t.Fatalf("scrape: %d %.200q", code, body)
		}
		if queries != step.want {
			t.Errorf("after %v more: %d counts, want %d", step.advance, queries, step.want)
		}
	}
}
