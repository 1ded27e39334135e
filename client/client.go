// Package payreq is the Go client of the payreq API for integrators: the
// generated, typed client of openapi.yaml (github.com/payreq/payreq/gen/client)
// with the chores every integration needs done underneath it.
//
//   - It exchanges the API key for an access token at POST /oauth/token, reuses
//     the token until shortly before it expires and then obtains a new one; many
//     goroutines share one client and cause one token request at a time.
//   - A 401 makes it obtain a new token and send the request once more.
//   - A 429 is sent again after the server's Retry-After, a bounded number of
//     times and never past the request context's deadline.
//   - So is a 503 (the service cannot reach its database), but only for a
//     request that is safe to repeat, since a 503 may come after the change
//     was made: GET; DELETE (a second removal removes nothing more, and
//     answers 404 if the first went through); the token request; and any
//     request with an Idempotency-Key, creates included. The other POSTs,
//     sending a pay link (a repeat sends a second message) and cancelling,
//     get the 503 back.
//   - POST /payment-requests, POST /payment-requests/{id}/payments and POST
//     /customers get a random Idempotency-Key when the caller gave none, the
//     same one on each of the client's own retries, so a retry never makes a
//     second invoice nor records a payment twice, and a customer's retry
//     answers the customer rather than a 409.
//
// Every operation of the API is a method of the embedded
// *client.ClientWithResponses:
//
//	c, err := payreq.New("http://127.0.0.1:8080", keyID, secret)
//	accounts, err := c.ListAccountsWithResponse(ctx, nil)
//	amount, err := payreq.ParseDecimal("12.30")
package payreq

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payreq/payreq/gen/client"
	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/optional"
)

// Client is the generated client of the API, authenticated with one API key.
type Client struct {
	*client.ClientWithResponses
	http   *http.Client
	tokens *tokenSource
}

// Option changes how New builds a Client.
type Option func(*settings)

type settings struct {
	httpClient    *http.Client
	now           func() time.Time
	refreshMargin time.Duration
	maxTries      int
	maxWait       time.Duration
}

// WithHTTPClient sends every request, token requests included, through hc's
// transport and with its timeout, redirect policy and cookie jar. hc itself
// is not changed. Default: a client with a 30 s timeout on http.DefaultTransport.
func WithHTTPClient(hc *http.Client) Option {
	return func(s *settings) { s.httpClient = hc }
}

// WithClock sets the clock by which the client judges when its token is due
// for renewal. Default: time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *settings) { s.now = now }
}

// WithRefreshMargin sets how long before its expiry a token is replaced.
// Default: 60 s.
func WithRefreshMargin(d time.Duration) Option {
	return func(s *settings) { s.refreshMargin = d }
}

// WithRetries sets how many times in all a request answered 429 (or 503,
// when it is safe to repeat) is sent (default 3), and the longest Retry-After
// the client waits for (default 60 s); a longer one, or one past the
// context's deadline, returns the 429 or 503.
func WithRetries(tries int, maxWait time.Duration) Option {
	return func(s *settings) { s.maxTries, s.maxWait = tries, maxWait }
}

// New is a client of the API at baseURL (such as https://payreq.example.com)
// that authenticates with the API key keyID (mk_…) and its secret (ms_…).
// It sends nothing until the first request.
func New(baseURL, keyID, secret string, opts ...Option) (*Client, error) {
	if keyID == "" || secret == "" {
		return nil, errors.New("payreq: an API key id and secret are required")
	}
	base, err := url.Parse(baseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("payreq: base URL %q is not an http or https address", baseURL)
	}
	s := settings{now: time.Now, refreshMargin: 60 * time.Second, maxTries: 3, maxWait: 60 * time.Second}
	for _, o := range opts {
		o(&s)
	}
	if s.maxTries < 1 {
		s.maxTries = 1
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if s.httpClient != nil {
		copied := *s.httpClient
		hc = &copied
	}
	underlying := hc.Transport
	if underlying == nil {
		underlying = http.DefaultTransport
	}
	retries := retrier{base: underlying, maxTries: s.maxTries, maxWait: s.maxWait}
	basePath := strings.TrimSuffix(base.Path, "/")

	// Token requests go through the retries but not the authentication.
	tokenRetries := retries
	tokenRetries.tokens = true
	tokenHTTP := *hc
	tokenHTTP.Transport = &transport{next: tokenRetries, scheme: base.Scheme, host: base.Host, basePath: basePath}
	tokenAPI, err := client.NewClientWithResponses(baseURL, client.WithHTTPClient(&tokenHTTP))
	if err != nil {
		return nil, fmt.Errorf("payreq: %w", err)
	}
	tokens := &tokenSource{
		now: s.now, margin: s.refreshMargin,
		fetch: func(ctx context.Context) (client.TokenResponse, error) {
			return requestToken(ctx, tokenAPI, keyID, secret)
		},
	}

	hc.Transport = &transport{next: retries, tokens: tokens, scheme: base.Scheme, host: base.Host, basePath: basePath}
	api, err := client.NewClientWithResponses(baseURL, client.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("payreq: %w", err)
	}
	return &Client{ClientWithResponses: api, http: hc, tokens: tokens}, nil
}

// HTTPClient is the HTTP client under the generated one: it adds the token
// and retries as the Client does. Use it for requests the generated client
// does not build, such as following a list's `Link: <…>; rel="next"` address;
// client.ParseListPaymentRequestsResponse and its kind read the answers.
func (c *Client) HTTPClient() *http.Client { return c.http }

// Token is the access token the client uses now, obtaining one first when it
// has none that is still good. Its OrganizationId is the id a reseller passes
// to GetPortfolio.
func (c *Client) Token(ctx context.Context) (client.TokenResponse, error) {
	return c.tokens.current(ctx)
}

// ParseDecimal reads an amount, quantity or unit cost such as "12.30" exactly,
// without passing through a float.
func ParseDecimal(s string) (client.Decimal, error) { return jsonnum.ParseDecimal(s) }

// MustDecimal is ParseDecimal for constants; it panics on a malformed one.
func MustDecimal(s string) client.Decimal { return jsonnum.MustDecimal(s) }

// Set is a nullable member of a PATCH set to v (PATCH
// /recurring-invoices/{id}: Set(int32(6)) for endAfter); a member left at
// its zero value is left out and keeps its value.
func Set[T any](v T) optional.Patch[T] { return optional.Patch[T]{Set: true, Value: &v} }

// Clear is a nullable member of a PATCH set to null.
func Clear[T any]() optional.Patch[T] { return optional.Patch[T]{Set: true} }
