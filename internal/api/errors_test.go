package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
)

// validInvoice is a body of POST /payment-requests that passes validation.
func validInvoice() map[string]any {
	return map[string]any{
		"merchantAccountId": uuid.NewString(),
		"invoiceNumber":     "INV-1",
		"amount":            "91.00",
		"poNumber":          nil,
		"customerName":      "Dana Whitfield",
		"customerCompany":   nil,
		"customerEmail":     "dana@example.com",
		"customerPhone":     nil,
		"delivery":          nil,
		"memo":              nil,
		"dueDate":           nil,
		"lines": []map[string]any{
			{"description": "Chafing dish rental", "quantity": 2, "unitCost": "45.5", "uom": nil, "commodityCode": nil, "upc": nil},
		},
		"send": false,
	}
}

// rawInvoice is validInvoice as JSON text with its amount member written
// as given, for numbers no Go value marshals to.
func rawInvoice(amount string) string {
	b, err := json.Marshal(validInvoice())
	if err != nil {
		panic(err)
	}
	return strings.Replace(string(b), `"amount":"91.00"`, amount, 1)
}

// Invalid requests get 400 with errors keyed by the field as the client
// sent it, and only that field.
func TestValidationErrorsNameTheField(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)
	invoice := func(change func(map[string]any)) map[string]any {
		b := validInvoice()
		change(b)
		return b
	}
	line := func(b map[string]any) map[string]any { return b["lines"].([]map[string]any)[0] }

	cases := []struct {
		name   string
		method string
		path   string
		body   any
		header http.Header
		field  string
	}{
		{"malformed location id", "GET", "/locations/not-a-uuid", nil, nil, "path.id"},
		{"malformed locationId filter", "GET", "/accounts?locationId=x", nil, nil, "query.locationId"},
		{"limit out of range", "GET", "/payment-requests?limit=0", nil, nil, "query.limit"},
		{"malformed invoice id", "GET", "/payment-requests/42", nil, nil, "path.id"},
		{"customerEmail missing", "POST", "/payment-requests", invoice(func(b map[string]any) { delete(b, "customerEmail") }), nil, "customerEmail"},
		{"amount not a number", "POST", "/payment-requests", invoice(func(b map[string]any) { b["amount"] = "12.3x" }), nil, "amount"},
		{"merchantAccountId not a uuid", "POST", "/payment-requests", invoice(func(b map[string]any) { b["merchantAccountId"] = "mid-1" }), nil, "merchantAccountId"},
		{"line quantity not a number", "POST", "/payment-requests", invoice(func(b map[string]any) { line(b)["quantity"] = "abc" }), nil, "lines[0].quantity"},
		{"line description missing", "POST", "/payment-requests", invoice(func(b map[string]any) { delete(line(b), "description") }), nil, "lines[0].description"},
		{"Idempotency-Key too long", "POST", "/payment-requests", validInvoice(), http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, "header.Idempotency-Key"},
		{"body not JSON", "POST", "/payment-requests", `{"amount":`, nil, "body"},
		{"dueDate not of the calendar", "POST", "/payment-requests", invoice(func(b map[string]any) { b["dueDate"] = "2031-02-30" }), nil, "dueDate"},
		{"amount of too large an exponent", "POST", "/payment-requests", rawInvoice(`"amount":1e308`), nil, "amount"},
		{"amount of too small an exponent", "POST", "/payment-requests", rawInvoice(`"amount":1e-400`), nil, "amount"},
		{"line quantity of 41 digits", "POST", "/payment-requests", strings.Replace(rawInvoice(`"amount":"91.00"`), `"quantity":2`, `"quantity":`+strings.Repeat("9", 41), 1), nil, "lines[0].quantity"},
		{"customerEmail ending in a dot", "POST", "/payment-requests", invoice(func(b map[string]any) { b["customerEmail"] = "x@example.com." }), nil, "customerEmail"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := env.Do(apitest.Request{Method: tc.method, Path: tc.path, Body: tc.body, Header: tc.header, Token: token})
			p := apitest.WantProblem(t, resp, http.StatusBadRequest, "")
			if !strings.HasSuffix(p.Type, "/problems/validation") {
				t.Errorf("type %q, want …/problems/validation", p.Type)
			}
			if p.Errors == nil {
				t.Fatalf("no errors member: %s", resp.Body)
			}
			fields := slices.Sorted(maps.Keys(*p.Errors))
			if !slices.Equal(fields, []string{tc.field}) {
				t.Errorf("errors name %q, want only %q: %s", fields, tc.field, resp.Body)
			}
			for f, msgs := range *p.Errors {
				if len(msgs) == 0 || msgs[0] == "" {
					t.Errorf("errors[%q] has no message", f)
				}
			}
		})
	}
}

func TestBodyTooLargeAndWrongMediaType(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)
	huge := validInvoice()
	huge["memo"] = strings.Repeat("m", 1<<20)

	cases := []struct {
		name    string
		body    any
		header  http.Header
		chunked bool
		status  int
	}{
		{"over 1 MiB", huge, nil, false, http.StatusRequestEntityTooLarge},
		{"over 1 MiB, streamed without a length", huge, nil, true, http.StatusRequestEntityTooLarge},
		{"text/plain", `{"amount": 1}`, http.Header{"Content-Type": {"text/plain"}}, false, http.StatusUnsupportedMediaType},
		{"form", "amount=1", formHeader, false, http.StatusUnsupportedMediaType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: token,
				Body: tc.body, Header: tc.header, Chunked: tc.chunked})
			p := apitest.WantProblem(t, resp, tc.status, "")
			if p.Errors != nil {
				t.Errorf("a %d has errors: %s", tc.status, resp.Body)
			}
		})
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)

	// Echo alone would route the last three to GET /locations/{id}.
	for _, path := range []string{"/nope", "/locations/" + uuid.NewString() + "/mids", "/locations//" + uuid.NewString(),
		"/locations/" + uuid.NewString() + "%2Fmids"} {
		resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: token})
		p := apitest.WantProblem(t, resp, http.StatusNotFound, "")
		if !strings.HasSuffix(p.Type, "/problems/not-found") {
			t.Errorf("GET %s: type %q, want …/problems/not-found", path, p.Type)
		}
	}

	cases := []struct{ method, path, allow string }{
		{"DELETE", "/locations", "GET"},
		{"PUT", "/locations/" + uuid.NewString(), "GET"},
		{"GET", "/oauth/token", "POST"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp := env.Do(apitest.Request{Method: tc.method, Path: tc.path, Token: token})
			p := apitest.WantProblem(t, resp, http.StatusMethodNotAllowed, "")
			if !strings.HasSuffix(p.Type, "/problems/method-not-allowed") {
				t.Errorf("type %q, want …/problems/method-not-allowed", p.Type)
			}
			if allow := resp.Header.Get("Allow"); !strings.Contains(allow, tc.allow) {
				t.Errorf("Allow %q, want it to list %s", allow, tc.allow)
			}
		})
	}
}
