package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/rule"
)

// An event is fanned out to each enabled endpoint of its organization
// subscribed to its type (or to "*") that existed before it: not to a
// disabled one, another organization's, or one made after it. The
// fan-out attempts the deliveries it writes at once, without waiting for
// a round of due deliveries.
func TestFanOut(t *testing.T) {
	f := newFixture(t)
	w := f.worker()
	endpoint := func(f *fixture, types ...string) (*receiver, Endpoint) {
		r := newReceiver(t, status(204))
		return r, f.endpoint(t, r.URL+"/hook", types...)
	}
	paidOnly, paidOnlyE := endpoint(f, event.InvoicePaid.Name)
	everything, everythingE := endpoint(f, "*")
	approvedOnly, approvedOnlyE := endpoint(f, event.CardPaymentApproved.Name)
	disabled, disabledE := endpoint(f, "*")
	if _, err := f.store.Update(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, disabledE.ID,
		Change{Status: new(Disabled)}); err != nil {
		t.Fatal(err)
	}
	other := &fixture{db: f.db, store: f.store, clock: f.clock, org: uuid.Must(uuid.NewV7())}
	f.organization(t, other.org, auth.KindMerchant)
	others, _ := endpoint(other, "*")

	paid := f.paid(t)
	approved := appendEvent(t, f, f.org, event.CardPaymentApproved, models.CardPayment{})
	later, _ := endpoint(f, "*")
	if n := fanOut(t, w); n < 2 {
		t.Fatalf("%d events fanned out, want both", n)
	}
	for _, c := range []struct {
		name     string
		r        *receiver
		endpoint uuid.UUID
		want     []uuid.UUID
	}{
		{"invoice.paid", paidOnly, paidOnlyE.ID, []uuid.UUID{paid}},
		{"*", everything, everythingE.ID, []uuid.UUID{paid, approved}},
		{"card_payment.approved", approvedOnly, approvedOnlyE.ID, []uuid.UUID{approved}},
		{"disabled", disabled, disabledE.ID, nil},
		{"another organization's", others, uuid.Nil, nil},
		{"made after the events", later, uuid.Nil, nil},
	} {
		var want []string
		for _, id := range c.want {
			want = append(want, id.String())
			if d := f.delivery(t, id, c.endpoint); d.Status != "delivered" || d.Attempts != 1 {
				t.Errorf("%s: delivery of %s %s after %d attempts, want delivered at the first", c.name, id, d.Status, d.Attempts)
			}
		}
		if got := sortedIDs(c.r); !slices.Equal(got, want) {
			t.Errorf("the endpoint subscribed to %s got %v, want %v", c.name, got, want)
		}
	}
	if n := fanOut(t, w); n != 0 {
		t.Errorf("%d events fanned out again", n)
	}
	if n := deliverDue(t, w); n != 0 {
		t.Errorf("%d deliveries due after the fan-out attempted them", n)
	}
}

// sortedIDs is what the receiver got, in the order of the events' ids (UUIDv7s,
// the order they were made): attempts side by side arrive in any order.
func sortedIDs(rec *receiver) []string {
	got := rec.got()
	slices.Sort(got)
	return got
}

