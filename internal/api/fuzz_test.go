package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/demo"
	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/processor"
)

// Fuzz targets that go through the whole HTTP stack: a real server on the
// test database, every answer checked against openapi.yaml by apitest. Each
// fuzz process (the coordinator and each worker) starts one server in the
// target's setup and sends every input to it. `make fuzz` runs each target
// for a few seconds; `go test` runs their seeds (below and under
// testdata/fuzz) as ordinary tests.

// fuzzServer is a server with a seeded demo, and its keys' tokens. Its clock
// stands still (apitest's clock moves only when told), so tokens issued in
// the setup stay valid however long a fuzz run lasts; its per-key rate
// limit is out of reach, so inputs test more than the limiter.
type fuzzServer struct {
	env            *apitest.Env
	seed           demo.Result
	merchant       string // token with every merchant permission
	reseller       string // token with every reseller permission
	mid            string // a merchant account of the merchant
	invoiceNumbers int
}

func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	env := apitest.New(tb, testDSN, apitest.Options{Configure: noRateLimit})
	seed := env.Seed()
	s := &fuzzServer{env: env, seed: seed,
		merchant: env.Token(seed.Merchant.KeyID, seed.Merchant.Secret),
		reseller: env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)}
	var mids []models.MerchantAccount
	env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: s.merchant}).JSON(tb, &mids)
	if len(mids) == 0 {
		tb.Fatal("the demo merchant has no MID")
	}
	s.mid = mids[0].Id.String()
	return s
}

// noRateLimit puts the per-key rate limit out of reach, for tests that
// send more requests than it allows.
func noRateLimit(c *config.Config) { c.RateLimit, c.RateBurst = 1e9, 1e9 }

// on is the server's Env reporting to the test of one input.
func (s *fuzzServer) on(t *testing.T) *apitest.Env {
	e := *s.env
	e.T = t
	return &e
}

// invoice creates an invoice (send: false) through the API.
func (s *fuzzServer) invoice(t *testing.T, amount string) models.Invoice {
	t.Helper()
	s.invoiceNumbers++
	body := map[string]any{"merchantAccountId": s.mid, "invoiceNumber": "FUZZ-" + strconv.Itoa(s.invoiceNumbers), "amount": amount,
		"poNumber": nil, "customerName": "Dana Whitfield", "customerCompany": nil, "customerEmail": "dana@example.com",
		"customerPhone": nil, "delivery": nil, "memo": nil, "dueDate": nil, "lines": nil, "send": false}
	resp := s.on(t).Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: s.merchant, Body: body})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
	var inv models.Invoice
	resp.JSON(t, &inv)
	return inv
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// validHeaderValue is what Go's HTTP client agrees to send as a header
// value: inputs beyond it cannot reach the server as a header at all.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// wantNoServerError fails on a 5xx: no input is a reason for one.
func wantNoServerError(t *testing.T, what string, resp *apitest.Response) {
	t.Helper()
	if resp.StatusCode >= 500 {
		t.Fatalf("%s → %d: %s", what, resp.StatusCode, resp.Body)
	}
}

