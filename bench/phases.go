package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

// pgbench runs scenario key's script against the big database with no
// server running, records it as target and leaves the database quiet.
// rate > 0 runs it open-loop; cpus, when not empty, pins pgbench.
func (h *harness) pgbench(ctx context.Context, key, target string, rate float64, cpus string) (result, error) {
	o := h.o
	vars, err := h.pgbenchVars(ctx, key)
	if err != nil {
		return result{}, err
	}
	if rate > 0 {
		logf("pgbench   %-12s open loop at %.0f/s", key, rate)
	} else {
		logf("pgbench   %-12s %d clients %s", key, o.clients, cpus)
	}
	var pid atomic.Int64
	wait := h.overWindow(ctx, h.big.dsn, func() counters {
		db, sessions := databaseCPU(o.dataDir)
		return counters{db: db, sessions: sessions, load: cpuTime(int(pid.Load()))}
	})
	scripts := []string{filepath.Join(o.benchDir, "pgbench", key+".sql")}
	if key == "mixed" {
		// The soak's mix, by pgbench's script weights.
		dir := filepath.Join(o.benchDir, "pgbench")
		scripts = []string{filepath.Join(dir, "create.sql@2"), filepath.Join(dir, "get.sql@1"), filepath.Join(dir, "list_first.sql@1")}
	}
	res, err := pgbench(ctx, mustBin("pgbench"), h.big.dsn, scripts, o.pgbenchMode, vars, o.clients, rate, o.warmup, o.window, cpus,
		func(p int) { pid.Store(int64(p)) })
	c, st, werr := wait()
	if err == nil {
		err = werr
	}
	if err != nil {
		return result{}, err
	}
	res.dbCPU, res.sessionsCPU, res.loadCPU, res.stmts = c.db, c.sessions, c.load, st
	h.report.add(key, target, res, 0)
	return res, h.quiesce(ctx, h.big)
}

// eventsPhase runs create and get against p with one webhook endpoint
// subscribed to every event type, on a receiver in this program that
// answers 204 to each delivery.
func (h *harness) eventsPhase(ctx context.Context, p *process) error {
	var received atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	tok, err := h.token(ctx, p.url, h.key)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"url": "http://" + l.Addr().String() + "/payreq", "eventTypes": []string{"*"}})
	req, _ := http.NewRequestWithContext(ctx, "POST", p.url+"/webhook-endpoints", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("webhook endpoint: %d %s", resp.StatusCode, b)
	}
	for _, key := range []string{"create", "get"} {
		if !h.wanted(key) {
			continue
		}
		if tok, err = h.token(ctx, p.url, h.key); err != nil {
			return err
		}
		sc := h.scenario(key, h.big, p.url, tok)
		logf("events    %-12s %d clients", key, h.o.clients)
		before := received.Load()
		res, rss, err := h.measure(ctx, p, h.big, func() result { return closedLoop(ctx, p.url, h.o.clients, h.o.warmup, h.o.window, sc.next) })
		if err != nil {
			return err
		}
		h.report.add(key, "events", res, rss)
		h.report.delivered[key] = append(h.report.delivered[key], received.Load()-before)
		// What the run left to deliver goes before the next run.
		t0 := time.Now()
		if err := drainDeliveries(ctx, h.big.dsn); err != nil {
			return err
		}
		h.report.drained[key] = append(h.report.drained[key], time.Since(t0))
	}
	return nil
}

// drainDeliveries waits until every event is fanned out and no webhook
// delivery is pending (two minutes at most).
func drainDeliveries(ctx context.Context, dsn string) error {
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var pending int
		if err := db.GetContext(ctx, &pending, `SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')
			+ (SELECT count(*) FROM events_to_fan_out)`); err != nil {
			return err
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("events run: %d webhook deliveries still pending after 2 minutes", pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pinnedPhase measures get and create with the database on CPU 0 and
// pgbench, or payreq and this load program, on CPU 1; then gives every
// process both CPUs again.
func (h *harness) pinnedPhase(ctx context.Context) (err error) {
	if err := pinDatabase(h.o.dataDir, "0"); err != nil {
		return err
	}
	if err := pin(os.Getpid(), "1"); err != nil {
		return err
	}
	defer func() {
		if e := pinDatabase(h.o.dataDir, "0-1"); err == nil {
			err = e
		}
		if e := pin(os.Getpid(), "0-1"); err == nil {
			err = e
		}
	}()
	keys := []string{}
	for _, key := range []string{"get", "create", "list_first"} {
		if h.wanted(key) {
			keys = append(keys, key)
		}
	}
	for _, key := range keys {
		if _, err := h.pgbench(ctx, key, "pgbench-pinned", 0, "1"); err != nil {
			return err
		}
	}
	p, err := h.startPayreq(h.big, "pinned", true, "1")
	if err != nil {
		return err
	}
	defer p.stop()
	for _, key := range keys {
		tok, err := h.token(ctx, p.url, h.key)
		if err != nil {
			return err
		}
		sc := h.scenario(key, h.big, p.url, tok)
		if err := h.quiesce(ctx, h.big); err != nil {
			return err
		}
		logf("pinned    %-12s %d clients", key, h.o.clients)
		res, rss, err := h.measure(ctx, p, h.big, func() result { return closedLoop(ctx, p.url, h.o.clients, h.o.warmup, h.o.window, sc.next) })
		if err != nil {
			return err
		}
		h.report.add(key, "pinned", res, rss)
	}
	return nil
}
