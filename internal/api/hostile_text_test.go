package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

// oddTexts are valid text that a careless service mangles: each is stored
// and returned byte for byte, or refused with a 400 naming the field.
var oddTexts = []struct{ name, value string }{
	{"SQL quote and comment", `'; DROP TABLE invoices; --`},
	{"SQL always true", `" OR "1"="1`},
	{"SQL backslash and sleep", `\'; SELECT pg_sleep(10); --`},
	{"LIKE wildcards", `%_%\_`},
	{"placeholders", `$1 ? :name`},
	{"control characters", "tab\there\r\nnext\x01\x1b[31m\x1f\x7f"},
	{"C1 and line separators", "a\u0085b\u2028c\u2029d"},
	{"zero width and BOM", "\ufeffa\u200bb\u200d"},
	{"bidi override", "invoice\u202efdp.exe"},
	{"emoji", "💸🧾 👩🏽‍💻 🇺🇸"},
	{"combining marks", "Zoe\u0308 e\u0301"},
	{"astral and last code point", "𝔘𝔫𝔦 \U0010FFFF"},
	{"replacement character", "\uFFFD"},
	{"CJK and RTL", "請求書 فاتورة"},
	{"HTML", `<script>alert("x")</script>&amp;`},
	{"JSON-looking", `{"amount":"0.01"}`},
}

// refusedTexts are JSON string literals (quotes included) whose text
// payreq cannot give back exactly: each is a 400 naming the field.
var refusedTexts = []struct{ name, literal string }{
	{"invalid UTF-8", "\"ab\xff\xfe\""},
	{"truncated UTF-8", "\"ab\xe2\x82\""},
	{"overlong UTF-8", "\"\xc0\xaf\""},
	{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\""},
	{"escaped lone high surrogate", `"a\ud800b"`},
	{"escaped lone low surrogate", `"a\udc00"`},
	{"escaped high surrogate at the end", `"a\ud83d"`},
	{"escaped NUL", `"a\u0000b"`},
}

// stringFields are the create body's free-text fields with their limits;
// line fields are in the body's first line.
var stringFields = []struct {
	name  string
	limit int
	line  bool
}{
	{"invoiceNumber", 64, false}, {"poNumber", 64, false}, {"customerName", 200, false},
	{"customerCompany", 200, false}, {"customerEmail", 254, false}, {"customerPhone", 32, false},
	{"memo", 2000, false}, {"description", 500, true}, {"uom", 32, true}, {"commodityCode", 32, true}, {"upc", 32, true},
}

// oddBody is a create body with a line, whose field (named as sent) holds
// the raw JSON literal.
func oddBody(m apitest.Merchant, number, field, literal string) []byte {
	b := m.Body(number, "12.34", apitest.Line("1", "12.34"))
	line := b["lines"].([]map[string]any)[0]
	const marker = "\x00odd\x00"
	if name, ok := strings.CutPrefix(field, "lines[0]."); ok {
		line[name] = marker
	} else {
		b[field] = marker
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		panic(err)
	}
	return bytes.Replace(buf.Bytes(), []byte(`"\u0000odd\u0000"`), []byte(literal), 1)
}

// fieldOf reads a field (named as sent) of an invoice read back in full.
func fieldOf(inv models.Invoice, field string) *string {
	deref := func(s *string) *string { return s }
	switch field {
	case "invoiceNumber":
		return &inv.InvoiceNumber
	case "poNumber":
		return deref(inv.PoNumber)
	case "customerName":
		return deref(inv.CustomerName)
	case "customerCompany":
		return deref(inv.CustomerCompany)
	case "customerEmail":
		return deref(inv.CustomerEmail)
	case "customerPhone":
		return deref(inv.CustomerPhone)
	case "memo":
		return deref(inv.Memo)
	}
	if inv.LineItems == nil || len(*inv.LineItems) == 0 {
		return nil
	}
	l := (*inv.LineItems)[0]
	switch field {
	case "lines[0].description":
		return &l.Description
	case "lines[0].uom":
		return deref(l.Uom)
	case "lines[0].commodityCode":
		return deref(l.CommodityCode)
	case "lines[0].upc":
		return deref(l.Upc)
	}
	panic("unknown field " + field)
}

// wantOnlyFieldError checks a 400 whose errors name exactly field.
func wantOnlyFieldError(t *testing.T, resp *apitest.Response, field string) {
	t.Helper()
	p := apitest.WantProblem(t, resp, http.StatusBadRequest, "")
	if p.Errors == nil || !slices.Equal(slices.Sorted(maps.Keys(*p.Errors)), []string{field}) {
		t.Errorf("errors %v, want only %s: %s", p.Errors, field, resp.Body)
	}
}