// FuzzCreateInvoice: any body for POST /payment-requests, with or without
// an Idempotency-Key, is answered 2xx or 4xx as the spec describes; what is
// created holds its text exactly as the server read it. "@MID@" in a body
// stands for a MID of the caller's.
func FuzzCreateInvoice(f *testing.F) {
	for _, seed := range []struct{ body, key string }{
		{`{"merchantAccountId":"@MID@","invoiceNumber":"INV-1","amount":"91.00","poNumber":null,"customerName":"Dana Whitfield","customerCompany":null,"customerEmail":"dana@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":[{"description":"Chafing dish rental","quantity":2,"unitCost":"45.5","uom":null,"commodityCode":null,"upc":null}],"send":false}`, ""},
		// Taxed lines, a discount's tax negative: 750.00 + 61.88 − 50.00 − 4.13 + 25.00.
		{`{"merchantAccountId":"@MID@","invoiceNumber":"TAX-1","amount":"782.75","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"t@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":[{"description":"Catering","quantity":40,"unitCost":"18.75","taxRate":"8.25","uom":null,"commodityCode":null,"upc":null},{"description":"Discount","quantity":1,"unitCost":-50,"taxRate":8.25,"uom":null,"commodityCode":null,"upc":null},{"description":"Delivery","quantity":1,"unitCost":25,"taxRate":null,"uom":null,"commodityCode":null,"upc":null}],"send":false}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"TAX-2","amount":"10.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"t@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":[{"description":"x","quantity":1,"unitCost":10,"taxRate":"100.00001","uom":null,"commodityCode":null,"upc":null}],"send":false}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"INV-2","amount":250,"poNumber":"PO-1","customerName":null,"customerCompany":"Acme","customerEmail":"a@example.com","customerPhone":"+15125550148","delivery":"text","memo":"Thanks","dueDate":"2030-01-31","lines":null,"send":false}`, "key-1"},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"'; DROP TABLE invoices; --","amount":"1.00","poNumber":null,"customerName":"Robert'); DROP TABLE students;--","customerCompany":null,"customerEmail":"x@example.com","customerPhone":null,"delivery":null,"memo":"\u0000","dueDate":null,"lines":null,"send":false}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"\ud800","amount":"1e41","poNumber":null,"customerName":"` + "\xff\xfe" + `","customerCompany":null,"customerEmail":"x@example.com","customerPhone":null,"delivery":"fax","memo":null,"dueDate":"2030-02-30","lines":[],"send":null}`, "k\xff"},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"EMOJI-💸","amount":"0.30","poNumber":null,"customerName":"Zoë 👩🏽‍💻","customerCompany":null,"customerEmail":"zoe@example.com","customerPhone":null,"delivery":null,"memo":"tab\there\r\nnext","dueDate":null,"lines":[{"description":"a","quantity":"1","unitCost":"0.1","uom":"EA","commodityCode":"5310","upc":"036000291452"},{"description":"b","quantity":1,"unitCost":0.2,"uom":null,"commodityCode":null,"upc":null}],"send":false}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"CASE-1","amount":"1","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"Memo":"same name, other case","dueDate":null,"lines":null,"send":false}`, ""},
		// MIDs that are uuids of another version or variant: unknown, a 422.
		{`{"merchantAccountId":"e3e70682-c209-0cac-a29f-6fbed82c07cd","invoiceNumber":"V0","amount":"1.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":false}`, ""},
		{`{"merchantAccountId":"e3e70682-c209-4cac-e29f-6fbed82c07cd","invoiceNumber":"VARIANT","amount":"1.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":false}`, ""},
		{`{"amount":`, ""},
		{`[]`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"X","amount":-1,"lines":[{"quantity":"abc"}]}`, ""},
		// Members the schema does not name: refused, never ignored.
		{`{"merchantAccountId":"@MID@","invoiceNumber":"UNKNOWN-1","amount":"1.00","amout":"2.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":false}`, ""},
		// customerId: none, an unknown one with no email, not a uuid, and another email than an unknown customer's.
		{`{"merchantAccountId":"@MID@","invoiceNumber":"CUST-1","amount":"1.00","customerId":null,"poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":false}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"CUST-2","amount":"1.00","customerId":"e3e70682-c209-4cac-a29f-6fbed82c07cd","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":null,"customerPhone":null,"delivery":"text","memo":null,"dueDate":null,"lines":null,"send":false}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"CUST-3","amount":"1.00","customerId":"customer-1","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":false}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"UNKNOWN-2","amount":"1.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":[{"description":"a","quantity":1,"unitCost":"1.00","uom":null,"commodityCode":null,"upc":null,"taxAmount":"0.00"}],"send":false}`, ""},
		// Drafts: never with send true or a sendAt.
		{`{"merchantAccountId":"@MID@","invoiceNumber":"DRAFT-1","amount":"5.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":null,"draft":true}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"DRAFT-2","amount":"5.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":true,"draft":true,"sendAt":"2030-06-01T09:00:00Z"}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"DRAFT-3","amount":"5.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":false,"draft":"yes"}`, ""},
		// Scheduled sends: in the future within a year, never with send false.
		{`{"merchantAccountId":"@MID@","invoiceNumber":"SCHED-1","amount":"5.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":"2031-01-31","lines":null,"send":null,"sendAt":"2030-06-01T09:00:00+02:00","reminders":true}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"SCHED-2","amount":"5.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":false,"sendAt":"2001-01-01T00:00:00Z","reminders":"yes"}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"SCHED-3","amount":"5.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":null,"sendAt":"9999-12-31T23:59:59+16:00","reminders":null}`, ""},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"UNKNOWN-3","amount":"1.00","poNumber":null,"customerName":null,"customerCompany":null,"customerEmail":"a@example.com","customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"lines":null,"send":false,"":null,"\u0000":1,"` + strings.Repeat("k", 300) + `":1}`, ""},
	} {
		f.Add([]byte(seed.body), seed.key)
	}
	s := newFuzzServer(f)
	members, lineMembers := schemaMembers(f, "CreatePaymentRequest"), schemaMembers(f, "InvoiceLineInput")
	f.Fuzz(func(t *testing.T, body []byte, idempotencyKey string) {
		body = bytes.ReplaceAll(body, []byte("@MID@"), []byte(s.mid))
		req := apitest.Request{Method: "POST", Path: "/payment-requests", Token: s.merchant, Body: body}
		if idempotencyKey != "" && validHeaderValue(idempotencyKey) {
			req.Header = http.Header{"Idempotency-Key": {idempotencyKey}}
		}
		resp := s.on(t).Do(req)
		wantNoServerError(t, "create", resp)
		if resp.StatusCode != http.StatusCreated {
			return
		}
		// What the body says, read as the validator reads it (member names
		// exactly, the last of duplicates), and what was stored of it.
		var sent map[string]any
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("201 for a body that does not decode: %v", err)
		}
		for name := range sent {
			if !members[name] {
				t.Fatalf("201 for a body with the unknown member %q", name)
			}
		}
		var got models.Invoice
		resp.JSON(t, &got)
		same := func(field string, want any, have *string) {
			w, isString := want.(string)
			if want == nil && have != nil || isString && (have == nil || w != *have) || !isString && want != nil {
				t.Errorf("%s sent %s, stored %s", field, jsonText(want), jsonText(have))
			}
		}
		same("invoiceNumber", sent["invoiceNumber"], &got.InvoiceNumber)
		same("poNumber", sent["poNumber"], got.PoNumber)
		same("customerName", sent["customerName"], got.CustomerName)
		same("customerCompany", sent["customerCompany"], got.CustomerCompany)
		same("customerEmail", sent["customerEmail"], got.CustomerEmail)
		same("customerPhone", sent["customerPhone"], got.CustomerPhone)
		same("memo", sent["memo"], got.Memo)
		lines, _ := sent["lines"].([]any)
		var lineSum apd.Decimal
		if got.LineItems == nil || len(lines) != len(*got.LineItems) {
			t.Fatalf("%d lines sent, %s stored", len(lines), jsonText(got.LineItems))
		}
		for i, l := range lines {
			line, _ := l.(map[string]any)
			for name := range line {
				if !lineMembers[name] {
					t.Fatalf("201 for a line with the unknown member %q", name)
				}
			}
			g := (*got.LineItems)[i]
			same("description", line["description"], &g.Description)
			same("uom", line["uom"], g.Uom)
			same("commodityCode", line["commodityCode"], g.CommodityCode)
			same("upc", line["upc"], g.Upc)
			lineSum = add(t, lineSum, g.Amount.Decimal, g.TaxAmount.Decimal)
		}
		// The amount is what the lines add up to, tax included, and the
		// subtotal and tax are theirs.
		if len(lines) > 0 && lineSum.Cmp(&got.Amount.Decimal) != 0 {
			t.Errorf("lines add up to %s, amount %s", lineSum.Text('f'), got.Amount.Text('f'))
		}
		if total := add(t, apd.Decimal{}, got.Subtotal.Decimal, got.TaxAmount.Decimal); total.Cmp(&got.Amount.Decimal) != 0 {
			t.Errorf("subtotal %s + taxAmount %s is not amount %s", got.Subtotal.Text('f'), got.TaxAmount.Text('f'), got.Amount.Text('f'))
		}
	})
}

