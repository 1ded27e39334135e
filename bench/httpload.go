package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// request is one HTTP request of a scenario and the status it must get.
type request struct {
	method, path string
	body         []byte
	header       http.Header
	want         int
	// then, when set, follows the answer before the client's next
	// request, unmeasured: waits on c for the outcome a wanted answer
	// (body) set going, and gives back what the request held whatever
	// err, the answer's failure, is.
	then func(c *conn, body []byte, err error) error
}

// result is what one run measured.
type result struct {
	requests int           // requests started and finished in the window
	window   time.Duration // the measured window
	p50, p99 time.Duration
	errors   int           // answers with another status than wanted, or failures
	firstErr string        // the first of them, for the log
	all      int           // requests answered in the whole run, warm-up included
	cpu      time.Duration // CPU time the server used in the window, when known
	dbCPU    time.Duration // CPU time PostgreSQL used in it
	// Of it, its client sessions' (backends), background processes aside.
	sessionsCPU time.Duration
	loadCPU     time.Duration // CPU time the load program (or pgbench) used in it
	stmts       stmts         // what pg_stat_statements counted in it
}

// cpuPerRequest is the server's CPU time per answered request.
func (r result) cpuPerRequest() time.Duration { return r.perRequest(r.cpu) }

// perRequest divides a time of the window by the requests started in it.
func (r result) perRequest(d time.Duration) time.Duration {
	if r.requests == 0 {
		return 0
	}
	return d / time.Duration(r.requests)
}

// requestSeq numbers every request of the run, so invoice numbers and
// idempotency keys never repeat from one scenario or server to the next.
var requestSeq atomic.Int64

func (r result) rate() float64 { return float64(r.requests) / r.window.Seconds() }

// recorder gathers latencies of requests that started inside the window.
type recorder struct {
	from, to time.Time
	mu       sync.Mutex
	lat      []time.Duration
	errors   int
	firstErr string
	all      int
}

func (r *recorder) add(start time.Time, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all++
	if start.Before(r.from) || start.After(r.to) {
		return
	}
	if err != nil {
		if r.errors == 0 {
			r.firstErr = err.Error()
		}
		r.errors++
		return
	}
	r.lat = append(r.lat, d)
}

// fail counts err, when not nil, as an error of the request started at
// start (its outcome, after its answer was counted).
func (r *recorder) fail(start time.Time, err error) {
	if err == nil || start.Before(r.from) || start.After(r.to) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errors == 0 {
		r.firstErr = err.Error()
	}
	r.errors++
}

func (r *recorder) result() result {
	slices.Sort(r.lat)
	res := result{requests: len(r.lat), window: r.to.Sub(r.from), errors: r.errors, firstErr: r.firstErr, all: r.all}
	if n := len(r.lat); n > 0 {
		res.p50 = r.lat[(n-1)*50/100]
		res.p99 = r.lat[(n-1)*99/100]
	}
	return res
}

// conn is one keep-alive HTTP/1.1 connection of the load, spoken directly:
// net/http's client machinery (a transport, two goroutines and channels per
// connection) would cost the machine more than the server's own HTTP
// handling, and server, load and database share its cores.
type conn struct {
	base string // http://host:port
	c    net.Conn
	r    *bufio.Reader
	buf  []byte
}

func (c *conn) close() {
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// do sends rq and reads the whole answer, returned; it (re)connects when
// needed.
func (c *conn) do(rq request) ([]byte, error) {
	host := strings.TrimPrefix(c.base, "http://")
	if c.c == nil {
		nc, err := net.Dial("tcp", host)
		if err != nil {
			return nil, err
		}
		c.c, c.r = nc, bufio.NewReaderSize(nc, 16<<10)
	}
	b := append(c.buf[:0], rq.method...)
	b = append(b, ' ')
	b = append(b, rq.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for k, vs := range rq.header {
		for _, v := range vs {
			b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
		}
	}
	if rq.body != nil || rq.method == "POST" {
		b = strconv.AppendInt(append(b, "Content-Length: "...), int64(len(rq.body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(append(b, "\r\n"...), rq.body...)
	c.buf = b
	if _, err := c.c.Write(b); err != nil {
		c.close()
		return nil, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.close()
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != rq.want {
		return nil, fmt.Errorf("%s %s: status %d, want %d: %.300s", rq.method, rq.path, resp.StatusCode, rq.want, body)
	}
	return body, nil
}

// outcome is what waitFor reads of a terminal payment or a recurring
// invoice.
type outcome struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	IssuedCount int    `json:"issuedCount"`
}

// waitFor reads the resource at prefix + the id of created (an answer's
// body) every 200 ms, for at most a minute, until done says its outcome
// is there.
func waitFor(c *conn, auth http.Header, prefix string, created []byte, done func(outcome) (bool, error)) error {
	var v outcome
	if err := json.Unmarshal(created, &v); err != nil {
		return err
	}
	rq := request{method: "GET", path: prefix + v.ID, header: auth, want: http.StatusOK}
	for t0 := time.Now(); time.Since(t0) < time.Minute; time.Sleep(200 * time.Millisecond) {
		body, err := c.do(rq)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		if ok, err := done(v); ok || err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: no outcome in a minute", rq.path)
}

// closedLoop runs clients workers that each send the next request as soon as
// the last is answered, for warmup+window, and measures the window.
func closedLoop(ctx context.Context, base string, clients int, warmup, window time.Duration, next func(n int64) request) result {
	start := time.Now()
	rec := &recorder{from: start.Add(warmup), to: start.Add(warmup + window)}
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &conn{base: base}
			defer c.close()
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(rec.to) {
					return
				}
				rq := next(requestSeq.Add(1))
				body, err := c.do(rq)
				rec.add(t0, time.Since(t0), err)
				if rq.then != nil {
					rec.fail(t0, rq.then(c, body, err))
				}
			}
		}()
	}
	wg.Wait()
	return rec.result()
}

// openLoop sends requests at a mean rate whatever the answers do, from up to
// workers connections, and measures each latency from the moment the request
// was due, so a stall is counted in full (no coordinated omission). Requests
// fall due as independent clients' would, and as pgbench -R schedules them:
// exponential gaps (a Poisson process), not a metronome.
func openLoop(ctx context.Context, base string, workers int, rate float64, warmup, window time.Duration, next func(n int64) request) result {
	start := time.Now()
	rec := &recorder{from: start.Add(warmup), to: start.Add(warmup + window)}
	due := make(chan time.Time, 100000)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &conn{base: base}
			defer c.close()
			for at := range due {
				_, err := c.do(next(requestSeq.Add(1)))
				rec.add(at, time.Since(at), err)
			}
		}()
	}
	// Every millisecond, hand out what fell due since the last tick.
	for at := start; ctx.Err() == nil; {
		if at.After(rec.to) {
			break
		}
		if at.After(time.Now()) {
			time.Sleep(time.Millisecond)
			continue
		}
		due <- at
		at = at.Add(time.Duration(rand.ExpFloat64() / rate * float64(time.Second)))
	}
	close(due)
	wg.Wait()
	return rec.result()
}
