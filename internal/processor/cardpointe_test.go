package processor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// fakeGateway is an httptest stand-in for the CardPointe REST API under
// /cardconnect/rest. Each handler answers with a status and a JSON body
// chosen by the test; every request is recorded.
type fakeGateway struct {
	mu       sync.Mutex
	requests []fakeRequest

	authDelay time.Duration
	auth      func() (int, any)
	void      func(n int) (int, any) // n counts voids, from 1
	delete    func() (int, any)

	refundDelay time.Duration
	refund      func(body map[string]any) (int, any) // PUT /refund
	voidSale    func(body map[string]any) (int, any) // PUT /void
	inquire     func(path string) (int, any)         // GET /inquire/… and /inquireByOrderid/…
	funding     func(q url.Values) (int, any)        // GET /funding?merchid=&date=
}

type fakeRequest struct {
	Method, Path, User, Password string
	Query                        url.Values
	Body                         map[string]any
	RawBody                      string
}

func (f *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, password, _ := r.BasicAuth()
	raw, _ := io.ReadAll(r.Body)
	req := fakeRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), User: user, Password: password, RawBody: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &req.Body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	voids := 0
	for _, q := range f.requests {
		if strings.HasSuffix(q.Path, "/voidByOrderId") {
			voids++
		}
	}
	f.mu.Unlock()

	status, body := http.StatusNotFound, any(map[string]string{"error": "no such endpoint"})
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/cardconnect/rest/auth" && f.auth != nil:
		select {
		case <-time.After(f.authDelay):
		case <-r.Context().Done():
			return
		}
		status, body = f.auth()
	case r.Method == http.MethodPut && r.URL.Path == "/cardconnect/rest/voidByOrderId":
		status, body = http.StatusOK, map[string]string{"respstat": "A", "resptext": "Approval", "authcode": "REVERS"}
		if f.void != nil {
			status, body = f.void(voids)
		}
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/cardconnect/rest/profile/") && f.delete != nil:
		status, body = f.delete()
	case r.Method == http.MethodPut && r.URL.Path == "/cardconnect/rest/refund" && f.refund != nil:
		select {
		case <-time.After(f.refundDelay):
		case <-r.Context().Done():
			return
		}
		status, body = f.refund(req.Body)
	case r.Method == http.MethodPut && r.URL.Path == "/cardconnect/rest/void" && f.voidSale != nil:
		status, body = f.voidSale(req.Body)
	case r.Method == http.MethodGet && r.URL.Path == "/cardconnect/rest/funding" && f.funding != nil:
		status, body = f.funding(r.URL.Query())
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/cardconnect/rest/inquire") && f.inquire != nil:
		status, body = f.inquire(strings.TrimPrefix(r.URL.Path, "/cardconnect/rest"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (f *fakeGateway) recorded() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...)
}

func (f *fakeGateway) voids() []fakeRequest {
	var out []fakeRequest
	for _, r := range f.recorded() {
		if r.Path == "/cardconnect/rest/voidByOrderId" {
			out = append(out, r)
		}
	}
	return out
}

