package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// goParserText are phrases of Go's and kin-openapi's parsers: an answer
// says what is wrong in payreq's own words, never in theirs.
var goParserText = []string{"parsing time", "cannot parse", "strconv", "invalid syntax", "out of range",
	"multiple values", "Invalid format", "an invalid integer", "Expected one value", "doesn't match"}

// wantOnlyField checks a 400 problem whose errors name field alone, in
// payreq's words, and returns its messages.
func wantOnlyField(t *testing.T, resp *apitest.Response, field string) []string {
	t.Helper()
	p := apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
	if p.Errors == nil {
		t.Fatalf("no errors member: %s", resp.Body)
	}
	if fields := slices.Sorted(maps.Keys(*p.Errors)); !slices.Equal(fields, []string{field}) {
		t.Errorf("errors name %q, want only %q: %s", fields, field, resp.Body)
	}
	msgs := (*p.Errors)[field]
	for _, m := range msgs {
		for _, phrase := range goParserText {
			if strings.Contains(m, phrase) {
				t.Errorf("errors[%q] is a parser's text %q: %s", field, phrase, resp.Body)
			}
		}
	}
	return msgs
}

// Query and header parameters that fail their format are 400s keyed by the
// parameter, in payreq's words; a date-time whose offset PostgreSQL cannot
// hold is one of them, never a 500 (outside testers' findings).
func TestParametersFailingTheirFormat(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit})
	m := apitest.NewMerchant(t, env)
	lists := []string{"/payment-requests", "/card-payments", "/deposits", "/events"}
	token := m.Token // every merchant permission
	for _, list := range lists {
		for _, tc := range []struct{ query, field string }{
			{"createdFrom=2025-03-01T00:00:00%2B16:00", "query.createdFrom"},
			{"createdTo=2025-03-01T00:00:00-16:00", "query.createdTo"},
			{"createdFrom=2025-03-01T00:00:00%2B23:59", "query.createdFrom"},
			{"createdFrom=2025-03-01T00:00:00-24:00", "query.createdFrom"},
			{"createdTo=2025-02-30T00:00:00Z", "query.createdTo"},
			{"createdTo=2016-12-31T23:59:60Z", "query.createdTo"},
			{"createdFrom=2025-03-01", "query.createdFrom"},
			{"createdFrom=2025-03-01T00:00:00Z&createdFrom=2025-03-02T00:00:00Z", "query.createdFrom"},
			{"limit=%2B5", "query.limit"},
			{"limit=+5", "query.limit"},
			{"limit=5.0", "query.limit"},
			{"limit=abc", "query.limit"},
			{"limit=99999999999", "query.limit"},
			{"limit=5&limit=5", "query.limit"},
		} {
			t.Run(list+"?"+tc.query, func(t *testing.T) {
				resp := env.Do(apitest.Request{Method: "GET", Path: list + "?" + tc.query, Token: token})
				if msgs := wantOnlyField(t, resp, tc.field); len(msgs) == 0 || msgs[0] == "" {
					t.Errorf("errors[%q] has no message", tc.field)
				}
			})
		}
		// The widest offsets PostgreSQL holds, and fractions of a second.
		for _, ok := range []string{"createdFrom=2025-03-01T00:00:00%2B15:59", "createdTo=2025-03-01T00:00:00-15:59&limit=5",
			"createdFrom=2025-03-01T00:00:00.123456789Z"} {
			if resp := env.Do(apitest.Request{Method: "GET", Path: list + "?" + ok, Token: token}); resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s?%s: %d %s, want 200", list, ok, resp.StatusCode, resp.Body)
			}
		}
	}
	resp := env.Do(apitest.Request{Method: "GET", Path: "/payment-requests?status=open&status=open", Token: token})
	wantOnlyField(t, resp, "query.status")

	// A header given twice.
	resp = env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: token, Body: m.Body("TWICE-1", "10.00"),
		Header: http.Header{"Idempotency-Key": {"k-1", "k-2"}}})
	wantOnlyField(t, resp, "header.Idempotency-Key")
	var list []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests", Token: token}).JSON(t, &list)
	if len(list) != 0 {
		t.Errorf("%d invoices made by refused requests", len(list))
	}
}

