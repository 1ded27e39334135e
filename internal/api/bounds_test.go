package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apitest"
)

// heapPeak samples the process's live heap until stop is closed and
// returns the highest value seen.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// A megabyte of nested JSON to the token endpoint, sent by anyone without
// credentials, 16 at a time: the server's heap stays small (it took 1.87 GB
// when every `[` cost a frame), and every such request counts against the
// address's token limit, so the 31st in a minute is a 429.
func TestNestedTokenBodiesCostNoMemory(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	body := `{"grant_type":"\u0063","x":` + strings.Repeat("[", 1<<20) + `}`
	var baseline [1]metrics.Sample
	baseline[0].Name = "/memory/classes/heap/objects:bytes"
	metrics.Read(baseline[:])
	stop := make(chan struct{})
	peak := heapPeak(stop)
	var limited atomic.Int32
	for range 3 {
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: body})
				switch resp.StatusCode {
				case http.StatusRequestEntityTooLarge:
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					t.Errorf("status %d, want 413 or 429: %.200s", resp.StatusCode, resp.Body)
				}
			}()
		}
		wg.Wait()
	}
	close(stop)
	if grown := int64(<-peak) - int64(baseline[0].Value.Uint64()); grown > 64<<20 {
		t.Errorf("the heap grew by %d MB, want at most 64 MB", grown>>20)
	}
	// 48 requests from one address: 30 are allowed in a minute.
	if got := limited.Load(); got != 18 {
		t.Errorf("%d requests refused with 429, want 18 (48 sent, 30 allowed)", got)
	}
	resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: formBody("client_credentials", "mk_x", "ms_x"), Header: formHeader})
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a well-formed request after them: %d, want 429", resp.StatusCode)
	}
	if e := tokenError(t, resp); e.Error != "too_many_requests" {
		t.Errorf("error %q, want too_many_requests", e.Error)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
}

func TestTokenBodyOver4KiB(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	body := "grant_type=client_credentials&client_id=mk_x&client_secret=" + strings.Repeat("s", 4<<10)
	for _, chunked := range []bool{false, true} {
		resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: body, Header: formHeader, Chunked: chunked})
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked %v: status %d, want 413: %s", chunked, resp.StatusCode, resp.Body)
		}
		if e := tokenError(t, resp); e.Error != "invalid_request" {
			t.Errorf("chunked %v: error %q, want invalid_request", chunked, e.Error)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("chunked %v: Cache-Control %q, want no-store", chunked, got)
		}
	}
	// Just under the limit is read, and refused for its credentials only.
	resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: body[:4<<10], Header: formHeader})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a 4 KiB body: status %d, want 401", resp.StatusCode)
	}
}