// Instances fanning out side by side claim each event once, and deliver
// it once.
func TestFanOutSideBySide(t *testing.T) {
	f := newFixture(t)
	rec := newReceiver(t, status(204))
	f.endpoint(t, rec.URL+"/all", "*")
	const events = 60
	for range events {
		f.paid(t)
	}
	var mu sync.Mutex
	claimed := 0
	var wg sync.WaitGroup
	for range 3 {
		w := f.worker()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, _, err := w.FanOut(context.Background(), 7)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
				mu.Lock()
				claimed += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var deliveries int
	if err := f.db.Get(&deliveries, `SELECT count(*) FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
		WHERE e.organization_id = $1`, f.org); err != nil {
		t.Fatal(err)
	}
	if claimed < events || deliveries != events {
		t.Errorf("%d claimed, %d deliveries; want each of %d events claimed and delivered once", claimed, deliveries, events)
	}
	if got := sortedIDs(rec); len(got) != events || len(slices.Compact(got)) != events {
		t.Errorf("the endpoint got %d requests of %d events, want each of %d once", len(got), len(slices.Compact(got)), events)
	}
}

// The fan-out attempts its deliveries claimBatch at a time, each group
// held for as many leases as groups up to it; a worker stopped before a
// group began leaves it to the others once its lease is over, and then
// each delivery reaches the receiver once.
func TestFanOutStoppedBetweenGroups(t *testing.T) {
	f := newFixture(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rec := newReceiver(t, func(w http.ResponseWriter) {
		stop() // while the first group is attempted
		w.WriteHeader(http.StatusNoContent)
	})
	e := f.endpoint(t, rec.URL, "*")
	const events = 2*claimBatch + 3
	for range events {
		f.paid(t)
	}
	// A time limit with a fraction of a second: so is the lease (5.3 s).
	w := NewWorker(f.db, open, WorkerConfig{Timeout: 300 * time.Millisecond, AllowPrivate: true}, quiet(), f.clock.now)
	lease := w.lease()
	fanned, attempted, err := w.FanOut(ctx, 100)
	if err != nil || fanned != events || attempted != events {
		t.Fatalf("fan-out: %d events, %d deliveries (%v); want %d each", fanned, attempted, err, events)
	}
	if got := len(rec.got()); got != claimBatch {
		t.Fatalf("the receiver got %d events before the worker stopped, want the first group's %d", got, claimBatch)
	}
	var leases []time.Time
	if err := f.db.Select(&leases, `SELECT next_attempt_at FROM webhook_deliveries
		WHERE endpoint_id = $1 AND status = 'pending' AND attempts = 1 ORDER BY event_id`, e.ID); err != nil {
		t.Fatal(err)
	}
	now := f.clock.now()
	for i, at := range leases {
		if want := now.Add(time.Duration(2+i/claimBatch) * lease); !at.Equal(want) {
			t.Errorf("delivery %d of those not attempted held until %s, want %s", claimBatch+i, at, want)
		}
	}
	if len(leases) != events-claimBatch {
		t.Fatalf("%d deliveries left claimed, want %d", len(leases), events-claimBatch)
	}
	other := f.worker()
	f.clock.advance(2*lease - time.Second)
	if n := deliverDue(t, other); n != 0 {
		t.Errorf("%d deliveries claimed again before their leases ended", n)
	}
	f.clock.advance(lease + 2*time.Second)
	for deliverDue(t, other) > 0 {
	}
	seen := map[string]int{}
	for _, id := range rec.got() {
		seen[id]++
	}
	if len(seen) != events {
		t.Errorf("the receiver got %d events, want %d", len(seen), events)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s received %d times", id, n)
		}
	}
}

// A burst of events is shared by the worker's loops: against a receiver
// that holds each request, more deliveries are under way at once than one
// loop attempts, and each event arrives once.
func TestBurstSharedByTheLoops(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	inFlight, most := 0, 0
	rec := newReceiver(t, func(w http.ResponseWriter) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	f.endpoint(t, rec.URL, "*")
	const events = 64 // 8 groups of attempts: one loop's alone, were a claim to take them all
	for range events {
		f.paid(t)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewWorker(f.db, open, WorkerConfig{Timeout: 5 * time.Second, AllowPrivate: true, PollInterval: 10 * time.Millisecond},
			quiet(), f.clock.now).Run(ctx)
	}()
	for deadline := time.Now().Add(time.Minute); len(rec.got()) < events && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	for _, id := range rec.got() {
		seen[id]++
	}
	if len(seen) != events || len(rec.got()) != events {
		t.Errorf("the receiver got %d requests of %d events, want each of %d once", len(rec.got()), len(seen), events)
	}
	if most <= claimBatch {
		t.Errorf("at most %d deliveries under way at once, want more than one loop's %d", most, claimBatch)
	}
}

// What an endpoint answers decides what becomes of the delivery: a 2xx
// delivers it; any other answer is retried on the schedule (±10%), or
// after the Retry-After of a 429 or 503 when that is later (at most a
// day); a redirect is not followed; a 410 fails it and disables the
// endpoint.
func TestDeliveryAnswers(t *testing.T) {
	f := newFixture(t)
	w := f.worker(time.Minute, time.Hour)
	for _, c := range []struct {
		name       string
		answer     func(w http.ResponseWriter)
		code       int
		wantStatus string
		wantWait   time.Duration // until the next attempt; 0: none
		exact      bool          // the wait is the Retry-After, without jitter
		wantError  string
		disabled   bool
	}{
		{name: "200", answer: status(200), code: 200, wantStatus: "delivered"},
		{name: "204", answer: status(204), code: 204, wantStatus: "delivered"},
		{name: "500", answer: status(500), code: 500, wantStatus: "pending", wantWait: time.Minute, wantError: "HTTP 500"},
		{name: "a redirect", answer: func(w http.ResponseWriter) {
			w.Header().Set("Location", "https://elsewhere.example.com/")
			w.WriteHeader(http.StatusMovedPermanently)
		}, code: 301, wantStatus: "pending", wantWait: time.Minute, wantError: "HTTP 301: redirects are not followed"},
		{name: "429 with Retry-After in seconds", answer: retryAfterAnswer(429, "3600"), code: 429, wantStatus: "pending",
			wantWait: time.Hour, exact: true, wantError: "HTTP 429"},
		{name: "503 with Retry-After a date", answer: retryAfterAnswer(503, f.clock.now().Add(2*time.Hour).UTC().Format(http.TimeFormat)), code: 503,
			wantStatus: "pending", wantWait: 2 * time.Hour, exact: true, wantError: "HTTP 503"},
		{name: "429 with Retry-After past a day", answer: retryAfterAnswer(429, "999999"), code: 429, wantStatus: "pending",
			wantWait: 24 * time.Hour, exact: true, wantError: "HTTP 429"},
		{name: "429 with Retry-After shorter than the schedule", answer: retryAfterAnswer(429, "1"), code: 429, wantStatus: "pending",
			wantWait: time.Minute, wantError: "HTTP 429"},
		{name: "429 with an unreadable Retry-After", answer: retryAfterAnswer(429, "soon"), code: 429, wantStatus: "pending",
			wantWait: time.Minute, wantError: "HTTP 429"},
		{name: "410", answer: status(410), code: 410, wantStatus: "failed", wantError: "HTTP 410: the endpoint is gone; it is disabled.", disabled: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t, c.answer)
			e := f.endpoint(t, r.URL+"/hook", event.InvoicePaid.Name)
			id := f.paid(t)
			fanOut(t, w)
			now := f.clock.now()
			deliverDue(t, w)
			d := f.delivery(t, id, e.ID)
			if d.Status != c.wantStatus || d.Attempts != 1 || text(d.LastError) != c.wantError {
				t.Errorf("delivery %s after %d attempts, last error %q; want %s after 1, %q", d.Status, d.Attempts, text(d.LastError), c.wantStatus, c.wantError)
			}
			if d.LastStatusCode == nil || *d.LastStatusCode != c.code {
				t.Errorf("last status code %v, want %d", d.LastStatusCode, c.code)
			}
			if (d.DeliveredAt != nil) != (c.wantStatus == "delivered") {
				t.Errorf("delivered at %v", d.DeliveredAt)
			}
			if c.wantStatus == "pending" {
				wait := d.NextAttemptAt.Sub(now)
				low, high := c.wantWait*9/10, c.wantWait*11/10
				if c.exact {
					low, high = c.wantWait, c.wantWait
				}
				if wait < low || wait > high {
					t.Errorf("next attempt in %s, want %s to %s", wait, low, high)
				}
			}
			if got := f.read(t, e.ID); (got.Status == Disabled) != c.disabled {
				t.Errorf("endpoint %s (%v), want disabled %v", got.Status, got.DisabledReason, c.disabled)
			} else if c.disabled && *got.DisabledReason != "The endpoint answered 410 Gone." {
				t.Errorf("disabled reason %q", *got.DisabledReason)
			}
			if ids := r.got(); len(ids) != 1 || ids[0] != id.String() {
				t.Errorf("the endpoint got %v, want the event %s once", ids, id)
			}
		})
	}
}