// Every free-text field of POST /payment-requests, and each way text can
// be odd: stored and read back byte for byte, or refused with 400 naming
// exactly that field; invalid UTF-8, lone surrogates and NUL always
// refused; lengths counted in characters, at the limit accepted and one
// beyond refused. No 500, nothing stored half.
func TestOddTextInEveryField(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit})
	m := apitest.NewMerchant(t, env)
	number := 0
	nextNumber := func() string { number++; return fmt.Sprintf("ODD-%d", number) }
	create := func(field, literal string) *apitest.Response {
		n := nextNumber()
		if field == "invoiceNumber" {
			n = "unused"
		}
		return env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: oddBody(m, n, field, literal)})
	}
	// storedOrRefused checks that value came back exactly, or was refused
	// for field alone.
	storedOrRefused := func(t *testing.T, field, value string, resp *apitest.Response) {
		t.Helper()
		switch resp.StatusCode {
		case http.StatusCreated:
			var created models.Invoice
			resp.JSON(t, &created)
			got, raw := m.Read(t, created.Id)
			if v := fieldOf(got, field); v == nil || *v != value {
				t.Errorf("%s sent %q, read back %s: %s", field, value, jsonText(v), raw)
			}
		case http.StatusBadRequest:
			wantOnlyFieldError(t, resp, field)
		default:
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	}

	for _, f := range stringFields {
		field := f.name
		if f.line {
			field = "lines[0]." + f.name
		}
		t.Run(field, func(t *testing.T) {
			for _, odd := range oddTexts {
				var lit bytes.Buffer
				enc := json.NewEncoder(&lit)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(odd.value); err != nil {
					t.Fatal(err)
				}
				resp := create(field, strings.TrimSpace(lit.String()))
				if field == "customerEmail" {
					wantOnlyFieldError(t, resp, field) // none of them is an address
					continue
				}
				storedOrRefused(t, field, odd.value, resp)
			}
			for _, bad := range refusedTexts {
				resp := create(field, bad.literal)
				p := apitest.WantProblem(t, resp, http.StatusBadRequest, "")
				if p.Errors == nil || len((*p.Errors)[field]) == 0 {
					t.Errorf("%s: errors do not name %s: %s", bad.name, field, resp.Body)
				}
			}

			// Addresses are stored as sent: a quoted local part keeps its
			// quotes, letters keep their case.
			if field == "customerEmail" {
				for _, addr := range []string{`"x.y"@example.com`, `"dana w"@example.com`, "Dana.Whitfield@Example.COM"} {
					lit, _ := json.Marshal(addr)
					resp := create(field, string(lit))
					if resp.StatusCode != http.StatusCreated {
						t.Fatalf("%s: %d %s", addr, resp.StatusCode, resp.Body)
					}
					storedOrRefused(t, field, addr, resp)
				}
			}

			// Lengths are characters, not bytes: at the limit in
			// multi-byte characters it is stored, one more is refused.
			at, over := strings.Repeat("é", f.limit), strings.Repeat("💸", f.limit+1)
			if field == "customerEmail" {
				local := strings.Repeat("a", 64) + "@"
				at = local + strings.Repeat("b", f.limit-len(local)-4) + ".com"
				over = local + strings.Repeat("b", f.limit-len(local)-3) + ".com"
			}
			for value, accepted := range map[string]bool{at: true, over: false} {
				lit, _ := json.Marshal(value)
				resp := create(field, string(lit))
				if !accepted {
					wantOnlyFieldError(t, resp, field)
					continue
				}
				if resp.StatusCode != http.StatusCreated {
					t.Fatalf("%d characters: %d %s", f.limit, resp.StatusCode, resp.Body)
				}
				storedOrRefused(t, field, value, resp)
			}
		})
	}

	// The fields that take a fixed form refuse odd text by name.
	for _, field := range []string{"merchantAccountId", "amount", "delivery", "dueDate"} {
		for _, odd := range oddTexts {
			lit, _ := json.Marshal(odd.value)
			if r := create(field, string(lit)); r.StatusCode != http.StatusBadRequest {
				t.Errorf("%s = %q: %d %s", field, odd.value, r.StatusCode, r.Body)
			}
		}
		for _, bad := range refusedTexts {
			if r := create(field, bad.literal); r.StatusCode != http.StatusBadRequest {
				t.Errorf("%s = %s: %d %s", field, bad.name, r.StatusCode, r.Body)
			}
		}
	}

	// The tables are all still there, and hold what was stored.
	var n int
	if err := env.App.DB.Get(&n, `SELECT count(*) FROM invoices`); err != nil || n == 0 {
		t.Fatalf("invoices: %d, %v", n, err)
	}
}