// FuzzPatchPaymentRequest: any body and If-Match sent as a change of an
// open invoice is answered 200 or a 4xx problem, never a 5xx. A 200 names
// only members of the schema, stores each text member exactly as sent,
// keeps those left out, and counts one version when any was given; a
// refusal changes nothing. "@MID@" in a body stands for a MID of the
// caller's.
func FuzzPatchPaymentRequest(f *testing.F) {
	for _, seed := range []struct{ body, ifMatch string }{
		{`{"memo":"Thank you","poNumber":null}`, `"1"`},
		{`{"lines":[{"description":"Chafing dish rental","quantity":2,"unitCost":"45.5","uom":null,"commodityCode":null,"upc":null}]}`, ""},
		{`{"amount":"91.00","lines":[{"description":"a","quantity":"1","unitCost":"91","uom":"EA","commodityCode":"5310","upc":"036000291452"}]}`, "*"},
		{`{"amount":"12.00","lines":null,"customerEmail":"new@example.com","delivery":"text","customerPhone":"+15125550148"}`, `"1", "2"`},
		{`{"merchantAccountId":"@MID@","invoiceNumber":"PATCHED-1","dueDate":"2030-02-28","reminders":false}`, ""},
		{`{"amount":null}`, ""},
		{`{"customerEmail":null}`, ""},
		{`{"send":true}`, ""},
		{`{"draft":false,"sendAt":"2030-01-01T00:00:00Z"}`, ""},
		{`{"memo":"\u0000","customerName":"` + "\xff" + `"}`, ""},
		{`{"lines":[]}`, `W/"1"`},
		{`{"lines":[{"quantity":"abc"}]}`, `"0"`},
		{`{"dueDate":"2030-02-30"}`, `"01"`},
		{`{}`, `"1"`},
		{`{"amount":`, ""},
		{`[]`, ""},
		{`null`, ""},
		{`{"Memo":"other case","amout":"2.00"}`, ""},
	} {
		f.Add([]byte(seed.body), seed.ifMatch)
	}
	s := newFuzzServer(f)
	members := schemaMembers(f, "PaymentRequestChange")
	f.Fuzz(func(t *testing.T, body []byte, ifMatch string) {
		e := s.on(t)
		body = bytes.ReplaceAll(body, []byte("@MID@"), []byte(s.mid))
		inv := s.invoice(t, "30.00")
		read := func() (models.Invoice, string) {
			resp := e.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + inv.Id.String(), Token: s.merchant})
			var got models.Invoice
			resp.JSON(t, &got)
			return got, string(resp.Body)
		}
		before, beforeRaw := read()
		h := http.Header{"Content-Type": {"application/merge-patch+json"}}
		if ifMatch != "" && validHeaderValue(ifMatch) {
			h.Set("If-Match", ifMatch)
		}
		resp := e.Do(apitest.Request{Method: "PATCH", Path: "/payment-requests/" + inv.Id.String(), Token: s.merchant, Body: body, Header: h})
		wantNoServerError(t, "patch", resp)
		after, afterRaw := read()
		if resp.StatusCode != http.StatusOK {
			if afterRaw != beforeRaw {
				t.Fatalf("a %d changed the invoice:\n%s\n%s", resp.StatusCode, beforeRaw, afterRaw)
			}
			return
		}
		var sent map[string]any
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("200 for a body that does not decode: %v", err)
		}
		for name := range sent {
			if !members[name] {
				t.Fatalf("200 for a body with the unknown member %q", name)
			}
		}
		wantVersion := before.Version
		if len(sent) > 0 {
			wantVersion++
		}
		if after.Version != wantVersion {
			t.Errorf("version %d after a change of %d members, want %d", after.Version, len(sent), wantVersion)
		}
		text := func(field string, had, have *string) { wantPatchedText(t, sent, field, had, have) }
		text("invoiceNumber", &before.InvoiceNumber, &after.InvoiceNumber)
		text("poNumber", before.PoNumber, after.PoNumber)
		text("customerName", before.CustomerName, after.CustomerName)
		text("customerCompany", before.CustomerCompany, after.CustomerCompany)
		text("customerEmail", before.CustomerEmail, after.CustomerEmail)
		text("customerPhone", before.CustomerPhone, after.CustomerPhone)
		text("memo", before.Memo, after.Memo)
		if _, given := sent["lines"]; !given {
			if _, given := sent["amount"]; !given && after.Amount.Text('f') != before.Amount.Text('f') {
				t.Errorf("neither amount nor lines sent, but the amount became %s", after.Amount.Text('f'))
			}
		}
		apitest.Want(t, "link", apitest.Text(after.Link), apitest.Text(before.Link))
	})
}