func newFake(t *testing.T, f *fakeGateway) *CardPointe {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cp, err := NewCardPointe(strings.Replace(srv.URL, "http://", "http://testing:s3cr%40t@", 1)+"/cardconnect/rest/", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	cp.VoidBackoff = time.Millisecond
	return cp
}

func approval(extra map[string]string) func() (int, any) {
	return func() (int, any) {
		body := map[string]string{
			"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": "343005123105",
			"amount": "12.30", "merchid": "496160873888", "account": "9418594164541111", "token": "9418594164541111",
		}
		for k, v := range extra {
			body[k] = v
		}
		return http.StatusOK, body
	}
}

// noSecrets fails the test if err's text holds the card number or CVV.
func noSecrets(t *testing.T, err error, c Charge) {
	t.Helper()
	if err == nil {
		return
	}
	if strings.Contains(err.Error(), c.Card.Number) || strings.Contains(err.Error(), "cvv") || strings.Contains(err.Error(), "s3cr") {
		t.Errorf("error leaks a secret: %v", err)
	}
}

func TestCardPointeAuthRequest(t *testing.T) {
	f := &fakeGateway{auth: approval(map[string]string{"profileid": "16392957743216548413", "acctid": "1"})}
	cp := newFake(t, f)
	ch := charge(TestCardApprove, "pay-7f3a", true)
	ch.Amount = *apd.New(123, -1) // 12.3

	res, err := cp.AuthorizeCapture(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Approved: true, RetRef: "343005123105", CardBrand: "visa", LastFour: "1111", ProfileID: "16392957743216548413", AccountID: "1"}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}

	reqs := f.recorded()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1: %+v", len(reqs), reqs)
	}
	r := reqs[0]
	if r.Method != http.MethodPut || r.Path != "/cardconnect/rest/auth" {
		t.Errorf("request %s %s, want PUT /cardconnect/rest/auth", r.Method, r.Path)
	}
	if r.User != "testing" || r.Password != "s3cr@t" {
		t.Errorf("basic auth %q:%q", r.User, r.Password)
	}
	for field, want := range map[string]string{
		"merchid": "496160873888", "account": TestCardApprove, "expiry": "1230", "cvv2": "123",
		"amount": "12.30", "currency": "USD", "orderid": "pay-7f3a", "name": "Dana Whitfield",
		"capture": "Y", "profile": "Y", "ecomind": "E",
	} {
		if got := r.Body[field]; got != want {
			t.Errorf("body %s = %#v, want %q", field, got, want)
		}
	}
	if _, ok := r.Body["items"]; ok {
		t.Errorf("items sent without Level 3 data: %s", r.RawBody)
	}

	// Without SaveProfile, no profile is asked for.
	f.auth = approval(nil)
	if _, err := cp.AuthorizeCapture(context.Background(), charge(TestCardApprove, "pay-2", false)); err != nil {
		t.Fatal(err)
	}
	if body := f.recorded()[1].Body; body["profile"] != nil {
		t.Errorf("profile = %#v without SaveProfile", body["profile"])
	}
}

func TestCardPointeLevel3Items(t *testing.T) {
	f := &fakeGateway{auth: approval(nil)}
	cp := newFake(t, f)
	ch := charge(TestCardApprove, "pay-l3", false)
	ch.Amount = *apd.New(14084, -2)
	ch.TaxAmount = *apd.New(959, -2)
	ch.Items = []Item{
		{Description: "Copy paper, case", Quantity: *apd.New(3, 0), UnitCost: *apd.New(3875, -2), LineTotal: *apd.New(11625, -2),
			TaxAmount: *apd.New(959, -2), UOM: "CS", CommodityCode: "44121600", UPC: "012345678905"},
		{Description: "Delivery", Quantity: *apd.New(15, -1), UnitCost: *apd.New(10, 0), LineTotal: *apd.New(15, 0),
			UOM: "HR", CommodityCode: "78102200", UPC: "036000291452"},
	}
	if _, err := cp.AuthorizeCapture(context.Background(), ch); err != nil {
		t.Fatal(err)
	}
	body := f.recorded()[0].Body
	if body["amount"] != "140.84" {
		t.Errorf("amount %#v", body["amount"])
	}
	if body["taxamnt"] != "9.59" {
		t.Errorf("order taxamnt %#v, want the order's total tax", body["taxamnt"])
	}
	items, _ := body["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("items %#v", body["items"])
	}
	wants := []map[string]string{
		{"lineno": "1", "material": "012345678905", "description": "Copy paper, case", "upc": "012345678905",
			"quantity": "3", "uom": "CS", "unitcost": "38.75", "netamnt": "116.25", "taxamnt": "9.59", "commoditycode": "44121600"},
		{"lineno": "2", "material": "036000291452", "description": "Delivery", "upc": "036000291452",
			"quantity": "1.5", "uom": "HR", "unitcost": "10", "netamnt": "15.00", "taxamnt": "0.00", "commoditycode": "78102200"},
	}
	for i, want := range wants {
		got, _ := items[i].(map[string]any)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("item %d %s = %#v, want %q", i+1, k, got[k], v)
			}
		}
	}

	// Without line-level data, no tax is sent either.
	if _, err := cp.AuthorizeCapture(context.Background(), charge(TestCardApprove, "pay-no-l3", false)); err != nil {
		t.Fatal(err)
	}
	if body := f.recorded()[1].Body; body["items"] != nil || body["taxamnt"] != nil {
		t.Errorf("items %#v and taxamnt %#v sent without Level 3 data", body["items"], body["taxamnt"])
	}
}

