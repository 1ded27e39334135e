package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/processor"
)

// wantSecurityHeaders checks the headers every API answer carries.
func wantSecurityHeaders(t *testing.T, what string, resp *apitest.Response) {
	t.Helper()
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s → %d: X-Content-Type-Options %q, want nosniff", what, resp.StatusCode, got)
	}
	if got := resp.Header.Values("Cache-Control"); !slices.Equal(got, []string{"no-store"}) {
		t.Errorf("%s → %d: Cache-Control %q, want no-store", what, resp.StatusCode, got)
	}
}

// Every operation in openapi.yaml, answering success and failure alike,
// and the answers to addresses and methods it does not describe, carry
// X-Content-Type-Options: nosniff and Cache-Control: no-store.
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) {
		c.RateLimit, c.RateBurst = 0.001, 200 // room for this test, then a 429 to check too
	}})
	m := apitest.NewMerchant(t, env)
	seed := env.Seed()
	reseller := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	inv, cancelled := m.MustCreate(t, m.Body("HDR-1", "10.00")), m.MustCreate(t, m.Body("HDR-3", "10.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "1.00", Save: true}), http.StatusSeeOther)
	withCard, _ := m.Read(t, inv.Id)
	var apps []models.Application
	env.Do(apitest.Request{Method: "GET", Path: "/applications", Token: reseller}).JSON(t, &apps)
	if len(apps) == 0 || len(*withCard.SavedCards) == 0 {
		t.Fatal("no application or no saved card")
	}
	made, err := env.App.Payments.SettleOrganization(context.Background(), uuid.MustParse(m.Org), quiet)
	if err != nil || len(made) == 0 {
		t.Fatalf("no deposit made: %v", err)
	}
	rc := apitest.NewReceiver(t)
	hook, spare := endpoint(t, env, m.Token, rc.URL, "*"), endpoint(t, env, m.Token, rc.URL, "*")
	recorded := m.MustCreate(t, m.Body("HDR-4", "10.00"))
	var withCheck models.Invoice
	env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + recorded.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "2.00", "method": "check"}}).JSON(t, &withCheck)
	draftBody := func(number string) map[string]any {
		b := m.Body(number, "10.00")
		b["draft"] = true
		return b
	}
	editable, toFinalize, toDelete := m.MustCreate(t, m.Body("HDR-5", "10.00")), m.MustCreate(t, draftBody("HDR-6")), m.MustCreate(t, draftBody("HDR-7"))
	var events []struct{ ID string }
	env.Do(apitest.Request{Method: "GET", Path: "/events?limit=1", Token: m.Token}).JSON(t, &events)
	series, spareSeries := createSeries(t, m, recurringBody(t, m, "2030-01-31")), createSeries(t, m, recurringBody(t, m, "2030-01-31"))
	customer, spareCustomer := newCustomer(t, m, map[string]any{"email": "hdr@example.com"}), newCustomer(t, m, map[string]any{"email": "spare@example.com"})
	counter := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Counter")
	lane := addTerminal(t, env, m.MIDs[0], processor.SimTerminalSlow, "Lane")
	atCounter := m.MustCreate(t, m.Body("HDR-8", "10.00"))
	waiting := mustTerminalPayment(t, m, lane.Id, atCounter.Id, "2.00")
	// A real id for each operation that takes one.
	ids := map[string]string{
		"/recurring-invoices/{id}":                    series.Id.String(),
		"/terminals/{id}":                             counter.Id.String(),
		"/terminal-payments/{id}":                     waiting.Id.String(),
		"/terminal-payments/{id}/cancel":              waiting.Id.String(),
		"/payment-requests/{id}":                      inv.Id.String(),
		"/payment-requests/{id}/send":                 inv.Id.String(),
		"/payment-requests/{id}/cancel":               cancelled.Id.String(),
		"/payment-requests/{id}/finalize":             toFinalize.Id.String(),
		"/payment-requests/{id}/payments":             inv.Id.String(),
		"/payment-requests/{id}/payments/{paymentId}": recorded.Id.String(),
		"/saved-cards/{id}":                           (*withCard.SavedCards)[0].Id.String(),
		"/card-payments/{id}":                         (*withCard.Payments)[0].Id.String(),
		"/card-payments/{id}/refund":                  (*withCard.Payments)[0].Id.String(),
		"/deposits/{id}":                              made[0].ID.String(),
		"/events/{id}":                                events[0].ID,
		"/events/{id}/redeliver":                      events[0].ID,
		"/webhook-endpoints/{id}":                     hook.Id.String(),
		"/webhook-endpoints/{id}/ping":                hook.Id.String(),
		"/webhook-endpoints/{id}/rotate-secret":       hook.Id.String(),
		"/locations/{id}":                             m.Locs[0].Id.String(),
		"/applications/{id}":                          apps[0].Id.String(),
		"/organizations/{id}/portfolio":               seed.Reseller.OrganizationID.String(),
		"/customers/{id}":                             customer.Id.String(),
	}

	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			seen++
			token := ""
			if op.Security != nil {
				for _, req := range *op.Security {
					for _, scope := range req["oauth2"] {
						token = m.Token
						if !slices.Contains(auth.PermissionsFor(auth.KindMerchant), scope) {
							token = reseller
						}
					}
				}
			}
			concrete := strings.ReplaceAll(strings.ReplaceAll(path, "{id}", ids[path]), "{paymentId}", (*withCheck.Payments)[0].Id.String())
			req := apitest.Request{Method: method, Path: concrete, Token: token}
			what := method + " " + path
			switch what {
			case "POST /payment-requests":
				req.Body = m.Body("HDR-2", "10.00")
			case "POST /webhook-endpoints":
				req.Body = map[string]any{"url": rc.URL, "eventTypes": []string{"invoice.paid"}}
			case "POST /payment-requests/{id}/payments":
				req.Body = map[string]any{"amount": "1.00", "method": "cash"}
			case "POST /terminal-payments":
				req.Body = map[string]any{"terminalId": counter.Id, "invoiceId": atCounter.Id, "amount": "1.00"}
			case "PUT /reminder-settings":
				req.Body = map[string]any{"enabled": false, "offsetsDays": []int{0}}
			case "POST /recurring-invoices":
				req.Body = recurringBody(t, m, "2030-01-31")
			case "PATCH /recurring-invoices/{id}":
				req.Body = map[string]any{"status": "paused"}
			case "DELETE /recurring-invoices/{id}": // the others still use series
				req.Path = "/recurring-invoices/" + spareSeries.Id.String()
			case "PATCH /payment-requests/{id}":
				req.Path, req.Body = "/payment-requests/"+editable.Id.String(), map[string]any{"memo": "changed"}
			case "DELETE /payment-requests/{id}":
				req.Path = "/payment-requests/" + toDelete.Id.String()
			case "PATCH /webhook-endpoints/{id}":
				req.Body = map[string]any{"description": "changed"}
			case "DELETE /webhook-endpoints/{id}": // the others still use hook
				req.Path = "/webhook-endpoints/" + spare.Id.String()
			case "POST /customers":
				req.Body = map[string]any{"email": "hdr-new@example.com"}
			case "PATCH /customers/{id}":
				req.Body = map[string]any{"notes": "changed"}
			case "DELETE /customers/{id}": // the others still use customer
				req.Path = "/customers/" + spareCustomer.Id.String()
			case "POST /oauth/token":
				req.Body, req.Header = formBody("client_credentials", seed.Merchant.KeyID, seed.Merchant.Secret), formHeader
			}
			resp := env.Do(req)
			if resp.StatusCode >= 400 {
				t.Errorf("%s: %d %s (want it to succeed, to check a success's headers)", what, resp.StatusCode, resp.Body)
			}
			wantSecurityHeaders(t, what, resp)
			if token != "" {
				// Refused: no token, a malformed id, another kind's token.
				wantSecurityHeaders(t, what+" without a token", env.Do(apitest.Request{Method: method, Path: concrete}))
				if strings.Contains(path, "{id}") {
					bad := strings.ReplaceAll(path, "{id}", "not-a-uuid")
					wantSecurityHeaders(t, what+" with a malformed id", env.Do(apitest.Request{Method: method, Path: bad, Token: token}))
					wantSecurityHeaders(t, what+" with an unknown id", env.Do(apitest.Request{Method: method,
						Path: strings.ReplaceAll(path, "{id}", uuid.NewString()), Token: token}))
				}
				other := reseller
				if token == reseller {
					other = m.Token
				}
				wantSecurityHeaders(t, what+" without the permission", env.Do(apitest.Request{Method: method, Path: concrete, Token: other}))
			}
		}
	}
	if seen < 15 {
		t.Fatalf("only %d operations in the spec", seen)
	}

	for _, r := range []apitest.Request{
		{Method: "GET", Path: "/no-such-address"},
		{Method: "DELETE", Path: "/payment-requests", Token: m.Token},
		{Method: "GET", Path: "/oauth/token"},
		{Method: "POST", Path: "/oauth/token", Body: "grant_type=password", Header: formHeader},
		{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: `{"amount":`},
		{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: "x=1", Header: formHeader},
		{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: strings.Repeat(" ", 1<<20+1)},
		{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: m.Body("HDR-2", "10.00")}, // 422: number used
		{Method: "GET", Path: "/payment-requests?invoiceNumber=%FF", Token: m.Token},
	} {
		wantSecurityHeaders(t, r.Method+" "+r.Path, env.Do(r))
	}
	// Past the key's rate limit.
	var limited *apitest.Response
	for range 250 {
		if limited = env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: m.Token}); limited.StatusCode == http.StatusTooManyRequests {
			break
		}
	}
	if limited.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("no 429 after 250 requests: %d", limited.StatusCode)
	}
	wantSecurityHeaders(t, "GET /locations past the rate limit", limited)
}