// wantPatchedText checks a text member after a merge patch sent took
// effect: as sent when sent (null clears it), else as it was.
func wantPatchedText(t *testing.T, sent map[string]any, field string, had, have *string) {
	t.Helper()
	want, given := sent[field]
	if !given {
		if jsonText(had) != jsonText(have) {
			t.Errorf("%s not sent, but %s became %s", field, jsonText(had), jsonText(have))
		}
		return
	}
	w, isString := want.(string)
	if want == nil && have != nil || isString && (have == nil || w != *have) || !isString && want != nil {
		t.Errorf("%s sent %s, stored %s", field, jsonText(want), jsonText(have))
	}
}

// FuzzRecordPayment: any body posted as a payment made outside the card
// is answered 201, or a 4xx problem, never a 5xx; a 201 raised amountPaid
// by exactly the amount sent (decimals, never float), and a refusal
// changed nothing.
func FuzzRecordPayment(f *testing.F) {
	for _, seed := range []string{
		`{"amount":"12.30","method":"check","reference":"Check 1042","receivedAt":"2025-03-01T10:00:00Z"}`,
		`{"amount":5,"method":"cash","reference":null}`,
		`{"amount":"0.1","method":"bank_transfer"}`,
		`{"amount":"0.001","method":"other"}`,
		`{"amount":"-1","method":"cash"}`,
		`{"amount":"1e3","method":"cash"}`,
		`{"amount":"99999999999.99","method":"cash"}`,
		`{"amount":"1.00","method":"crypto"}`,
		`{"amount":"1.00","method":"cash","receivedAt":"2999-01-01T00:00:00Z"}`,
		`{"amount":"1.00","method":"cash","receivedAt":"2025-02-30T00:00:00Z"}`,
		`{"amount":"1.00","method":"cash","reference":"` + strings.Repeat("r", 101) + `"}`,
		`{"amount":"1.00","method":"cash","amout":"2.00"}`,
		`{"amount":"1.00"}`,
		`{"amount":`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	s := newFuzzServer(f)
	members := schemaMembers(f, "RecordPaymentRequest")
	f.Fuzz(func(t *testing.T, body []byte) {
		e := s.on(t)
		inv := s.invoice(t, "999999999.99")
		resp := e.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: s.merchant, Body: body})
		wantNoServerError(t, "record payment", resp)
		var after models.Invoice
		e.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + inv.Id.String(), Token: s.merchant}).JSON(t, &after)
		if resp.StatusCode != http.StatusCreated {
			if after.AmountPaid.Cmp(&inv.AmountPaid.Decimal) != 0 {
				t.Fatalf("%d, yet amountPaid moved from %s to %s", resp.StatusCode, inv.AmountPaid.Text('f'), after.AmountPaid.Text('f'))
			}
			return
		}
		var sent map[string]json.RawMessage
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("201 for a body that does not decode: %v", err)
		}
		for name := range sent {
			if !members[name] {
				t.Fatalf("201 for a body with the unknown member %q", name)
			}
		}
		var amount jsonnum.Decimal
		if err := json.Unmarshal(sent["amount"], &amount); err != nil {
			t.Fatalf("201 for an amount that does not decode: %s", sent["amount"])
		}
		if after.AmountPaid.Cmp(&amount.Decimal) != 0 {
			t.Fatalf("sent %s, amountPaid now %s", amount.Text('f'), after.AmountPaid.Text('f'))
		}
	})
}