// Every filter of GET /payment-requests with odd text: 200 or a 400 naming
// query.<filter>, never a 500; an invoice number stored with odd text is
// found by it, exactly.
func TestOddTextInEveryFilter(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit})
	m := apitest.NewMerchant(t, env)
	stored := map[string]string{} // invoice number → id
	for _, odd := range oddTexts {
		lit, _ := json.Marshal(odd.value)
		resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token,
			Body: oddBody(m, "unused", "invoiceNumber", string(lit))})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %q: %d %s", odd.value, resp.StatusCode, resp.Body)
		}
		var inv models.Invoice
		resp.JSON(t, &inv)
		stored[odd.value] = inv.Id.String()
	}

	values := []string{"\xff\xfe", "ab\xe2\x82", "\xed\xa0\x80", "a\x00b", "", strings.Repeat("x", 65), strings.Repeat("é", 64),
		strings.Repeat("a", 250) + "@b.co"}
	for _, odd := range oddTexts {
		values = append(values, odd.value)
	}
	for _, filter := range []string{"status", "merchantAccountId", "locationId", "invoiceNumber", "customerEmail",
		"createdFrom", "createdTo", "limit", "cursor"} {
		for _, v := range values {
			resp := env.Do(apitest.Request{Method: "GET", Path: "/payment-requests?" + filter + "=" + url.QueryEscape(v), Token: m.Token})
			switch resp.StatusCode {
			case http.StatusOK:
				var list []models.Invoice
				resp.JSON(t, &list)
				if id, ok := stored[v]; ok && filter == "invoiceNumber" {
					if len(list) != 1 || list[0].Id.String() != id || list[0].InvoiceNumber != v {
						t.Errorf("invoiceNumber=%q found %d invoices: %s", v, len(list), resp.Body)
					}
				}
			case http.StatusBadRequest:
				wantOnlyFieldError(t, resp, "query."+filter)
			default:
				t.Errorf("%s=%q: %d %s", filter, v, resp.StatusCode, resp.Body)
			}
		}
	}

	// An Idempotency-Key is text too.
	for i, key := range []string{"k\xff", "k\xe2\x82", strings.Repeat("é", 255), "'; DROP TABLE idempotency_keys; --"} {
		lit, _ := json.Marshal(fmt.Sprintf("IDEM-%d", i))
		resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token,
			Body: oddBody(m, "unused", "invoiceNumber", string(lit)), Header: http.Header{"Idempotency-Key": {key}}})
		switch resp.StatusCode {
		case http.StatusCreated:
		case http.StatusBadRequest:
			wantOnlyFieldError(t, resp, "header.Idempotency-Key")
		default:
			t.Errorf("Idempotency-Key %q: %d %s", key, resp.StatusCode, resp.Body)
		}
	}
}

// HTML in every text field of an invoice (and the payer's name) reaches the
// pay page escaped, on the page and on the form shown again.
func TestPayPageEscapesEveryField(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	// At most 32 characters, the shortest limit.
	tag := func(field string) string { return `<x-` + strings.ToLower(field) + ` onload=f()>"'&` }
	l := apitest.Line("1", "10.00")
	for _, f := range []string{"description", "uom", "commodityCode", "upc"} {
		l[f] = tag(f)
	}
	b := m.Body(tag("number"), "10.00", l)
	for _, f := range []string{"poNumber", "customerName", "customerCompany", "customerPhone", "memo"} {
		b[f] = tag(f)
	}
	inv := m.MustCreate(t, b)
	path := apitest.PayPath(t, inv)
	for name, p := range map[string]apitest.Page{
		"page":          env.Visit(t, "GET", path, nil, nil),
		"form again":    env.Pay(t, path, apitest.Payment{Card: "4111111111111112", Amount: "1.00", Name: tag("payer")}),
		"declined form": env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "1.00", Name: tag("payer")}),
	} {
		if strings.Contains(p.Body, "<x-") {
			i := strings.Index(p.Body, "<x-")
			t.Errorf("%s (%d) shows markup unescaped: …%s…", name, p.StatusCode, p.Body[max(0, i-80):min(len(p.Body), i+80)])
		}
		if !strings.Contains(p.Body, "&lt;x-number") || !strings.Contains(p.Body, "&lt;x-description") {
			t.Errorf("%s (%d) lacks the escaped invoice number or description", name, p.StatusCode)
		}
	}
}
