package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
)

// oddUUIDs are well-formed uuids (8-4-4-4-12 hex) of every version and of
// every variant, as other systems make them: each names nothing here.
func oddUUIDs() map[string]string {
	ids := map[string]string{
		"nil":                  "00000000-0000-0000-0000-000000000000",
		"max":                  "ffffffff-ffff-ffff-ffff-ffffffffffff",
		"NCS variant":          "e3e70682-c209-4cac-629f-6fbed82c07cd",
		"Microsoft variant":    "e3e70682-c209-4cac-c29f-6fbed82c07cd",
		"reserved variant":     "e3e70682-c209-4cac-e29f-6fbed82c07cd",
		"upper case version 7": "019A2B3C-4D5E-7F60-8A1B-2C3D4E5F6A7B",
	}
	for v := range 16 {
		ids[fmt.Sprintf("version %d", v)] = fmt.Sprintf("e3e70682-c209-%xcac-a29f-6fbed82c07cd", v)
	}
	return ids
}

// uuidInput is one uuid input of one operation of openapi.yaml.
type uuidInput struct {
	operation, method, path, in, name string
	permission                        string
}

// uuidInputs lists every path and query parameter of openapi.yaml with
// format uuid, and every request body member merchantAccountId, so that an
// input added later is covered without a change here.
func uuidInputs(t *testing.T) []uuidInput {
	t.Helper()
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	var inputs []uuidInput
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			var permission string
			if op.Security != nil {
				for _, req := range *op.Security {
					if scopes := req["oauth2"]; len(scopes) > 0 {
						permission = scopes[0]
					}
				}
			}
			for _, ref := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if p := ref.Value; p != nil && p.Schema != nil && p.Schema.Value != nil && p.Schema.Value.Format == "uuid" {
					inputs = append(inputs, uuidInput{op.OperationID, method, path, p.In, p.Name, permission})
				}
			}
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil && mt.Schema.Value != nil {
				if m := mt.Schema.Value.Properties["merchantAccountId"]; m != nil && m.Value.Format == "uuid" {
					inputs = append(inputs, uuidInput{op.OperationID, method, path, "body", "merchantAccountId", permission})
				}
			}
		}
	}
	sort.Slice(inputs, func(i, j int) bool {
		return inputs[i].operation+inputs[i].in+inputs[i].name < inputs[j].operation+inputs[j].in+inputs[j].name
	})
	return inputs
}