// schemaMembers are the property names of a schema of openapi.yaml.
func schemaMembers(tb testing.TB, schema string) map[string]bool {
	tb.Helper()
	spec, err := gen.GetSpec()
	if err != nil {
		tb.Fatal(err)
	}
	names := map[string]bool{}
	for name := range spec.Components.Schemas[schema].Value.Properties {
		names[name] = true
	}
	return names
}

// FuzzPayForm: any form posted to a pay link is answered with a page, never
// a server error (but for the simulator's card that stands for a processor
// outage, whose 503 is the designed answer), and the card number sent is
// never shown back. "@CSRF@" in tail stands for the page's form token.
func FuzzPayForm(f *testing.F) {
	f.Add(processor.TestCardApprove, "1230", "123", "Dana Whitfield", "10.00", "", true, []byte(""))
	f.Add(processor.TestCardDecline, "12/30", "1234", "Dana", "", "text", false, []byte(""))
	f.Add(processor.TestCardError, "1230", "123", "Dana", "1", "email", false, []byte(""))
	f.Add("4111 1111 1111 1111", "0130", "12", "<script>alert(1)</script>", "1,000.5", "fax", true, []byte("csrfToken=x"))
	f.Add("4111-1111-1111-1112", "13/30", "abc", "\x00\xff", "$0.001", "", false, []byte("%zz"))
	f.Add("", "", "", "", "-1", "", false, []byte("cardNumber=4111111111111111&csrfToken=@CSRF@"))
	f.Add("411111111111111111111111", "0000", "0000", strings.Repeat("n", 201), "999999999999.99", "", false, []byte(""))
	s := newFuzzServer(f)
	var (
		inv      models.Invoice
		path     string
		token    string
		attempts int
	)
	f.Fuzz(func(t *testing.T, cardNumber, expiry, cvv, name, amount, prefers string, saveCard bool, tail []byte) {
		// A fresh invoice before the link's attempt limit is reached, and
		// after anything that may have changed it.
		if path == "" || attempts >= 10 {
			inv = s.invoice(t, "999999999.99")
			u, err := url.Parse(*inv.Link)
			if err != nil {
				t.Fatal(err)
			}
			path, attempts = u.Path, 0
			token = apitest.FormToken(t, s.on(t).Visit(t, "GET", path, nil, nil))
		}
		form := url.Values{"csrfToken": {token}, "cardNumber": {cardNumber}, "expiry": {expiry}, "cvv": {cvv},
			"cardholderName": {name}, "amount": {amount}, "prefers": {prefers}}
		if saveCard {
			form.Set("saveCard", "on")
		}
		body := form.Encode()
		if len(tail) > 0 {
			body += "&" + strings.ReplaceAll(string(tail), "@CSRF@", url.QueryEscape(token))
		}
		resp := postForm(t, s.on(t), path, body)
		attempts++
		if resp.StatusCode != http.StatusBadRequest {
			path = ""
		}
		sent, _ := url.ParseQuery(body)
		number := sent.Get("cardNumber")
		digits := strings.NewReplacer(" ", "", "-", "").Replace(number)
		switch {
		case resp.StatusCode == http.StatusBadGateway && digits == processor.TestCardError:
		case resp.StatusCode >= 500:
			t.Fatalf("pay → %d: %s", resp.StatusCode, resp.Body)
		}
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusSeeOther && !strings.HasPrefix(ct, "text/html") {
			t.Errorf("pay → %d with Content-Type %q", resp.StatusCode, ct)
		}
		// Never echoed: unless the same text went in another field, which
		// the page may show.
		if len(digits) >= 12 {
			for field, values := range sent {
				for _, v := range values {
					if field != "cardNumber" && (strings.Contains(v, digits) || strings.Contains(v, number)) {
						return
					}
				}
			}
			for _, shown := range []string{number, html.EscapeString(number), digits} {
				if strings.Contains(resp.Body, shown) {
					t.Fatalf("the page (%d) shows the card number %q", resp.StatusCode, number)
				}
			}
		}
	})
}