func retryAfterAnswer(code int, v string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", v)
		w.WriteHeader(code)
	}
}

func text(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// A failing delivery is attempted once more for each wait of the
// schedule, not before the wait is over, then fails; the receiver gets the
// same event (webhook-id) each time.
func TestDeliveryRetriedOnTheSchedule(t *testing.T) {
	f := newFixture(t)
	w := f.worker(time.Minute, 10*time.Minute)
	r := newReceiver(t, status(500))
	e := f.endpoint(t, r.URL, "*")
	id := f.paid(t)
	fanOut(t, w)
	for i, step := range []struct {
		advance    time.Duration
		wantStatus string
		attempts   int
	}{
		{0, "pending", 1},
		{50 * time.Second, "pending", 1}, // before the first wait is over (at most 66 s)
		{20 * time.Second, "pending", 2},
		{8 * time.Minute, "pending", 2}, // before the second (at least 9 min)
		{4 * time.Minute, "failed", 3},
		{24 * time.Hour, "failed", 3},
	} {
		f.clock.advance(step.advance)
		deliverDue(t, w)
		if d := f.delivery(t, id, e.ID); d.Status != step.wantStatus || d.Attempts != step.attempts {
			t.Errorf("step %d: %s after %d attempts, want %s after %d", i, d.Status, d.Attempts, step.wantStatus, step.attempts)
		}
	}
	if ids := r.got(); len(ids) != 3 || ids[0] != id.String() || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Errorf("the endpoint got %v, want the event three times", ids)
	}
	if got := f.read(t, e.ID); got.Status != Enabled {
		t.Errorf("endpoint %s after one failed delivery, want enabled", got.Status)
	}
}