// unknownMemberCases are requests of every operation with a JSON body,
// each valid but for one member the schema does not name (the token
// endpoint ignores them, as RFC 6749 §3.2 asks).
func unknownMemberCases(m apitest.Merchant) []struct {
	method, path, spec string
	body               map[string]any
	field              string
} {
	invoice := func(change func(map[string]any)) map[string]any {
		b := m.Body("UNKNOWN-1", "20.00", apitest.Line(1, "20.00"))
		change(b)
		return b
	}
	id := uuid.NewString()
	return []struct {
		method, path, spec string
		body               map[string]any
		field              string
	}{
		{"POST", "/payment-requests", "/payment-requests", invoice(func(b map[string]any) { b["amout"] = "1.00" }), "amout"},
		{"POST", "/payment-requests", "/payment-requests", invoice(func(b map[string]any) { b["lines"].([]map[string]any)[0]["unit_cost"] = "1" }), "lines[0].unit_cost"},
		{"POST", "/card-payments/" + id + "/refund", "/card-payments/{id}/refund", map[string]any{"amout": "1.00"}, "amout"},
		{"POST", "/terminal-payments", "/terminal-payments", map[string]any{"terminalId": id, "invoiceId": id, "amout": "1.00"}, "amout"},
		{"POST", "/payment-requests/" + id + "/payments", "/payment-requests/{id}/payments",
			map[string]any{"amount": "1.00", "method": "cash", "refrence": "Check 1"}, "refrence"},
		{"PUT", "/reminder-settings", "/reminder-settings", map[string]any{"enabled": true, "offsetsDays": []int{0}, "offsets": []int{1}}, "offsets"},
		{"POST", "/webhook-endpoints", "/webhook-endpoints", map[string]any{"url": "https://hooks.example.com/a", "description": nil, "eventTypes": []string{"*"}, "secret": "mine"}, "secret"},
		{"PATCH", "/webhook-endpoints/" + id, "/webhook-endpoints/{id}", map[string]any{"staus": "disabled"}, "staus"},
		{"PATCH", "/payment-requests/" + id, "/payment-requests/{id}", map[string]any{"memo": "x", "send": true}, "send"},
		{"PATCH", "/payment-requests/" + id, "/payment-requests/{id}", map[string]any{"lines": []map[string]any{{"description": "a",
			"quantity": 1, "unitCost": "1", "uom": nil, "commodityCode": nil, "upc": nil, "unit_cost": "1"}}}, "lines[0].unit_cost"},
		{"POST", "/payment-requests/" + id + "/finalize", "/payment-requests/{id}/finalize", map[string]any{"sent": false}, "sent"},
		{"POST", "/webhook-endpoints/" + id + "/rotate-secret", "/webhook-endpoints/{id}/rotate-secret", map[string]any{"expireCurrentInSecond": 0}, "expireCurrentInSecond"},
		{"POST", "/customers", "/customers", map[string]any{"email": "a@example.com", "emial": "b@example.com"}, "emial"},
		{"POST", "/recurring-invoices", "/recurring-invoices", map[string]any{"merchantAccountId": m.MIDs[0].Id.String(), "customerId": id,
			"invoiceNumberPrefix": "RET", "amount": "20.00", "lines": nil, "memo": nil, "poNumber": nil, "delivery": nil, "reminders": nil,
			"interval": "month", "intervalCount": 1, "startOn": "2030-01-31", "endAfter": nil, "endOn": nil, "dueDays": 14, "send": true,
			"intervalUnit": "month"}, "intervalUnit"},
		{"PATCH", "/recurring-invoices/" + id, "/recurring-invoices/{id}", map[string]any{"status": "paused", "paused": true}, "paused"},
		{"POST", "/customers", "/customers", map[string]any{"email": "a@example.com", "address": map[string]any{"line1": "1 Main St", "city": "X", "zip": "1"}}, "address.zip"},
		{"PATCH", "/customers/" + id, "/customers/{id}", map[string]any{"taxExmpt": true}, "taxExmpt"},
	}
}