// postForm posts an encoded form body to a pay page.
func postForm(t *testing.T, env *apitest.Env, path, body string) apitest.Page {
	t.Helper()
	req, err := http.NewRequest("POST", env.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := env.Client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return apitest.Page{Response: resp, Body: b.String()}
}

// cursorSeeds are cursors of every kind: real ones are added by the targets.
var cursorSeeds = []string{
	"", "x", "%", "\x00", "\xff", "'; DROP TABLE invoices; --",
	base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00Z","i":"01a20120-d584-70b4-88aa-bceba240a4e4"}`)),
	base64.RawURLEncoding.EncodeToString([]byte(`{"t":"0001-01-01T00:00:00Z","i":"00000000-0000-0000-0000-000000000000"}`)),
	base64.RawURLEncoding.EncodeToString([]byte(`{"t":"9999-12-31T23:59:59.999999999+14:00","i":"ffffffff-ffff-ffff-ffff-ffffffffffff"}`)),
	base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00Z","i":"not-a-uuid","s":"\u0000"}`)),
	base64.RawURLEncoding.EncodeToString([]byte(`{"submittedAt":"2026-01-01T00:00:00Z","id":"01a20120-d584-70b4-88aa-bceba240a4e4"}`)),
	base64.StdEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00Z"}`)),
	strings.Repeat("A", 4096),
}

var nextLinkCursor = regexp.MustCompile(`[?&]cursor=([^&>]*)`)

// firstCursor is the cursor of a list's second page, from its Link header.
func firstCursor(tb testing.TB, env *apitest.Env, path, token string) string {
	tb.Helper()
	resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: token})
	m := nextLinkCursor.FindStringSubmatch(resp.Header.Get("Link"))
	if m == nil {
		tb.Fatalf("GET %s: no next page: %d %v", path, resp.StatusCode, resp.Header)
	}
	c, err := url.QueryUnescape(m[1])
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// fuzzCursor sends any cursor to a list: the answer is the page after it
// (200) or a 400 naming query.cursor.
func fuzzCursor(t *testing.T, env *apitest.Env, path, token, cursor string) {
	resp := env.Do(apitest.Request{Method: "GET", Path: path + "?limit=2&cursor=" + url.QueryEscape(cursor), Token: token})
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusBadRequest:
		if p := resp.Problem(t); p.Errors == nil || len((*p.Errors)["query.cursor"]) == 0 {
			t.Errorf("400 without errors[query.cursor]: %s", resp.Body)
		}
	default:
		t.Fatalf("cursor %q → %d: %s", cursor, resp.StatusCode, resp.Body)
	}
}

// FuzzInvoiceListCursor: GET /payment-requests with any cursor.
func FuzzInvoiceListCursor(f *testing.F) {
	s := newFuzzServer(f)
	for range 3 {
		s.invoiceNumbers++
		body := map[string]any{"merchantAccountId": s.mid, "invoiceNumber": "CURSOR-" + strconv.Itoa(s.invoiceNumbers), "amount": "1.00",
			"poNumber": nil, "customerName": nil, "customerCompany": nil, "customerEmail": "dana@example.com",
			"customerPhone": nil, "delivery": nil, "memo": nil, "dueDate": nil, "lines": nil, "send": false}
		if resp := s.env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: s.merchant, Body: body}); resp.StatusCode != http.StatusCreated {
			f.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
		}
	}
	for _, c := range append(cursorSeeds, firstCursor(f, s.env, "/payment-requests?limit=2", s.merchant)) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		fuzzCursor(t, s.on(t), "/payment-requests", s.merchant, cursor)
	})
}

// FuzzCustomerSearch: GET /customers with any q and email is a page (200)
// or a 400 naming only those parameters; never a 5xx, and a q of 2 to 100
// characters that the page holds is found in its name, company or email.
func FuzzCustomerSearch(f *testing.F) {
	s := newFuzzServer(f)
	for _, c := range []map[string]any{{"email": "dana@whitfield.example", "name": "Dana Whitfield"},
		{"email": "ap@brightside.example", "company": "Brightside 100% Plumbing_Co"}} {
		if resp := s.env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: s.merchant, Body: c}); resp.StatusCode != http.StatusCreated {
			f.Fatalf("create customer: %d %s", resp.StatusCode, resp.Body)
		}
	}
	for _, seed := range [][2]string{{"whit", ""}, {"a", ""}, {"%_", ""}, {"100%", ""}, {"\\", ""}, {"'; DROP TABLE customers; --", ""},
		{"Zoë 👩🏽‍💻", ""}, {"", "DANA@whitfield.example"}, {"\xff\xfe", "x\x00"}, {strings.Repeat("q", 101), ""}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, q, email string) {
		v := url.Values{}
		if q != "" {
			v.Set("q", q)
		}
		if email != "" {
			v.Set("email", email)
		}
		resp := s.on(t).Do(apitest.Request{Method: "GET", Path: "/customers?" + v.Encode(), Token: s.merchant})
		switch resp.StatusCode {
		case http.StatusOK:
			var page []models.Customer
			resp.JSON(t, &page)
			for _, c := range page {
				hay := strings.ToLower(c.Email + "\n" + apitest.Text(c.Name) + "\n" + apitest.Text(c.Company))
				if q != "" && !strings.Contains(hay, strings.ToLower(q)) {
					t.Errorf("q %q found %s", q, c.Email)
				}
			}
		case http.StatusBadRequest:
			p := resp.Problem(t)
			if p.Errors == nil {
				t.Fatalf("400 without errors: %s", resp.Body)
			}
			for field := range *p.Errors {
				if field != "query.q" && field != "query.email" {
					t.Errorf("400 naming %s: %s", field, resp.Body)
				}
			}
		default:
			t.Fatalf("q %q email %q → %d: %s", q, email, resp.StatusCode, resp.Body)
		}
	})
}

