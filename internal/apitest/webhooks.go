package apitest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/webhook"
)

// Hook is one webhook request a Receiver got.
type Hook struct {
	Header http.Header
	Body   []byte
}

// Receiver is an endpoint in the test process: it records every request
// and answers with Answer (200 when nil).
type Receiver struct {
	URL    string
	mu     sync.Mutex
	hooks  []Hook
	Answer func(n int, w http.ResponseWriter, r *http.Request) // n counts requests, from 1
}

// NewReceiver starts a receiver, stopped when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	rc := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.hooks = append(rc.hooks, Hook{Header: r.Header.Clone(), Body: body})
		n, answer := len(rc.hooks), rc.Answer
		rc.mu.Unlock()
		if answer != nil {
			answer(n, w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL + "/hooks"
	return rc
}

// Hooks are the requests received so far.
func (rc *Receiver) Hooks() []Hook {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Hook(nil), rc.hooks...)
}

// Webhooks is a delivery worker of the env's instance, on its clock.
func (e *Env) Webhooks(cfg webhook.WorkerConfig) *webhook.Worker {
	log := slog.New(slog.NewJSONHandler(e.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return webhook.NewWorker(e.App.DB, e.App.Vault.Open, cfg, log, e.Clock.Now)
}

// Deliver fans every event out into its deliveries (the fan-out attempts
// those it claims at once), then attempts every due delivery once, one
// after the other, and returns how many it attempted.
func Deliver(t testing.TB, w *webhook.Worker) int {
	t.Helper()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for {
			fanned, attempted, err := w.FanOut(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			n += attempted
			if fanned == 0 {
				break
			}
		}
		did, err := w.DeliverDue(ctx, 1)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if did == 0 {
			return n
		}
		n++
	}
}