// A member the schema does not name is refused, keyed by its name: a typo
// never falls back to a default.
func TestUnknownBodyMembersRefused(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit})
	m := apitest.NewMerchant(t, env)
	token := m.Token // every merchant permission
	covered := map[string]bool{}
	for _, tc := range unknownMemberCases(m) {
		covered[tc.method+" "+tc.spec] = true
		t.Run(tc.method+" "+tc.spec+" "+tc.field, func(t *testing.T) {
			resp := env.Do(apitest.Request{Method: tc.method, Path: tc.path, Token: token, Body: tc.body})
			msgs := wantOnlyField(t, resp, tc.field)
			if !slices.ContainsFunc(msgs, func(s string) bool { return strings.Contains(s, "unknown field") }) {
				t.Errorf("errors[%q] = %q, want it to say unknown field", tc.field, msgs)
			}
		})
	}
	// Every operation with a JSON body is in the table.
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil || op.OperationID == "CreateToken" {
				continue
			}
			if !covered[method+" "+path] {
				t.Errorf("%s %s takes a JSON body and is not in unknownMemberCases", method, path)
			}
		}
	}
	var list []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests", Token: token}).JSON(t, &list)
	var hooks []models.WebhookEndpoint
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: token}).JSON(t, &hooks)
	if len(list) != 0 || len(hooks) != 0 {
		t.Errorf("refused requests made %d invoices and %d endpoints", len(list), len(hooks))
	}
}

// {"amout": "1.00"} refunded a whole 20.00 sale when unknown members were
// ignored: now it is a 400 and nothing is refunded.
func TestRefundWithAMisspelledAmountRefundsNothing(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	refunder := env.NewKey(t, uuid.MustParse(m.Org), auth.PaymentsRefund, auth.PaymentsView)
	token := env.Token(refunder.KeyID, refunder.Secret)
	_, sale := paidSale(t, env, m, "AMOUT-1", "20.00", apitest.CardApprove)

	resp := refund(env, token, sale.Id, map[string]any{"amout": "1.00"}, "")
	wantOnlyField(t, resp, "amout")

	var s models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + sale.Id.String(), Token: token}).JSON(t, &s)
	apitest.Want(t, "amountRefunded", s.AmountRefunded.Text('f'), "0.00")
	var refunds []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=refund", Token: token}).JSON(t, &refunds)
	apitest.Want(t, "refunds", len(refunds), 0)
}

// Every status an operation answers is in openapi.yaml (apitest checks each
// answer against it): 413 on the POSTs that take no body, 404 on the
// portfolio for an id ending in an encoded slash; a GET's or a DELETE's
// body is not read at all.
func TestStatusesOutsideTheUsualPath(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit})
	seed := env.Seed()
	m := apitest.NewMerchant(t, env)
	token := m.Token // every merchant permission
	huge := `{"x":"` + strings.Repeat("x", 1<<20) + `"}`
	id := uuid.NewString()
	for _, path := range []string{"/payment-requests/" + id + "/send", "/payment-requests/" + id + "/cancel",
		"/webhook-endpoints/" + id + "/ping", "/webhook-endpoints/" + id + "/rotate-secret", "/events/" + id + "/redeliver"} {
		resp := env.Do(apitest.Request{Method: "POST", Path: path, Token: token, Body: huge})
		apitest.WantProblem(t, resp, http.StatusRequestEntityTooLarge, "Request body too large")
	}
	for _, tc := range []struct{ method, path string }{{"GET", "/locations"}, {"DELETE", "/saved-cards/" + id}} {
		resp := env.Do(apitest.Request{Method: tc.method, Path: tc.path, Token: token, Body: huge})
		if resp.StatusCode == http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with a body: 413, want the body left unread", tc.method, tc.path)
		}
	}

	reseller := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	for _, path := range []string{"/organizations/" + seed.Reseller.OrganizationID.String() + "%2F/portfolio",
		"/organizations/" + seed.Reseller.OrganizationID.String() + "%2Fx/portfolio"} {
		apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: path, Token: reseller}), http.StatusNotFound, "Not found")
	}
}
