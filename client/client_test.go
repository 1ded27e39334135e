package payreq_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	openapi_types "github.com/oapi-codegen/runtime/types"

	payreq "github.com/payreq/payreq/client"
	"github.com/payreq/payreq/gen/client"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/pgtest"
)

// recorder sees every request the client sends and the status it got back.
type recorder struct {
	base http.RoundTripper
	// answered, when set, is called with each exchange once it is answered.
	answered func(exchange)
	mu       sync.Mutex
	sent     []exchange
}

type exchange struct {
	method, path string
	header       http.Header
	status       int
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	x := exchange{method: req.Method, path: req.URL.Path, header: req.Header.Clone()}
	if err == nil {
		x.status = resp.StatusCode
	}
	r.mu.Lock()
	r.sent = append(r.sent, x)
	r.mu.Unlock()
	if r.answered != nil {
		r.answered(x)
	}
	return resp, err
}

// count is how many requests went to path and were answered status (0: any).
func (r *recorder) count(method, path string, status int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.sent {
		if x.method == method && x.path == path && (status == 0 || x.status == status) {
			n++
		}
	}
	return n
}

func (r *recorder) tokenRequests() int { return r.count("POST", "/oauth/token", 0) }

// newClient is a client of env with its own source address (the token
// endpoint limits requests per address) and a recorder under it.
func newClient(t *testing.T, env *apitest.Env, keyID, secret string, opts ...payreq.Option) (*payreq.Client, *recorder) {
	t.Helper()
	hc := apitest.ClientFrom(apitest.SourceAddress())
	rec := &recorder{base: hc.Transport}
	hc.Transport = rec
	c, err := payreq.New(env.URL, keyID, secret, append([]payreq.Option{payreq.WithHTTPClient(hc)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

func listAccounts(t *testing.T, c *payreq.Client) []client.MerchantAccount {
	t.Helper()
	resp, err := c.ListAccountsWithResponse(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("GET /accounts: %d %s", resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

func TestTokenReusedUntilShortlyBeforeExpiry(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	c, rec := newClient(t, env, seed.Merchant.KeyID, seed.Merchant.Secret, payreq.WithClock(env.Clock.Now))

	for range 20 {
		listAccounts(t, c)
	}
	if n := rec.tokenRequests(); n != 1 {
		t.Fatalf("20 requests made %d token requests, want 1", n)
	}
	env.Clock.Advance(539 * time.Second) // 61 s left: still reused
	listAccounts(t, c)
	if n := rec.tokenRequests(); n != 1 {
		t.Fatalf("at 539 s: %d token requests, want 1", n)
	}
	env.Clock.Advance(2 * time.Second) // 59 s left: inside the 60 s margin
	listAccounts(t, c)
	listAccounts(t, c)
	if n := rec.tokenRequests(); n != 2 {
		t.Fatalf("at 541 s: %d token requests, want 2", n)
	}
	if n := rec.count("GET", "/accounts", http.StatusUnauthorized); n != 0 {
		t.Errorf("%d requests were answered 401, want none", n)
	}
	tok, err := c.Token(context.Background())
	if err != nil || tok.OrganizationId != seed.Merchant.OrganizationID {
		t.Errorf("Token: organization %v, %v; want %v", tok.OrganizationId, err, seed.Merchant.OrganizationID)
	}
}

// After expiry, 50 goroutines at once cause one token request, whether the
// client's clock tells it the token is due or the server's 401 does.
func TestOneRenewalForManyGoroutines(t *testing.T) {
	for _, tc := range []struct {
		name        string
		clientClock bool
		want401     bool
	}{
		{name: "client sees the expiry", clientClock: true},
		{name: "server answers 401", clientClock: false, want401: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := apitest.New(t, testDSN, apitest.Options{})
			seed := env.Seed()
			var opts []payreq.Option
			if tc.clientClock {
				opts = append(opts, payreq.WithClock(env.Clock.Now))
			}
			c, rec := newClient(t, env, seed.Merchant.KeyID, seed.Merchant.Secret, opts...)
			listAccounts(t, c)
			env.Clock.Advance(601 * time.Second)

			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, 50)
			for range 50 {
				wg.Go(func() {
					<-start
					resp, err := c.ListLocationsWithResponse(context.Background())
					switch {
					case err != nil:
						errs <- err
					case resp.StatusCode() != http.StatusOK:
						errs <- fmt.Errorf("GET /locations: %d %s", resp.StatusCode(), resp.Body)
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if n := rec.tokenRequests(); n != 2 {
				t.Errorf("%d token requests, want 2 (the first and one renewal)", n)
			}
			if n := rec.count("GET", "/locations", http.StatusUnauthorized); (n > 0) != tc.want401 {
				t.Errorf("%d answers 401; want some: %v", n, tc.want401)
			}
		})
	}
}

func TestRetriesAfterRetryAfter(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) {
		c.RateLimit, c.RateBurst = 1, 1 // the second request within a second gets 429, Retry-After: 1
	}})
	seed := env.Seed()
	c, rec := newClient(t, env, seed.Merchant.KeyID, seed.Merchant.Secret)
	listAccounts(t, c)
	began := time.Now()
	listAccounts(t, c)
	if n := rec.count("GET", "/accounts", http.StatusTooManyRequests); n != 1 {
		t.Errorf("%d answers 429, want 1", n)
	}
	if n := rec.count("GET", "/accounts", http.StatusOK); n != 2 {
		t.Errorf("%d answers 200, want 2", n)
	}
	if waited := time.Since(began); waited < 900*time.Millisecond {
		t.Errorf("the retry came after %v, before Retry-After", waited)
	}
}

func TestCreateGetsIdempotencyKey(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	c, rec := newClient(t, env, seed.Merchant.KeyID, seed.Merchant.Secret)
	mid := listAccounts(t, c)[0].Id
	email := "dana@example.com"
	body := client.CreatePaymentRequest{
		MerchantAccountId: mid, InvoiceNumber: "INV-" + uuid.NewString()[:8],
		Amount: payreq.MustDecimal("12.30"), CustomerEmail: &email,
	}
	send := false
	body.Send = &send
	resp, err := c.CreatePaymentRequestWithResponse(context.Background(), nil, body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON201 == nil {
		t.Fatalf("create: %d %s", resp.StatusCode(), resp.Body)
	}
	key := rec.sent[len(rec.sent)-1].header.Get("Idempotency-Key")
	if _, err := uuid.Parse(key); err != nil {
		t.Fatalf("Idempotency-Key %q is not a UUID", key)
	}
	// The server took it as the request's key: the same key and body again is a replay.
	again, err := c.CreatePaymentRequestWithResponse(context.Background(), &client.CreatePaymentRequestParams{IdempotencyKey: &key}, body)
	if err != nil {
		t.Fatal(err)
	}
	if again.JSON200 == nil || again.JSON200.Id != resp.JSON201.Id || again.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same key again: %d %s, want 200 with invoice %s", again.StatusCode(), again.Body, resp.JSON201.Id)
	}
	if got := rec.sent[len(rec.sent)-1].header.Get("Idempotency-Key"); got != key {
		t.Errorf("the caller's Idempotency-Key %q was sent as %q", key, got)
	}
	if got := resp.JSON201.Amount.String(); got != "12.30" {
		t.Errorf("amount %s, want 12.30", got)
	}
}

// A customer's creation gets an Idempotency-Key too: sent again with it,
// it answers the customer made, not a 409 for its own email.
func TestCustomerCreateGetsIdempotencyKey(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	c, rec := newClient(t, env, seed.Merchant.KeyID, seed.Merchant.Secret)
	body := client.CustomerCreate{Email: "dana@example.com"}
	resp, err := c.CreateCustomerWithResponse(context.Background(), nil, body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON201 == nil {
		t.Fatalf("create: %d %s", resp.StatusCode(), resp.Body)
	}
	key := rec.sent[len(rec.sent)-1].header.Get("Idempotency-Key")
	if _, err := uuid.Parse(key); err != nil {
		t.Fatalf("Idempotency-Key %q is not a UUID", key)
	}
	again, err := c.CreateCustomerWithResponse(context.Background(), &client.CreateCustomerParams{IdempotencyKey: &key}, body)
	if err != nil {
		t.Fatal(err)
	}
	if again.JSON200 == nil || again.JSON200.Id != resp.JSON201.Id {
		t.Errorf("the same key again: %d %s, want 200 with customer %s", again.StatusCode(), again.Body, resp.JSON201.Id)
	}
}

// A recorded payment gets an Idempotency-Key too, which the server takes as
// the request's: sent again with the key, it records nothing more.
func TestRecordedPaymentGetsIdempotencyKey(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	c, rec := newClient(t, env, seed.Merchant.KeyID, seed.Merchant.Secret)
	email, send := "dana@example.com", false
	inv, err := c.CreatePaymentRequestWithResponse(context.Background(), nil, client.CreatePaymentRequest{
		MerchantAccountId: listAccounts(t, c)[0].Id, InvoiceNumber: "INV-" + uuid.NewString()[:8],
		Amount: payreq.MustDecimal("50.00"), CustomerEmail: &email, Send: &send,
	})
	if err != nil || inv.JSON201 == nil {
		t.Fatalf("create: %v %s", err, inv.Body)
	}
	body := client.RecordPaymentRequest{Amount: payreq.MustDecimal("20.00"), Method: client.RecordPaymentRequestMethodCheck,
		Reference: new("Check 1042")}
	resp, err := c.RecordPaymentWithResponse(context.Background(), inv.JSON201.Id, nil, body)
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("record: %v %s", err, resp.Body)
	}
	key := rec.sent[len(rec.sent)-1].header.Get("Idempotency-Key")
	if _, err := uuid.Parse(key); err != nil {
		t.Fatalf("Idempotency-Key %q is not a UUID", key)
	}
	again, err := c.RecordPaymentWithResponse(context.Background(), inv.JSON201.Id, &client.RecordPaymentParams{IdempotencyKey: &key}, body)
	if err != nil || again.JSON200 == nil || again.JSON200.AmountPaid.String() != "20.00" {
		t.Fatalf("the same key again: %v %d %s", err, again.StatusCode(), again.Body)
	}
}

// A create answered 503 (the database held it up past the request's time
// limit) is sent again after Retry-After, with the same Idempotency-Key,
// and makes one invoice.
func TestCreateRetriedAfter503(t *testing.T) {
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Configure: func(c *config.Config) {
		c.RequestTimeout = 300 * time.Millisecond
	}})
	seed := env.Seed()
	c, rec := newClient(t, env, seed.Merchant.KeyID, seed.Merchant.Secret)
	mid := listAccounts(t, c)[0].Id

	// The invoices are locked until the first try is answered.
	lock, err := env.App.DB.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.Exec(`LOCK TABLE invoices IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	rec.answered = func(exchange) { _ = lock.Rollback() }

	email := "dana@example.com"
	number := "INV-" + uuid.NewString()[:8]
	send := false
	resp, err := c.CreatePaymentRequestWithResponse(context.Background(), nil, client.CreatePaymentRequest{
		MerchantAccountId: mid, InvoiceNumber: number, Amount: payreq.MustDecimal("12.30"), CustomerEmail: &email, Send: &send,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON201 == nil {
		t.Fatalf("create: %d %s, want 201", resp.StatusCode(), resp.Body)
	}
	var keys []string
	var statuses []int
	for _, x := range rec.sent {
		if x.method == "POST" && x.path == "/payment-requests" {
			keys = append(keys, x.header.Get("Idempotency-Key"))
			statuses = append(statuses, x.status)
		}
	}
	// 503s (one, or more on a loaded machine while the database catches
	// up), then the 201, every try with the one key.
	last := len(keys) - 1
	if last < 1 || keys[0] == "" || statuses[last] != http.StatusCreated {
		t.Fatalf("tries answered %v with Idempotency-Keys %q, want 503s then 201 with one key", statuses, keys)
	}
	for i := range last {
		if statuses[i] != http.StatusServiceUnavailable || keys[i] != keys[0] || keys[last] != keys[0] {
			t.Fatalf("tries answered %v with Idempotency-Keys %q, want 503s then 201 with one key", statuses, keys)
		}
	}
	list, err := c.ListPaymentRequestsWithResponse(context.Background(), &client.ListPaymentRequestsParams{InvoiceNumber: &number})
	if err != nil {
		t.Fatal(err)
	}
	if list.JSON200 == nil || len(*list.JSON200) != 1 || (*list.JSON200)[0].Id != resp.JSON201.Id {
		t.Errorf("invoices numbered %s: %d %s, want the one created", number, list.StatusCode(), list.Body)
	}
}

func TestWrongSecretIsATokenRequestError(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	c, _ := newClient(t, env, seed.Merchant.KeyID, "ms_wrong")
	_, err := c.ListAccountsWithResponse(context.Background(), nil)
	var te *payreq.TokenRequestError
	if !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized || te.Code != "invalid_client" {
		t.Fatalf("err %v, want a TokenRequestError 401 invalid_client", err)
	}
}

// A recurring invoice gets an Idempotency-Key as an invoice does (a retried
// create must not make two series issuing every invoice twice), and a PATCH
// tells a member set to null from one left out.
func TestRecurringInvoiceGetsIdempotencyKeyAndPatches(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	c, rec := newClient(t, env, seed.Merchant.KeyID, seed.Merchant.Secret)
	twelve := int32(12)
	customer, err := c.CreateCustomerWithResponse(context.Background(), nil, client.CustomerCreate{Email: openapi_types.Email("rec-" + uuid.NewString()[:8] + "@example.com")})
	if err != nil || customer.JSON201 == nil {
		t.Fatalf("customer: %v %s", err, customer.Body)
	}
	body := client.CreateRecurringInvoice{
		MerchantAccountId: listAccounts(t, c)[0].Id, CustomerId: customer.JSON201.Id, InvoiceNumberPrefix: "RET-" + uuid.NewString()[:8],
		Amount: payreq.MustDecimal("500.00"), Interval: client.RecurringIntervalMonth, IntervalCount: 1,
		StartOn: openapi_types.Date{Time: time.Now().AddDate(0, 0, 2)}, EndAfter: &twelve, DueDays: 14, Send: false,
	}
	resp, err := c.CreateRecurringInvoiceWithResponse(context.Background(), nil, body)
	if err != nil || resp.JSON201 == nil {
		t.Fatalf("create: %v %s", err, resp.Body)
	}
	key := rec.sent[len(rec.sent)-1].header.Get("Idempotency-Key")
	if _, err := uuid.Parse(key); err != nil {
		t.Fatalf("Idempotency-Key %q is not a UUID", key)
	}
	id := resp.JSON201.Id
	patched, err := c.UpdateRecurringInvoiceWithResponse(context.Background(), id, client.UpdateRecurringInvoice{
		EndAfter: payreq.Clear[int32](), Memo: payreq.Set("From March on"),
	})
	if err != nil || patched.JSON200 == nil {
		t.Fatalf("patch: %v %s", err, patched.Body)
	}
	got := patched.JSON200
	if got.EndAfter != nil || got.Memo == nil || *got.Memo != "From March on" || got.DueDays != 14 {
		t.Fatalf("patched %+v: want endAfter cleared, memo set, dueDays kept", got)
	}
}
