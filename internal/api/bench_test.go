package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/server"
)

// The hot requests of make bench, each through the whole HTTP handler of
// payreq serve (request log, metrics, authentication, validation, the
// handler, the database, the JSON answer) in this process, without the
// network. Their allocations per request (-benchmem) are the lever on the
// server's CPU per request and do not depend on the machine's load; make
// bench prices the rest. Each checks its request's answer against
// openapi.yaml through apitest first.
//
//	go test -run '^$' -bench . -benchmem ./internal/api/

func BenchmarkGetInvoice(b *testing.B) {
	f := newBenchFront(b)
	inv := f.create(b, "BENCH-GET")
	f.run(b, "GET", "/payment-requests/"+inv.Id.String(), nil, nil, http.StatusOK)
}

func BenchmarkListFirstPage(b *testing.B) {
	f := newBenchFront(b)
	for i := range 26 {
		f.create(b, fmt.Sprintf("BENCH-LIST-%d", i))
	}
	f.run(b, "GET", "/payment-requests?limit=25", nil, nil, http.StatusOK)
}

func BenchmarkCreateInvoice(b *testing.B) {
	f := newBenchFront(b)
	n := 0
	f.run(b, "POST", "/payment-requests", func(h http.Header) []byte {
		n++
		h.Set("Idempotency-Key", fmt.Sprintf("bench-%d", n))
		return f.createBody(fmt.Sprintf("BENCH-CREATE-%d", n))
	}, http.Header{"Content-Type": {"application/json"}}, http.StatusCreated)
}

// benchFront is a server on the test database with a merchant's token,
// and the handler of payreq serve on the same app.
type benchFront struct {
	env     *apitest.Env
	handler http.Handler
	token   string
	mid     string
}

func newBenchFront(b *testing.B) *benchFront {
	b.Helper()
	env := apitest.New(b, testDSN, apitest.Options{Configure: func(c *config.Config) {
		c.RateLimit, c.RateBurst = 1e9, 1e9
	}})
	seed := env.Seed()
	f := &benchFront{env: env, token: env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)}
	var mids []models.MerchantAccount
	env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: f.token}).JSON(b, &mids)
	f.mid = mids[0].Id.String()
	// Built as payreq serve builds it on the env's database, secrets and
	// clock, and logged as it logs, to a writer that keeps nothing.
	svc, err := server.New(context.Background(), env.App.Config, app.Options{Now: env.Clock.Now}, env.App.Config.Logger(io.Discard))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	f.handler = svc.Handler
	return f
}

// createBody is make bench's create request: three lines, not sent.
func (f *benchFront) createBody(number string) []byte {
	return fmt.Appendf(nil, `{"merchantAccountId":%q,"invoiceNumber":%q,"amount":"60.00","poNumber":null,`+
		`"customerName":"Dana Whitfield","customerCompany":null,"customerEmail":"customer1@example.com",`+
		`"customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"send":false,"lines":[`+
		`{"description":"Consulting","quantity":"1","unitCost":"10","uom":null,"commodityCode":null,"upc":null},`+
		`{"description":"Travel","quantity":"2","unitCost":"10","uom":null,"commodityCode":null,"upc":null},`+
		`{"description":"Materials","quantity":"3","unitCost":"10","uom":null,"commodityCode":null,"upc":null}]}`,
		f.mid, number)
}

func (f *benchFront) create(b *testing.B, number string) models.Invoice {
	b.Helper()
	resp := f.env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: f.token, Body: f.createBody(number)})
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
	var inv models.Invoice
	resp.JSON(b, &inv)
	return inv
}

// run checks one request through apitest (its answer against
// openapi.yaml), then times the same request, with a fresh body from body
// (nil: none) each time, through the handler.
func (f *benchFront) run(b *testing.B, method, path string, body func(http.Header) []byte, header http.Header, want int) {
	b.Helper()
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	var first []byte
	if body != nil {
		first = body(h)
	}
	resp := f.env.Do(apitest.Request{Method: method, Path: path, Token: f.token, Body: first, Header: h})
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, resp.Body)
	}
	header = header.Clone()
	if header == nil {
		header = http.Header{}
	}
	header.Set("Authorization", "Bearer "+f.token)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(method, path, nil)
		req.Header = header.Clone()
		if body != nil {
			raw := body(req.Header)
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
		}
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
}