// FuzzPatchCustomer: any body sent as a merge patch of a customer, as
// application/merge-patch+json or application/json, is answered 200 or a
// 4xx problem, never a 5xx; a 200 took only members of the schema, stored
// each text member exactly as sent and kept those left out; a refusal
// changed nothing.
func FuzzPatchCustomer(f *testing.F) {
	for _, seed := range []struct {
		body  string
		plain bool
	}{
		{`{"name":"Dana Whitfield","phone":null}`, false},
		{`{"company":"Whitfield Catering","taxExempt":true,"notes":"Resale certificate on file."}`, true},
		{`{"address":{"line1":"1 Main St","city":"Austin","state":"TX","postalCode":"78701","country":"US"}}`, false},
		{`{"address":{"line1":"1 Main St","city":"Paris","country":"EU"}}`, false},
		{`{"address":null,"notes":null}`, true},
		{`{"email":"TAKEN@example.com"}`, false},
		{`{"email":null}`, false},
		{`{"taxExempt":null}`, false},
		{`{"prefers":"text"}`, false},
		{`{"name":"\u0000","company":"` + "\xff" + `"}`, false},
		{`{"notes":"` + strings.Repeat("n", 2001) + `"}`, true},
		{`{}`, false},
		{`{"name":`, false},
		{`[]`, true},
		{`null`, false},
	} {
		f.Add([]byte(seed.body), seed.plain)
	}
	s := newFuzzServer(f)
	if resp := s.env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: s.merchant,
		Body: map[string]any{"email": "taken@example.com"}}); resp.StatusCode != http.StatusCreated {
		f.Fatalf("create customer: %d %s", resp.StatusCode, resp.Body)
	}
	members := schemaMembers(f, "CustomerUpdate")
	f.Fuzz(func(t *testing.T, body []byte, plain bool) {
		e := s.on(t)
		resp := e.Do(apitest.Request{Method: "POST", Path: "/customers", Token: s.merchant,
			Body: map[string]any{"email": uuid.NewString() + "@example.com", "name": "Before", "notes": "before"}})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create customer: %d %s", resp.StatusCode, resp.Body)
		}
		var c models.Customer
		resp.JSON(t, &c)
		read := func() (models.Customer, string) {
			resp := e.Do(apitest.Request{Method: "GET", Path: "/customers/" + c.Id.String(), Token: s.merchant})
			var got models.Customer
			resp.JSON(t, &got)
			return got, string(resp.Body)
		}
		before, beforeRaw := read()
		contentType := "application/merge-patch+json"
		if plain {
			contentType = "application/json"
		}
		resp = e.Do(apitest.Request{Method: "PATCH", Path: "/customers/" + c.Id.String(), Token: s.merchant, Body: body,
			Header: http.Header{"Content-Type": {contentType}}})
		wantNoServerError(t, "patch", resp)
		after, afterRaw := read()
		if resp.StatusCode != http.StatusOK {
			if afterRaw != beforeRaw {
				t.Fatalf("a %d changed the customer:\n%s\n%s", resp.StatusCode, beforeRaw, afterRaw)
			}
			return
		}
		var sent map[string]any
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("200 for a body that does not decode: %v", err)
		}
		for name := range sent {
			if !members[name] {
				t.Fatalf("200 for a body with the unknown member %q", name)
			}
		}
		text := func(field string, had, have *string) { wantPatchedText(t, sent, field, had, have) }
		text("email", &before.Email, &after.Email)
		text("name", before.Name, after.Name)
		text("company", before.Company, after.Company)
		text("phone", before.Phone, after.Phone)
		text("notes", before.Notes, after.Notes)
	})
}

// FuzzApplicationListCursor: GET /applications with any cursor.
func FuzzApplicationListCursor(f *testing.F) {
	s := newFuzzServer(f)
	for _, c := range append(cursorSeeds, firstCursor(f, s.env, "/applications?limit=2", s.reseller)) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		fuzzCursor(t, s.on(t), "/applications", s.reseller, cursor)
	})
}