func TestCardPointeDecline(t *testing.T) {
	f := &fakeGateway{auth: func() (int, any) {
		return http.StatusOK, map[string]string{"respstat": "C", "respcode": "NU", "resptext": "Insufficient funds", "retref": "343005123106"}
	}}
	cp := newFake(t, f)
	ch := charge("5555555555554444", "pay-d", true)
	res, err := cp.AuthorizeCapture(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{DeclineReason: "Insufficient funds", CardBrand: "mastercard", LastFour: "4444"}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if v := f.voids(); len(v) != 0 {
		t.Errorf("a decline was voided: %+v", v)
	}
}

func TestCardPointeAuthTimeoutVoids(t *testing.T) {
	f := &fakeGateway{authDelay: 2 * time.Second, auth: approval(nil)}
	cp := newFake(t, f)
	cp.AuthTimeout = 100 * time.Millisecond
	ch := charge(TestCardApprove, "pay-timeout", false)

	start := time.Now()
	res, err := cp.AuthorizeCapture(context.Background(), ch)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want ErrUnavailable", err)
	}
	if res.Approved {
		t.Errorf("result %+v", res)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s, want about the auth timeout", d)
	}
	noSecrets(t, err, ch)
	voids := f.voids()
	if len(voids) != 1 {
		t.Fatalf("%d voids, want 1", len(voids))
	}
	v := voids[0]
	if v.Method != http.MethodPut || v.Body["orderid"] != "pay-timeout" || v.Body["merchid"] != "496160873888" || v.User != "testing" {
		t.Errorf("void %+v", v)
	}
	if strings.Contains(v.RawBody, TestCardApprove) {
		t.Errorf("void carries the card number: %s", v.RawBody)
	}
}

// The caller giving up (the customer closed the page) must not stop the void.
func TestCardPointeCallerCancelStillVoids(t *testing.T) {
	f := &fakeGateway{authDelay: 2 * time.Second, auth: approval(nil)}
	cp := newFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := cp.AuthorizeCapture(ctx, charge(TestCardApprove, "pay-gone", false))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want ErrUnavailable", err)
	}
	if v := f.voids(); len(v) != 1 || v[0].Body["orderid"] != "pay-gone" {
		t.Errorf("voids %+v", v)
	}
}

func TestCardPointeAuthFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth func() (int, any)
	}{
		{"HTTP 500", func() (int, any) { return http.StatusInternalServerError, map[string]string{"error": "boom"} }},
		{"HTTP 401", func() (int, any) { return http.StatusUnauthorized, "Unauthorized" }},
		{"retry", func() (int, any) {
			return http.StatusOK, map[string]string{"respstat": "B", "respcode": "62", "resptext": "Timed out"}
		}},
		{"approval without retref", func() (int, any) { return http.StatusOK, map[string]string{"respstat": "A"} }},
		{"not JSON", func() (int, any) { return http.StatusOK, "<html>" + TestCardApprove }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeGateway{auth: tc.auth}
			cp := newFake(t, f)
			ch := charge(TestCardApprove, "pay-f", false)
			res, err := cp.AuthorizeCapture(context.Background(), ch)
			if !errors.Is(err, ErrUnavailable) || res.Approved {
				t.Fatalf("result %+v, err %v; want ErrUnavailable", res, err)
			}
			noSecrets(t, err, ch)
			if v := f.voids(); len(v) != 1 || v[0].Body["orderid"] != "pay-f" {
				t.Errorf("voids %+v", v)
			}
		})
	}
}

func TestCardPointeUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := strings.Replace(srv.URL, "http://", "http://u:p@", 1)
	srv.Close()
	cp, err := NewCardPointe(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp.VoidBackoff = time.Millisecond
	ch := charge(TestCardApprove, "pay-u", false)
	_, err = cp.AuthorizeCapture(context.Background(), ch)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want ErrUnavailable", err)
	}
	noSecrets(t, err, ch)
	if err := cp.DeleteProfile(context.Background(), "m", "p", "1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("delete: %v", err)
	}
	if err := cp.Void(context.Background(), "m", "o"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("void: %v", err)
	}
}

func TestCardPointeVoid(t *testing.T) {
	t.Run("retries until voided", func(t *testing.T) {
		f := &fakeGateway{void: func(n int) (int, any) {
			if n < 3 {
				return http.StatusBadGateway, "busy"
			}
			return http.StatusOK, map[string]string{"respstat": "A", "authcode": "REVERS"}
		}}
		cp := newFake(t, f)
		if err := cp.Void(context.Background(), "496160873888", "pay-v"); err != nil {
			t.Fatal(err)
		}
		if v := f.voids(); len(v) != 3 || v[2].Body["orderid"] != "pay-v" {
			t.Errorf("voids %+v", v)
		}
	})
	t.Run("unknown order", func(t *testing.T) {
		f := &fakeGateway{void: func(int) (int, any) {
			return http.StatusOK, map[string]string{"respstat": "C", "respcode": "29", "resptext": "Txn not found"}
		}}
		cp := newFake(t, f)
		if err := cp.Void(context.Background(), "496160873888", "pay-none"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		f := &fakeGateway{void: func(int) (int, any) {
			return http.StatusOK, map[string]string{"respstat": "C", "respcode": "33", "resptext": "Txn settled"}
		}}
		cp := newFake(t, f)
		if err := cp.Void(context.Background(), "496160873888", "pay-s"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err %v, want ErrUnavailable", err)
		}
		if v := f.voids(); len(v) != 1 {
			t.Errorf("%d voids, want 1 (a refusal is final)", len(v))
		}
	})
}

func TestCardPointeDeleteProfile(t *testing.T) {
	f := &fakeGateway{delete: func() (int, any) {
		return http.StatusOK, map[string]string{"respstat": "A", "respcode": "08", "resptext": "Profile Deleted"}
	}}
	cp := newFake(t, f)
	if err := cp.DeleteProfile(context.Background(), "496160873888", "16392957743216548413", "1"); err != nil {
		t.Fatal(err)
	}
	r := f.recorded()[0]
	if r.Method != http.MethodDelete || r.Path != "/cardconnect/rest/profile/16392957743216548413/1/496160873888" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	if r.User != "testing" || r.Password != "s3cr@t" {
		t.Errorf("basic auth %q:%q", r.User, r.Password)
	}

	for name, answer := range map[string]func() (int, any){
		"refused": func() (int, any) {
			return http.StatusOK, map[string]string{"respstat": "C", "resptext": "Profile not found"}
		},
		"HTTP 500": func() (int, any) { return http.StatusInternalServerError, "boom" },
	} {
		f.delete = answer
		if err := cp.DeleteProfile(context.Background(), "496160873888", "16392957743216548413", "1"); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: err %v, want ErrUnavailable", name, err)
		}
	}
}

