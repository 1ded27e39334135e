package faults

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// creates is a load of invoice creates, each under an Idempotency-Key of its
// own, each sent again with its key (a careful client) until it is answered
// 201 or 200, and what came of them.
type creates struct {
	t       *testing.T
	mid     string
	tok     string
	prefix  string
	sendIt  bool
	retryOn func(answer) bool // which failures a client sends again; 503 and dial errors by default
	// target is the base URL of the instance to send to; it may change.
	target func() string

	mu       sync.Mutex
	ids      map[string]string // key → invoice id, once answered 201 or 200
	first201 map[string]string // key → id answered 201
	statuses map[int]int
	errs     []error
	slowest  time.Duration
	pending  map[string]bool // keys sent but not answered yet
	bodies   map[string]map[string]any
}

func newCreates(t *testing.T, mid, tok, prefix string, sendIt bool, target func() string) *creates {
	return &creates{t: t, mid: mid, tok: tok, prefix: prefix, sendIt: sendIt, target: target,
		ids: map[string]string{}, first201: map[string]string{}, statuses: map[int]int{},
		pending: map[string]bool{}, bodies: map[string]map[string]any{}}
}

// neverReached tells whether a request failed without the process having
// read it: no listener, or a connection it never accepted.
func neverReached(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, errNeverAccepted)
}

func (l *creates) record(key string, a answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.Err != nil {
		l.errs = append(l.errs, a.Err)
	} else {
		l.statuses[a.Status]++
	}
	l.slowest = max(l.slowest, a.Took)
	if a.Status == http.StatusCreated || a.Status == http.StatusOK {
		delete(l.pending, key)
	}
}

// one creates one invoice, sending it again after a 503 or a dial error,
// until it is answered, the answer is something else, or until stops.
func (l *creates) one(c *http.Client, until time.Time) {
	key := uuid.NewString()
	body := invoiceBody(l.mid, l.prefix+"-"+key[:13], l.sendIt)
	l.mu.Lock()
	l.pending[key], l.bodies[key] = true, body
	l.mu.Unlock()
	l.send(c, key, body, until)
}

func (l *creates) send(c *http.Client, key string, body map[string]any, until time.Time) {
	for {
		a := send(c, "POST", l.target()+"/payment-requests", l.tok, body, http.Header{"Idempotency-Key": {key}})
		l.record(key, a)
		switch {
		case a.Status == http.StatusCreated || a.Status == http.StatusOK:
			id := created(l.t, a)
			l.mu.Lock()
			if prev, ok := l.ids[key]; ok && prev != id {
				l.t.Errorf("key %s answered invoice %s, then %s", key, prev, id)
			}
			l.ids[key] = id
			if a.Status == http.StatusCreated {
				if _, twice := l.first201[key]; twice {
					l.t.Errorf("key %s answered 201 twice", key)
				}
				l.first201[key] = id
			}
			l.mu.Unlock()
			return
		case a.Status == http.StatusServiceUnavailable:
			wantUnavailable(l.t, a)
		case a.Err != nil && (neverReached(a.Err) || l.retryOn != nil && l.retryOn(a)):
		default:
			l.t.Errorf("create %s: %v", key, a)
			return
		}
		if time.Now().After(until) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run creates with n clients until ctx ends; each client then finishes the
// create it is on (until the hard deadline).
func (l *creates) run(ctx context.Context, n int, source string, hardDeadline time.Time) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := httpClient(source, 30*time.Second)
			for ctx.Err() == nil {
				l.one(c, hardDeadline)
			}
		}()
	}
	return &wg
}

func (l *creates) summary() (ids map[string]string, statuses map[int]int, errs []error, slowest time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids = map[string]string{}
	for k, v := range l.ids {
		ids[k] = v
	}
	statuses = map[int]int{}
	for k, v := range l.statuses {
		statuses[k] = v
	}
	return ids, statuses, append([]error(nil), l.errs...), l.slowest
}

// checkExactlyOne checks that each key made exactly one invoice, the one it
// was answered, and that every 201 names an invoice that exists.
func (l *creates) checkExactlyOne(t *testing.T, count func(prefix string) map[string]int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) > 0 {
		t.Errorf("%d creates never answered 201 or 200", len(l.pending))
	}
	perNumber := count(l.prefix + "-")
	for key, id := range l.ids {
		number := l.prefix + "-" + key[:13]
		if perNumber[number] != 1 {
			t.Errorf("key %s: %d invoices numbered %s, want exactly 1", key, perNumber[number], number)
		}
		if id == "" {
			t.Errorf("key %s: no id", key)
		}
	}
	if len(perNumber) != len(l.ids)+len(l.pending) {
		t.Errorf("%d invoices in the database for %d keys", len(perNumber), len(l.ids)+len(l.pending))
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}