// FuzzDateFilters: any createdFrom and createdTo on each of the four lists
// that take them is answered 200, or 400 naming only those parameters;
// never a 5xx (an offset PostgreSQL cannot hold was one).
func FuzzDateFilters(f *testing.F) {
	for _, seed := range [][2]string{
		{"2025-03-01T00:00:00Z", "2025-04-01T00:00:00Z"},
		{"2025-03-01T00:00:00+16:00", ""},
		{"", "2025-03-01T00:00:00-16:00"},
		{"2025-03-01T00:00:00+15:59", "2025-03-01T00:00:00-15:59"},
		{"2025-03-01T00:00:00+24:00", "2025-03-01T00:00:00-23:59"},
		{"2025-03-01T00:00:00+99:99", "2025-03-01T00:00:00+15:60"},
		{"2025-02-30T00:00:00Z", "2016-12-31T23:59:60Z"},
		{"0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999+14:00"},
		{"0001-01-01T00:00:00+15:59", "9999-12-31T23:59:59-15:59"},
		{"2025-03-01t00:00:00z", "2025-03-01 00:00:00Z"},
		{"2025-03-01T00:00:00.1234567891234Z", "2025-03-01"},
		{"\x00", "\xff"},
	} {
		f.Add(seed[0], seed[1])
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, from, to string) {
		q := url.Values{}
		if from != "" {
			q.Set("createdFrom", from)
		}
		if to != "" {
			q.Set("createdTo", to)
		}
		for _, list := range []string{"/payment-requests", "/card-payments", "/deposits", "/events"} {
			resp := s.on(t).Do(apitest.Request{Method: "GET", Path: list + "?" + q.Encode(), Token: s.merchant})
			switch resp.StatusCode {
			case http.StatusOK:
			case http.StatusBadRequest:
				p := resp.Problem(t)
				if p.Errors == nil || len(*p.Errors) == 0 {
					t.Fatalf("GET %s: 400 without errors: %s", list, resp.Body)
				}
				for field := range *p.Errors {
					if field != "query.createdFrom" && field != "query.createdTo" {
						t.Errorf("GET %s: 400 naming %q: %s", list, field, resp.Body)
					}
				}
			default:
				t.Fatalf("GET %s?%s → %d: %s", list, q.Encode(), resp.StatusCode, resp.Body)
			}
		}
	})
}

// FuzzToken: any body, content type and HTTP Basic credentials at the token
// endpoint get one of its documented answers (200, 400, 401, 415, 429),
// never a server error. "@ID@" and "@SECRET@" stand for a real key's.
func FuzzToken(f *testing.F) {
	form, jsonType := "application/x-www-form-urlencoded", "application/json"
	for _, seed := range []struct {
		contentType string
		body        string
		basic       bool
		id, secret  string
	}{
		{form, "grant_type=client_credentials&client_id=@ID@&client_secret=@SECRET@", false, "", ""},
		{jsonType, `{"grant_type":"client_credentials","client_id":"@ID@","client_secret":"@SECRET@"}`, false, "", ""},
		// Parameters it does not know are ignored here (RFC 6749 §3.2).
		{jsonType, `{"grant_type":"client_credentials","client_id":"@ID@","client_secret":"@SECRET@","scope":"payments.view"}`, false, "", ""},
		{form, "grant_type=client_credentials&client_id=@ID@&client_secret=@SECRET@&audience=x", false, "", ""},
		{form, "grant_type=client_credentials", true, "@ID@", "@SECRET@"},
		{form, "grant_type=client_credentials&client_id=@ID@", true, "@ID@", "wrong"},
		{form, "grant_type=password&client_id=%FF&client_secret=%00", false, "", ""},
		{jsonType, `{"grant_type":"client_credentials","client_id":"mk_\u0000","client_secret":"\ud800"}`, false, "", ""},
		{jsonType, `{"grant_type":1,"client_id":["x"]}`, false, "", ""},
		{"text/plain", "grant_type=client_credentials", false, "", ""},
		{"", "", true, "\xff\x00", "\n"},
		{"multipart/form-data; boundary=x", "--x--", false, "", ""},
		{form + "; charset=utf-8", "%zz", true, ":", ":"},
	} {
		f.Add(seed.contentType, []byte(seed.body), seed.basic, seed.id, seed.secret)
	}
	s := newFuzzServer(f)
	requests := 0
	f.Fuzz(func(t *testing.T, contentType string, body []byte, basic bool, id, secret string) {
		// The limit is 30 token requests a minute from an address: a
		// minute passes every 25 inputs.
		if requests++; requests%25 == 0 {
			s.env.Clock.Advance(time.Minute)
		}
		r := strings.NewReplacer("@ID@", s.seed.Merchant.KeyID, "@SECRET@", s.seed.Merchant.Secret)
		header := http.Header{}
		if contentType != "" && validHeaderValue(contentType) {
			header.Set("Content-Type", contentType)
		}
		if basic {
			header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(r.Replace(id)+":"+r.Replace(secret))))
		}
		resp := s.on(t).Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: []byte(r.Replace(string(body))), Header: header})
		switch resp.StatusCode {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusUnsupportedMediaType, http.StatusTooManyRequests:
		default:
			t.Fatalf("token → %d: %s", resp.StatusCode, resp.Body)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("token → %d with Cache-Control %q", resp.StatusCode, cc)
		}
	})
}