// Every uuid input takes a uuid of any version and variant: it is then
// answered exactly as an unknown version 4 uuid is (a 404 in the path, a 422
// in a body, an empty list in a filter), never a 400; a malformed one stays
// a 400 naming the input.
func TestUUIDsOfEveryVersionAndVariant(t *testing.T) {
	t.Parallel()
	// Some 700 requests of one key, more than its burst.
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit})
	m := apitest.NewMerchant(t, env)
	seed := env.Seed()
	reseller := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	tokenFor := func(permission string) string {
		if slices.Contains(auth.PermissionsFor(auth.KindReseller), permission) && !slices.Contains(auth.PermissionsFor(auth.KindMerchant), permission) {
			return reseller
		}
		return m.Token
	}
	// Bodies that pass validation, so that the id is what decides (by the
	// embedded spec's operationId, capitalised).
	bodies := map[string]func() any{
		"CreatePaymentRequest":   func() any { return m.Body("UUID-1", "5.00") },
		"RecordPayment":          func() any { return map[string]any{"amount": "1.00", "method": "cash"} },
		"UpdateWebhookEndpoint":  func() any { return map[string]any{"status": "disabled"} },
		"UpdatePaymentRequest":   func() any { return map[string]any{"memo": "Thanks"} },
		"UpdateCustomer":         func() any { return map[string]any{"notes": "a note"} },
		"CreateRecurringInvoice": func() any { return recurringBody(t, m, "2030-01-31") },
		"UpdateRecurringInvoice": func() any { return map[string]any{"status": "paused"} },
	}
	inputs := uuidInputs(t)
	if len(inputs) < 20 {
		t.Fatalf("only %d uuid inputs found in openapi.yaml", len(inputs))
	}
	send := func(in uuidInput, id string) *apitest.Response {
		path, query := in.path, ""
		for _, name := range []string{"{id}", "{paymentId}"} {
			if strings.Contains(path, name) && (in.in != "path" || "{"+in.name+"}" != name) {
				path = strings.ReplaceAll(path, name, uuid.NewString())
			}
		}
		if in.in == "path" {
			path = strings.ReplaceAll(path, "{"+in.name+"}", id)
		}
		if in.in == "query" {
			query = "?" + in.name + "=" + id
		}
		var body any
		if b, ok := bodies[in.operation]; ok {
			body = b()
			if in.in == "body" {
				body.(map[string]any)[in.name] = id
			}
		}
		return env.Do(apitest.Request{Method: in.method, Path: path + query, Token: tokenFor(in.permission), Body: body})
	}
	outcome := func(r *apitest.Response) string {
		if r.StatusCode < 400 {
			return fmt.Sprint(r.StatusCode, " ", strings.TrimSpace(string(r.Body)))
		}
		p := r.Problem(t)
		var fields []string
		if p.Errors != nil {
			for f := range *p.Errors {
				fields = append(fields, f)
			}
		}
		sort.Strings(fields)
		return fmt.Sprint(r.StatusCode, " ", p.Title, " ", fields)
	}
	for _, in := range inputs {
		t.Run(in.operation+" "+in.in+"."+in.name, func(t *testing.T) {
			want := outcome(send(in, uuid.NewString()))
			if strings.HasPrefix(want, "400") {
				t.Fatalf("an unknown version 4 uuid: %s", want)
			}
			for name, id := range oddUUIDs() {
				if got := outcome(send(in, id)); got != want {
					t.Errorf("%s (%s): %s; an unknown version 4 uuid: %s", name, id, got, want)
				}
			}
			r := send(in, "e3e70682-c209-4cac-a29f-6fbed82c07c")
			if p := apitest.WantProblem(t, r, http.StatusBadRequest, ""); p.Errors == nil || len(*p.Errors) == 0 {
				t.Errorf("a uuid one digit short: 400 without errors")
			}
		})
	}
}

// FuzzUUIDInput: any text as an invoice's id in the path and as a filter's
// id is a 404 or an empty list when it has the uuid's 8-4-4-4-12 hex form,
// whatever its version and variant, and a 400 naming the input otherwise;
// never a 5xx.
func FuzzUUIDInput(f *testing.F) {
	for _, id := range oddUUIDs() {
		f.Add(id)
	}
	f.Add(uuid.NewString())
	f.Add("e3e70682c2094cac629f6fbed82c07cd")
	f.Add("{e3e70682-c209-4cac-629f-6fbed82c07cd}")
	f.Add("urn:uuid:e3e70682-c209-4cac-629f-6fbed82c07cd")
	f.Add("e3e70682-c209-4cac-629f-6fbed82c07cdx")
	f.Add("g3e70682-c209-4cac-629f-6fbed82c07cd")
	s := newFuzzServer(f)
	form := regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	f.Fuzz(func(t *testing.T, id string) {
		if !utf8.ValidString(id) || strings.ContainsAny(id, "/?#%\x00") || strings.TrimSpace(id) != id || id == "" {
			return // not a path segment of its own
		}
		e := s.on(t)
		got := e.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + url.PathEscape(id), Token: s.merchant})
		list := e.Do(apitest.Request{Method: "GET", Path: "/payment-requests?merchantAccountId=" + url.QueryEscape(id), Token: s.merchant})
		wantNoServerError(t, "get", got)
		wantNoServerError(t, "list", list)
		if form.MatchString(id) {
			apitest.Want(t, "get "+id, got.StatusCode, http.StatusNotFound)
			apitest.Want(t, "list by "+id, list.StatusCode, http.StatusOK)
			apitest.Want(t, "list by "+id, strings.TrimSpace(string(list.Body)), "[]")
			return
		}
		for what, r := range map[string]*apitest.Response{"get": got, "list": list} {
			if r.StatusCode != http.StatusBadRequest {
				t.Errorf("%s with %q: %d, want 400", what, id, r.StatusCode)
			}
		}
	})
}