// An endpoint with no successful delivery for five days since its first
// failure is disabled at its next failure; a success in between starts
// the count again. A delivery to a disabled endpoint fails.
func TestFiveDaysOfFailureDisable(t *testing.T) {
	f := newFixture(t)
	w := f.worker(time.Hour)
	failing := newReceiver(t, status(500))
	recovers := newReceiver(t, status(500))
	dead := f.endpoint(t, failing.URL, "*")
	alive := f.endpoint(t, recovers.URL, "*")
	round := func() uuid.UUID {
		t.Helper()
		id := f.paid(t)
		fanOut(t, w)
		deliverDue(t, w)
		return id
	}
	round() // both fail: failing since now
	f.clock.advance(4 * 24 * time.Hour)
	recovers.set(status(200))
	round()
	if got := f.read(t, dead.ID); got.Status != Enabled {
		t.Fatalf("disabled after 4 days of failure: %v", got.DisabledReason)
	}
	recovers.set(status(500))
	f.clock.advance(24 * time.Hour)
	last := round()
	got := f.read(t, dead.ID)
	if got.Status != Disabled || got.DisabledReason == nil || *got.DisabledReason != "No delivery succeeded for 5 days." {
		t.Errorf("after 5 days of failure: %s (%v), want disabled", got.Status, got.DisabledReason)
	}
	if got := f.read(t, alive.ID); got.Status != Enabled {
		t.Errorf("the endpoint that succeeded a day ago was disabled: %v", got.DisabledReason)
	}
	// Its pending delivery fails at its next attempt, without a request.
	before := len(failing.got())
	f.clock.advance(2 * time.Hour)
	deliverDue(t, w)
	if d := f.delivery(t, last, dead.ID); d.Status != "failed" || text(d.LastError) != "The endpoint is disabled." {
		t.Errorf("delivery to the disabled endpoint: %s, %q", d.Status, text(d.LastError))
	}
	if n := len(failing.got()); n != before {
		t.Errorf("the disabled endpoint got %d more requests", n-before)
	}
}

