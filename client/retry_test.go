package payreq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	payreq "github.com/payreq/payreq/client"
	"github.com/payreq/payreq/gen/client"
)

// fake is an API stand-in that hands out tokens and answers every other
// request with the next of its scripted statuses (the last one repeats).
type fake struct {
	t      *testing.T
	script []int
	wait   string // Retry-After of its 429s and 503s
	mu     sync.Mutex
	tokens int
	calls  []call
}

type call struct {
	header http.Header
	body   string
}

func newFake(t *testing.T, wait string, script ...int) (*fake, *httptest.Server) {
	f := &fake{t: t, script: script, wait: wait}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/oauth/token" {
		f.tokens++
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(client.TokenResponse{
			AccessToken: fmt.Sprintf("token-%d", f.tokens), TokenType: "Bearer", ExpiresIn: 600, Scope: "payments.create",
		})
		return
	}
	f.calls = append(f.calls, call{header: r.Header.Clone(), body: string(body)})
	status := f.script[min(len(f.calls), len(f.script))-1]
	w.Header().Set("Content-Type", "application/problem+json")
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", f.wait)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"type":"about:blank","title":"scripted","status":0}`)
}

func (f *fake) recorded() (int, []call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens, append([]call(nil), f.calls...)
}

func newFakeClient(t *testing.T, srv *httptest.Server) *payreq.Client {
	c, err := payreq.New(srv.URL, "mk_test", "ms_test")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createBody() client.CreatePaymentRequest {
	return client.CreatePaymentRequest{
		MerchantAccountId: uuid.New(), InvoiceNumber: "INV-1", Amount: payreq.MustDecimal("12.30"),
	}
}

// One Idempotency-Key for the request, kept through its 429 retry and its
// retry with a new token after a 401, with the same body each time.
func TestIdempotencyKeyKeptAcrossRetries(t *testing.T) {
	f, srv := newFake(t, "0", 429, 401, 201)
	c := newFakeClient(t, srv)
	resp, err := c.CreatePaymentRequest(context.Background(), nil, createBody())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d, want 201", resp.StatusCode)
	}
	tokens, calls := f.recorded()
	if len(calls) != 3 || tokens != 2 {
		t.Fatalf("%d creates and %d token requests, want 3 and 2", len(calls), tokens)
	}
	key := calls[0].header.Get("Idempotency-Key")
	if _, err := uuid.Parse(key); err != nil {
		t.Fatalf("Idempotency-Key %q is not a UUID", key)
	}
	for i, c := range calls {
		if got := c.header.Get("Idempotency-Key"); got != key {
			t.Errorf("try %d: Idempotency-Key %q, want %q", i+1, got, key)
		}
		if c.body != calls[0].body || !strings.Contains(c.body, `"INV-1"`) {
			t.Errorf("try %d: body %s, want %s", i+1, c.body, calls[0].body)
		}
	}
	if a, b := calls[1].header.Get("Authorization"), calls[2].header.Get("Authorization"); a != "Bearer token-1" || b != "Bearer token-2" {
		t.Errorf("tokens %q then %q, want a new one after the 401", a, b)
	}

	// Each new request gets a key of its own; a caller's key is sent as given.
	f2, srv2 := newFake(t, "0", 201)
	c2 := newFakeClient(t, srv2)
	mine := "order-7781"
	for _, params := range []*client.CreatePaymentRequestParams{nil, {IdempotencyKey: &mine}} {
		resp, err := c2.CreatePaymentRequest(context.Background(), params, createBody())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	_, calls = f2.recorded()
	if k := calls[0].header.Get("Idempotency-Key"); k == "" || k == key {
		t.Errorf("a new request's key %q, want a new one", k)
	}
	if k := calls[1].header.Get("Idempotency-Key"); k != mine {
		t.Errorf("the caller's key was sent as %q", k)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	f, srv := newFake(t, "0", 429)
	c := newFakeClient(t, srv)
	resp, err := c.ListLocationsWithResponse(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != http.StatusTooManyRequests {
		t.Errorf("status %d, want the last 429", resp.StatusCode())
	}
	if _, calls := f.recorded(); len(calls) != 3 {
		t.Errorf("%d tries, want 3", len(calls))
	}
}

// A 503 may come after the change was made, so only the requests that are
// safe to repeat are sent again: not sending a pay link (a second message)
// nor cancelling.
func TestOnlySafeRequestsRetriedAfter503(t *testing.T) {
	id := uuid.New()
	for _, tc := range []struct {
		name  string
		do    func(*payreq.Client) (*http.Response, error)
		tries int
	}{
		{"list locations", func(c *payreq.Client) (*http.Response, error) {
			return c.ListLocations(context.Background())
		}, 2},
		{"remove a saved card", func(c *payreq.Client) (*http.Response, error) {
			return c.DeleteSavedCard(context.Background(), id)
		}, 2},
		{"create", func(c *payreq.Client) (*http.Response, error) {
			return c.CreatePaymentRequest(context.Background(), nil, createBody())
		}, 2},
		{"send the pay link", func(c *payreq.Client) (*http.Response, error) {
			return c.SendPaymentRequest(context.Background(), id)
		}, 1},
		{"cancel", func(c *payreq.Client) (*http.Response, error) {
			return c.CancelPaymentRequest(context.Background(), id)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFake(t, "0", 503, 200)
			resp, err := tc.do(newFakeClient(t, srv))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := http.StatusOK
			if tc.tries == 1 {
				want = http.StatusServiceUnavailable
			}
			if _, calls := f.recorded(); len(calls) != tc.tries || resp.StatusCode != want {
				t.Errorf("%d tries answered %d, want %d answered %d", len(calls), resp.StatusCode, tc.tries, want)
			}
		})
	}
}

// A token request answered 503 is sent again: a repeat only makes another token.
func TestTokenRequestRetriedAfter503(t *testing.T) {
	f := &fake{t: t, script: []int{200}}
	var refused atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" && refused.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	resp, err := newFakeClient(t, srv).ListLocations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if tokens, calls := f.recorded(); resp.StatusCode != http.StatusOK || tokens != 1 || len(calls) != 1 {
		t.Errorf("status %d after %d tokens and %d calls, want 200 after 1 and 1", resp.StatusCode, tokens, len(calls))
	}
}

// A Retry-After that ends past the context's deadline is not waited for.
func TestNoRetryPastTheDeadline(t *testing.T) {
	f, srv := newFake(t, "30", 429, 200)
	c := newFakeClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	resp, err := c.ListLocationsWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != http.StatusTooManyRequests || time.Since(began) > 2*time.Second {
		t.Errorf("status %d after %v, want the 429 at once", resp.StatusCode(), time.Since(began))
	}
	if _, calls := f.recorded(); len(calls) != 1 {
		t.Errorf("%d tries, want 1", len(calls))
	}
}

// A body that net/http cannot send twice by itself is buffered for the retry.
func TestStreamedBodyIsSentAgain(t *testing.T) {
	f, srv := newFake(t, "0", 429, 201)
	c := newFakeClient(t, srv)
	body := struct{ io.Reader }{strings.NewReader(`{"invoiceNumber":"INV-2"}`)} // hides its length
	req, err := http.NewRequest("POST", srv.URL+"/payment-requests", body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, calls := f.recorded()
	if resp.StatusCode != http.StatusCreated || len(calls) != 2 {
		t.Fatalf("status %d after %d tries, want 201 after 2", resp.StatusCode, len(calls))
	}
	for i, c := range calls {
		if c.body != `{"invoiceNumber":"INV-2"}` {
			t.Errorf("try %d: body %q", i+1, c.body)
		}
	}
}

// No token goes to the operations that take none, nor to another host.
func TestNoTokenWhereNoneIsNeeded(t *testing.T) {
	f, srv := newFake(t, "0", 200)
	c := newFakeClient(t, srv)
	if _, err := c.GetHealth(context.Background()); err != nil {
		t.Fatal(err)
	}
	other, srv2 := newFake(t, "0", 200)
	if _, err := c.HTTPClient().Get(srv2.URL + "/locations"); err != nil {
		t.Fatal(err)
	}
	for _, fk := range []*fake{f, other} {
		tokens, calls := fk.recorded()
		if tokens != 0 || len(calls) != 1 || calls[0].header.Get("Authorization") != "" {
			t.Errorf("%d token requests, Authorization %q; want none", tokens, calls[0].header.Get("Authorization"))
		}
	}
}

// Under a base address with a path, the client knows the API's paths all the same.
func TestBaseURLWithAPath(t *testing.T) {
	f := &fake{t: t, script: []int{200, 429, 200}, wait: "0"}
	srv := httptest.NewServer(http.StripPrefix("/payreq", f))
	t.Cleanup(srv.Close)
	c, err := payreq.New(srv.URL+"/payreq/", "mk_test", "ms_test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetHealth(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := c.CreatePaymentRequest(context.Background(), nil, createBody())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tokens, calls := f.recorded()
	if tokens != 1 || len(calls) != 3 || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d token requests, %d calls, status %d; want 1, 3, 200", tokens, len(calls), resp.StatusCode)
	}
	if a := calls[0].header.Get("Authorization"); a != "" {
		t.Errorf("GET /healthz sent Authorization %q", a)
	}
	if k1, k2 := calls[1].header.Get("Idempotency-Key"), calls[2].header.Get("Idempotency-Key"); k1 == "" || k1 != k2 {
		t.Errorf("Idempotency-Key %q then %q, want one key", k1, k2)
	}
}
