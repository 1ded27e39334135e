package apitest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/auth"
)

// Merchant is a seeded merchant with a token and its MIDs and locations.
type Merchant struct {
	Env   *Env
	Token string
	Org   string
	MIDs  []models.MerchantAccount
	Locs  []models.Location

	keyID, secret string
}

// NewMerchant seeds the demo organizations and takes the merchant's.
func NewMerchant(t *testing.T, env *Env) Merchant {
	t.Helper()
	seed := env.Seed()
	m := Merchant{Env: env, Token: env.Token(seed.Merchant.KeyID, seed.Merchant.Secret), Org: seed.Merchant.OrganizationID.String(),
		keyID: seed.Merchant.KeyID, secret: seed.Merchant.Secret}
	env.Do(Request{Method: "GET", Path: "/accounts", Token: m.Token}).JSON(t, &m.MIDs)
	env.Do(Request{Method: "GET", Path: "/locations", Token: m.Token}).JSON(t, &m.Locs)
	return m
}

// Renew takes a new token, as a client does once its token expired (after
// a test moved the clock on).
func (m *Merchant) Renew() { m.Token = m.Env.Token(m.keyID, m.secret) }

// Body is a create request with every key present, as the contract asks.
func (m Merchant) Body(number string, amount any, lines ...map[string]any) map[string]any {
	b := map[string]any{
		"merchantAccountId": m.MIDs[0].Id.String(), "invoiceNumber": number, "amount": amount,
		"poNumber": nil, "customerName": "Dana Whitfield", "customerCompany": nil,
		"customerEmail": "dana@example.com", "customerPhone": nil, "delivery": nil, "memo": nil,
		"dueDate": nil, "lines": nil, "send": false,
	}
	if len(lines) > 0 {
		b["lines"] = lines
	}
	return b
}

// Line is an invoice line of a create request.
func Line(q, c any) map[string]any {
	return map[string]any{"description": "Item", "quantity": q, "unitCost": c, "uom": nil, "commodityCode": nil, "upc": nil}
}

// Create sends a create request.
func (m Merchant) Create(t *testing.T, body map[string]any, header http.Header) *Response {
	t.Helper()
	return m.Env.Do(Request{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: body, Header: header})
}

// MustCreate creates an invoice and fails the test unless it is made.
func (m Merchant) MustCreate(t *testing.T, body map[string]any) models.Invoice {
	t.Helper()
	resp := m.Create(t, body, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
	var inv models.Invoice
	resp.JSON(t, &inv)
	return inv
}

// Read reads an invoice through the API, and its raw JSON for messages.
func (m Merchant) Read(t *testing.T, id uuid.UUID) (models.Invoice, string) {
	t.Helper()
	r := m.Env.Do(Request{Method: "GET", Path: "/payment-requests/" + id.String(), Token: m.Token})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("get: %d %s", r.StatusCode, r.Body)
	}
	var inv models.Invoice
	r.JSON(t, &inv)
	return inv, string(r.Body)
}

// TokenFor makes a new key for org and exchanges it, for a test whose clock
// has moved past its first token's life.
func (e *Env) TokenFor(t *testing.T, org string) string {
	t.Helper()
	k, _, err := e.App.Auth.CreateKey(context.Background(), nil, e.Owner(t, uuid.MustParse(org)), "Demo merchant key", []string{"payments.create", "payments.view", "accounts.view", "locations.view"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e.Token(k.KeyID, k.Secret)
}

// WantProblem checks status and title of a problem document and returns it.
func WantProblem(t *testing.T, resp *Response, status int, title string) models.Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	p := resp.Problem(t)
	if title != "" && p.Title != title {
		t.Errorf("title %q, want %q (detail: %s)", p.Title, title, p.Detail)
	}
	if int(p.Status) != status {
		t.Errorf("problem status %d, want %d", p.Status, status)
	}
	return p
}

// Owner is the membership of org's first Owner, who makes test keys.
func (e *Env) Owner(t testing.TB, org uuid.UUID) uuid.UUID {
	t.Helper()
	m, err := e.App.People.Owner(context.Background(), org)
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// NewKey makes an API key for org with exactly these permissions, as its Owner.
func (e *Env) NewKey(t *testing.T, org uuid.UUID, permissions ...string) auth.NewKey {
	t.Helper()
	name := "test key " + strings.Join(permissions, ",")
	k, _, err := e.App.Auth.CreateKey(context.Background(), nil, e.Owner(t, org), name[:min(len(name), auth.MaxKeyName)], permissions, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// AtOnce sends n requests at once, each by send, which answers its
// status, and returns how many made something (201); any answer but 201
// or a replay's 200 fails the test. For requests that share one
// idempotency key: one of them makes, the others replay.
func AtOnce(t testing.TB, n int, send func() int) (created int) {
	t.Helper()
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() { statuses[i] = send() })
	}
	wg.Wait()
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Errorf("a concurrent request answered %d", s)
		}
	}
	return created
}

// Want checks one field of an answer and names it when it is wrong; the
// test goes on, so that every wrong field is reported.
func Want[T comparable](t testing.TB, field string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s is %v, want %v", field, got, want)
	}
}

// WantText checks a field that may be null: its text, or "<nil>".
func WantText(t testing.TB, field string, got *string, want string) {
	t.Helper()
	Want(t, field, Text(got), want)
}

// Text is a nullable field's text, "<nil>" for null.
func Text(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