// Workers delivering side by side deliver each event once.
func TestWorkersDeliverEachOnce(t *testing.T) {
	f := newFixture(t)
	r := newReceiver(t, func(w http.ResponseWriter) {
		time.Sleep(5 * time.Millisecond) // attempts overlap
		w.WriteHeader(http.StatusOK)
	})
	e := f.endpoint(t, r.URL, "*")
	const events = 40
	ids := map[string]bool{}
	for range events {
		ids[f.paid(t).String()] = true
	}
	fanOut(t, f.worker())
	var wg sync.WaitGroup
	for range 3 {
		w := f.worker()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := w.DeliverDue(context.Background(), 4)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for _, id := range r.got() {
		seen[id]++
	}
	for id := range ids {
		if seen[id] != 1 {
			t.Errorf("event %s delivered %d times", id, seen[id])
		}
	}
	var delivered int
	if err := f.db.Get(&delivered, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'delivered' AND attempts = 1`,
		e.ID); err != nil || delivered != events {
		t.Errorf("%d deliveries delivered at the first attempt (%v), want %d", delivered, err, events)
	}
}

// An endpoint URL must be https, without credentials or a fragment, with
// a port in range, and on the public internet: not an address, nor a name
// that resolves to one, off it. A refusal names the url, never what the
// name resolved to, and nothing is written.
func TestEndpointAddressChecks(t *testing.T) {
	f := newFixture(t)
	names := map[string][]string{
		"hooks.example.com":    {"93.184.216.34"},
		"internal.example.com": {"192.168.1.5"},
		"mixed.example.com":    {"93.184.216.34", "10.0.0.1"},
		"mapped.example.com":   {"::ffff:127.0.0.1"},
	}
	f.store.AllowPrivate = false
	f.store.Resolver = resolver(func(_ context.Context, _, host string) ([]netip.Addr, error) {
		addrs, ok := names[host]
		if !ok {
			return nil, &net.DNSError{IsNotFound: true}
		}
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	})
	const public = "must be on the public internet"
	for _, c := range []struct {
		url  string
		want string // "" when taken
	}{
		{"https://hooks.example.com/payreq", ""},
		{"https://93.184.216.34:8443/payreq", ""},
		{"https://nowhere.example.com/", ""}, // checked again at each delivery
		{"http://hooks.example.com/payreq", "must be an https:// URL"},
		{"hooks.example.com/payreq", "must be an absolute https:// URL"},
		{"https://user:secret@hooks.example.com/", "must not hold a user name or password"},
		{"https://hooks.example.com/#top", "must not have a fragment"},
		{"https://hooks.example.com:0/", "must have a port from 1 to 65535"},
		{"https://hooks.example.com:65536/", "must have a port from 1 to 65535"},
		{"https://hooks.example.com/" + strings.Repeat("a", MaxURL), "must be at most 2048 characters"},
		{"https://127.0.0.1/", public},
		{"https://10.1.2.3/", public},
		{"https://100.64.0.1/", public},
		{"https://169.254.169.254/latest/meta-data", public},
		{"https://[::1]/", public},
		{"https://[::ffff:192.168.1.1]/", public},
		{"https://[fe80::1%25eth0]/", "must not name an IPv6 zone"},
		{"https://internal.example.com/", public},
		{"https://mixed.example.com/", public},
		{"https://mapped.example.com/", public},
	} {
		t.Run(c.url[:min(len(c.url), 60)], func(t *testing.T) {
			var before int
			if err := f.db.Get(&before, `SELECT count(*) FROM webhook_endpoints`); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := f.store.Create(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, NewEndpoint{URL: c.url, EventTypes: []string{"*"}}, nil)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e := rule.As(err)
			if e == nil || e.Kind != rule.Invalid || len(e.Fields["url"]) != 1 || !strings.HasPrefix(e.Fields["url"][0], c.want) {
				t.Fatalf("%v; want url %q", err, c.want)
			}
			if strings.Contains(e.Error(), "192.168") || strings.Contains(e.Error(), "10.0.0.1") {
				t.Errorf("the refusal tells the address: %q", e.Error())
			}
			var after int
			if err := f.db.Get(&after, `SELECT count(*) FROM webhook_endpoints`); err != nil || after != before {
				t.Errorf("%d endpoints after the refusal, want %d", after, before)
			}
		})
	}
	// A change of the URL is checked the same way.
	e := f.endpoint(t, "https://hooks.example.com/payreq", "*")
	if _, err := f.store.Update(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, e.ID,
		Change{URL: new("https://internal.example.com/")}); !rule.Is(err, rule.Invalid) {
		t.Errorf("changed to a private name: %v", err)
	}
	if got := f.read(t, e.ID); got.URL != "https://hooks.example.com/payreq" {
		t.Errorf("URL %s after a refused change", got.URL)
	}
}

// A delivery connects only to a public address, whatever its URL says now
// (one stored before a rule existed, or a name that came to resolve to a
// private address): it fails, and the receiver gets nothing.
func TestDeliveryDialsPublicAddressesOnly(t *testing.T) {
	f := newFixture(t)
	r := newReceiver(t, status(200))
	e := f.endpoint(t, r.URL, "*") // a loopback address, taken in development
	id := f.paid(t)
	w := NewWorker(f.db, open, WorkerConfig{Timeout: 5 * time.Second, Schedule: []time.Duration{time.Minute}}, quiet(), f.clock.now)
	fanOut(t, w)
	deliverDue(t, w)
	if d := f.delivery(t, id, e.ID); d.Status != "pending" || text(d.LastError) != "not a public internet address" {
		t.Errorf("delivery %s, %q; want a retry, not a public internet address", d.Status, text(d.LastError))
	}
	if ids := r.got(); len(ids) != 0 {
		t.Errorf("the loopback receiver got %v", ids)
	}
}

// A subscription needs the permission protecting the data of the types it
// names ("*": every type the organization's kind receives); the refusal
// names it, and nothing is written.
func TestSubscriptionNeedsPermission(t *testing.T) {
	f := newFixture(t)
	reseller := &fixture{db: f.db, store: f.store, clock: f.clock, org: uuid.Must(uuid.NewV7())}
	f.organization(t, reseller.org, auth.KindReseller)
	for _, c := range []struct {
		name        string
		org         uuid.UUID
		permissions []string
		types       []string
		want        string // the permission lacked; "" when taken
	}{
		{"payments' events with payments.view", f.org, []string{auth.WebhooksManage, auth.PaymentsView}, []string{"invoice.paid"}, ""},
		{"payments' events without", f.org, []string{auth.WebhooksManage}, []string{"invoice.paid"}, auth.PaymentsView},
		{"every type without payments.view", f.org, []string{auth.WebhooksManage}, []string{"*"}, auth.PaymentsView},
		{"pings alone", f.org, []string{auth.WebhooksManage}, []string{"webhook.ping"}, ""},
		{"a reseller's every type", reseller.org, []string{auth.WebhooksManage}, []string{"*"}, auth.ApplicationsView},
		{"a reseller's every type with applications.view", reseller.org, []string{auth.WebhooksManage, auth.ApplicationsView}, []string{"*"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := f.store.Create(context.Background(), Actor{OrganizationID: c.org, Permissions: c.permissions},
				NewEndpoint{URL: "https://hooks.example.com/" + uuid.NewString(), EventTypes: c.types}, nil)
			if c.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if e := rule.As(err); e == nil || e.Kind != rule.Forbidden || e.Permission != c.want || !strings.Contains(e.Message, c.want) {
				t.Errorf("%v; want a refusal naming %s", err, c.want)
			}
		})
	}
}

// Pings and redeliveries are limited per endpoint, MaxRequestedSends a
// minute: the next is refused with the wait until the oldest of the
// minute is a minute old.
func TestRequestedSendsLimited(t *testing.T) {
	f := newFixture(t)
	e := f.endpoint(t, "https://hooks.example.com/limited", "*")
	for i := range MaxRequestedSends {
		if _, err := f.store.Ping(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, e.ID); err != nil {
			t.Fatalf("ping %d: %v", i+1, err)
		}
		f.clock.advance(time.Second)
	}
	_, err := f.store.Ping(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, e.ID)
	if e := rule.As(err); e == nil || e.Kind != rule.Limited || e.RetryAfter != 50*time.Second {
		t.Fatalf("ping past the limit: %v; want Limited, retry after 50s", err)
	}
	f.clock.advance(50 * time.Second)
	if _, err := f.store.Ping(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, e.ID); err != nil {
		t.Errorf("ping once the oldest is a minute old: %v", err)
	}
	if _, err := f.store.Ping(context.Background(), Actor{OrganizationID: f.org, Permissions: permissions(auth.KindMerchant)}, uuid.New()); !errors.Is(err, ErrEndpointNotFound) {
		t.Errorf("ping of an unknown endpoint: %v", err)
	}
}