func TestNewCardPointe(t *testing.T) {
	cp, err := NewCardPointe("https://user:pa55word@fts.cardconnect.com/cardconnect/rest/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cp.base != "https://fts.cardconnect.com/cardconnect/rest" || cp.user != "user" || cp.password != "pa55word" {
		t.Errorf("base %q user %q password %q", cp.base, cp.user, cp.password)
	}
	if cp.AuthTimeout != 15*time.Second || cp.Timeout != 10*time.Second {
		t.Errorf("timeouts %s, %s", cp.AuthTimeout, cp.Timeout)
	}
	for _, bad := range []string{
		"fts.cardconnect.com/cardconnect/rest",
		"https://fts.cardconnect.com/cardconnect/rest",
		"ftp://user:pa55word@fts.cardconnect.com/",
		"https://user:pa55word@/rest",
		"https://user:pa55word@fts.cardconnect.com:port/\x7f",
	} {
		_, err := NewCardPointe(bad, nil)
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "pa55word") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// A gateway answering with a redirect gets no second request anywhere: the
// card number, security code and password stay where they were sent.
func TestCardPointeFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": "1"})
	}))
	t.Cleanup(other.Close)
	redirect := func() (int, any) { return http.StatusTemporaryRedirect, nil }
	f := &fakeGateway{auth: redirect, delete: redirect}
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", other.URL+r.URL.Path)
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(gateway.Close)
	cp, err := NewCardPointe(strings.Replace(gateway.URL, "http://", "http://testing:s3cr%40t@", 1)+"/cardconnect/rest/", gateway.Client())
	if err != nil {
		t.Fatal(err)
	}
	res, err := cp.AuthorizeCapture(context.Background(), charge(TestCardApprove, "pay-redirect", false))
	if err == nil {
		t.Errorf("a redirect answered %+v, want an error", res)
	}
	if res.Approved {
		t.Error("a redirect approved the charge")
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests, want none", n)
	}
	if err := cp.DeleteProfile(context.Background(), "496160873888", "1", "1"); err == nil {
		t.Error("a redirected profile delete succeeded")
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests, want none", n)
	}
}

func refundOf(whole bool) Refund {
	return Refund{MerchantID: "496160873888", OrderID: "refund-1", SaleRetRef: "343005123105", SaleOrder: "sale-1",
		LastFour: "1111", Amount: mustDecimal("25.00"), Whole: whole}
}

func mustDecimal(s string) apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic(err)
	}
	return *d
}

func paths(reqs []fakeRequest) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Method+" "+strings.TrimPrefix(r.Path, "/cardconnect/rest"))
	}
	return out
}

// A part refund is PUT /refund by the sale's retref, with the refund's
// order id, and nothing else.
func TestCardPointePartRefund(t *testing.T) {
	f := &fakeGateway{refund: func(map[string]any) (int, any) {
		return http.StatusOK, map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": "343005998877"}
	}}
	res, err := newFake(t, f).Refund(context.Background(), refundOf(false))
	if err != nil || !res.Approved || res.RetRef != "343005998877" {
		t.Fatalf("refund: %+v, %v", res, err)
	}
	reqs := f.recorded()
	if got := paths(reqs); !slices.Equal(got, []string{"PUT /refund"}) {
		t.Fatalf("asked %q, want only PUT /refund", got)
	}
	want := map[string]any{"merchid": "496160873888", "retref": "343005123105", "amount": "25.00", "orderid": "refund-1"}
	for k, v := range want {
		if reqs[0].Body[k] != v {
			t.Errorf("refund body %s = %v, want %v", k, reqs[0].Body[k], v)
		}
	}
}