func TestJSONNestedDeeperThan32Refused(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	nested := func(levels int) string {
		return `{"memo":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
	}
	resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: nested(33)})
	p := apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
	if p.Errors == nil || len((*p.Errors)["body"]) != 1 || !strings.HasPrefix((*p.Errors)["body"][0], "nested too deeply") {
		t.Errorf("errors %v, want body: nested too deeply", p.Errors)
	}
	// 32 levels are refused for what they hold, not for their depth.
	resp = env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: nested(32)})
	p = apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
	if p.Errors != nil {
		for _, msg := range (*p.Errors)["body"] {
			if strings.HasPrefix(msg, "nested too deeply") {
				t.Errorf("32 levels refused for their depth")
			}
		}
	}
	// Brackets inside strings are text, not nesting.
	resp = env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token,
		Body: `{"memo":"` + strings.Repeat("[", 100) + `"}`})
	p = apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
	if p.Errors != nil && len((*p.Errors)["body"]) > 0 && strings.HasPrefix((*p.Errors)["body"][0], "nested") {
		t.Errorf("brackets in a string counted as nesting")
	}
}

// A megabyte-long amount is refused before it is parsed, under its field,
// with a short answer that does not give the megabyte back.
func TestLongDecimalRefusedShortly(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	digits := strings.Repeat("9", 1<<20-1024) // a body just under the 1 MiB limit
	for _, amount := range []any{digits, rawJSON(digits)} {
		b := m.Body("LONG-1", amount)
		resp := m.Create(t, b, nil)
		p := apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
		if p.Errors == nil || len((*p.Errors)["amount"]) == 0 {
			t.Errorf("errors %v, want amount", p.Errors)
		}
		if len(resp.Body) > 2000 {
			t.Errorf("an answer of %d bytes, want under 2 KB", len(resp.Body))
		}
	}
}

// rawJSON is a value written into a JSON body as it is: a JSON number of any length.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// A pay link's token is as good as the link: no log line holds it, whatever
// address under /pay/ was asked for and however it was answered.
func TestPayTokenNeverLogged(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("LOG-1", "10.00"))
	token := (*inv.Link)[strings.LastIndex(*inv.Link, "/")+1:]
	for _, r := range []struct{ method, path string }{
		{"GET", "/pay/" + token},
		{"GET", "/pay/" + token + "/x"},
		{"GET", "/pay/" + token + "/receipt/not-a-payment"},
		{"GET", "/pay/" + token + "/receipt/" + inv.Id.String()},
		{"DELETE", "/pay/" + token},
		{"PUT", "/pay/" + token + "/receipt/" + inv.Id.String()},
		{"POST", "/pay/" + token},
		{"GET", "/pay/" + token + "%2Fx"},
		{"GET", "/pay/" + token[:10]},
	} {
		if p := env.Visit(t, r.method, r.path, url.Values{"cardNumber": {"4111111111111111"}}, nil); p.StatusCode >= 500 {
			t.Errorf("%s %s: status %d", r.method, r.path, p.StatusCode)
		}
	}
	if strings.Contains(env.Log.String(), token) {
		t.Errorf("the log holds the pay token:\n%s", env.Log.String())
	}
}

// Bytes after the JSON body are refused, not ignored: {…valid…}{"amount":"-5"}
// made an invoice of the first half.
func TestBytesAfterTheJSONBodyRefused(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	valid, err := json.Marshal(m.Body("TRAIL-1", "10.00"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tail := range []string{`{"amount":"-5"}`, `x`, `]`, `"more"`} {
		resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: string(valid) + tail})
		p := apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
		if p.Errors == nil || len((*p.Errors)["body"]) == 0 {
			t.Errorf("tail %q: errors %v, want body", tail, p.Errors)
		}
	}
	var n int
	if err := env.App.DB.Get(&n, `SELECT count(*) FROM invoices WHERE invoice_number = 'TRAIL-1'`); err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "invoices made", n, 0)
	// White space after the value is no data.
	resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: string(valid) + " \n\t"})
	apitest.Want(t, "status with trailing white space", resp.StatusCode, http.StatusCreated)
}

// A token request of the wrong shape gets a short description of our own:
// no mention of an errors member (OAuth errors have none), and nothing of
// the request's bytes.
func TestTokenRequestOfTheWrongShape(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	binary := "grant_type=client_credentials&" + strings.Repeat("\xff\xfe", 1500) + "=x"
	for name, r := range map[string]apitest.Request{
		"JSON array values": {Method: "POST", Path: "/oauth/token", Body: `{"grant_type":["client_credentials"],"client_id":1}`},
		"binary form":       {Method: "POST", Path: "/oauth/token", Body: binary, Header: formHeader},
	} {
		resp := env.Do(r)
		apitest.Want(t, name+": status", resp.StatusCode, http.StatusBadRequest)
		e := tokenError(t, resp)
		apitest.Want(t, name+": error", string(e.Error), "invalid_request")
		apitest.Want(t, name+": mentions an errors member", strings.Contains(e.ErrorDescription, "errors"), false)
		apitest.Want(t, name+": holds request bytes", strings.Contains(e.ErrorDescription, "\ufffd") || strings.Contains(e.ErrorDescription, "\xff"), false)
		if len(e.ErrorDescription) > 300 {
			t.Errorf("%s: a description of %d bytes", name, len(e.ErrorDescription))
		}
	}
}

// A query value that cannot be decoded is a 400 under its name: the filter
// never silently disappears (the list came back unfiltered).
func TestUndecodableQueryIsRefused(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	seed := env.Seed()
	reseller := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	for _, tt := range []struct{ path, token, field string }{
		{"/payment-requests?invoiceNumber=BB-0001%zz", m.Token, "query.invoiceNumber"},
		{"/payment-requests?status=paid;x", m.Token, "query.status"},
		{"/payment-requests?cursor=abc%zz", m.Token, "query.cursor"},
		{"/payment-requests?limit=1%2", m.Token, "query.limit"},
		{"/accounts?locationId=%zz", m.Token, "query.locationId"},
		{"/applications?stage=approved;x", reseller, "query.stage"},
	} {
		resp := env.Do(apitest.Request{Method: "GET", Path: tt.path, Token: tt.token})
		p := apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
		if p.Errors == nil || len((*p.Errors)[tt.field]) == 0 {
			t.Errorf("%s: errors %v, want %s", tt.path, p.Errors, tt.field)
		}
	}
}

// A value of the right JSON type but impossible for its format is a 400
// keyed by its field, in words written for people.
func TestImpossibleDateKeyedByItsField(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	for _, date := range []string{"2031-02-30", "2031-13-01", "2031-2-3"} {
		b := m.Body("DATE-1", "10.00")
		b["dueDate"] = date
		p := apitest.WantProblem(t, m.Create(t, b, nil), http.StatusBadRequest, "Invalid request")
		if p.Errors == nil {
			t.Fatalf("%s: no errors", date)
		}
		apitest.Want(t, date+": errors.dueDate", strings.Join((*p.Errors)["dueDate"], "; "), "must be a date of the calendar, written YYYY-MM-DD")
		apitest.Want(t, date+": errors.body", len((*p.Errors)["body"]), 0)
	}
}