// A whole refund of a sale the gateway has not settled is a void of the
// sale; of a settled one, a refund.
func TestCardPointeWholeRefundVoidsUnsettledSale(t *testing.T) {
	for voidable, want := range map[string][]string{
		"Y": {"GET /inquire/343005123105/496160873888", "PUT /void"},
		"N": {"GET /inquire/343005123105/496160873888", "PUT /refund"},
	} {
		f := &fakeGateway{
			inquire: func(string) (int, any) {
				return http.StatusOK, map[string]string{"respstat": "A", "retref": "343005123105", "voidable": voidable, "setlstat": "Authorized"}
			},
			voidSale: func(map[string]any) (int, any) {
				return http.StatusOK, map[string]string{"respstat": "A", "retref": "343005123105"}
			},
			refund: func(map[string]any) (int, any) {
				return http.StatusOK, map[string]string{"respstat": "A", "retref": "343005998877"}
			},
		}
		res, err := newFake(t, f).Refund(context.Background(), refundOf(true))
		if err != nil || !res.Approved {
			t.Fatalf("voidable %s: %+v, %v", voidable, res, err)
		}
		if got := paths(f.recorded()); !slices.Equal(got, want) {
			t.Errorf("voidable %s: asked %q, want %q", voidable, got, want)
		}
	}
}

func TestCardPointeRefundDeclined(t *testing.T) {
	f := &fakeGateway{refund: func(map[string]any) (int, any) {
		return http.StatusOK, map[string]string{"respstat": "C", "respcode": "05", "resptext": "Refund not allowed"}
	}}
	res, err := newFake(t, f).Refund(context.Background(), refundOf(false))
	if err != nil || res.Approved || res.DeclineReason != "Refund not allowed" {
		t.Fatalf("refund: %+v, %v", res, err)
	}
}

// A refund whose answer never came may stand (ErrUnsettled), and
// InquireRefund finds it by its order id; a gateway error is only
// ErrProcessorError: nothing was refunded.
func TestCardPointeRefundTimeoutThenInquiry(t *testing.T) {
	f := &fakeGateway{refundDelay: 2 * time.Second,
		refund: func(map[string]any) (int, any) {
			return http.StatusOK, map[string]string{"respstat": "A", "retref": "343005998877"}
		},
		inquire: func(path string) (int, any) {
			if path == "/inquireByOrderid/refund-1/496160873888" {
				return http.StatusOK, map[string]string{"respstat": "A", "retref": "343005998877"}
			}
			return http.StatusOK, map[string]string{"respstat": "C", "respcode": "29", "resptext": "Txn not found"}
		},
	}
	cp := newFake(t, f)
	cp.AuthTimeout = 100 * time.Millisecond
	_, err := cp.Refund(context.Background(), refundOf(false))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrUnsettled) {
		t.Fatalf("err %v, want ErrUnavailable and ErrUnsettled", err)
	}
	res, found, err := cp.InquireRefund(context.Background(), refundOf(false))
	if err != nil || !found || !res.Approved || res.RetRef != "343005998877" {
		t.Fatalf("inquiry: %+v, found %v, %v", res, found, err)
	}
	other := refundOf(false)
	other.OrderID = "refund-2"
	if _, found, err := cp.InquireRefund(context.Background(), other); err != nil || found {
		t.Errorf("inquiry of a refund never made: found %v, %v", found, err)
	}

	broken := &fakeGateway{refund: func(map[string]any) (int, any) { return http.StatusInternalServerError, map[string]string{} }}
	_, err = newFake(t, broken).Refund(context.Background(), refundOf(false))
	if !errors.Is(err, ErrProcessorError) || errors.Is(err, ErrUnsettled) {
		t.Errorf("err %v, want ErrProcessorError without ErrUnsettled", err)
	}
}

// A whole refund made as a void is found by the sale's settlement state.
func TestCardPointeInquireFindsAVoid(t *testing.T) {
	f := &fakeGateway{inquire: func(path string) (int, any) {
		if strings.HasPrefix(path, "/inquireByOrderid/") {
			return http.StatusOK, map[string]string{"respstat": "C", "respcode": "29", "resptext": "Txn not found"}
		}
		return http.StatusOK, map[string]string{"respstat": "A", "retref": "343005123105", "setlstat": "Voided", "voidable": "N"}
	}}
	res, found, err := newFake(t, f).InquireRefund(context.Background(), refundOf(true))
	if err != nil || !found || !res.Approved || res.RetRef != "343005123105" {
		t.Fatalf("inquiry: %+v, found %v, %v", res, found, err)
	}
}
