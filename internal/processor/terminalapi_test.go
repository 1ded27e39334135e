package processor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// fakeTerminalAPI answers as CardPointe's Integrated Terminal API (under
// /api/v2) and its gateway's inquireByOrderid (under /cardconnect/rest)
// do, with bodies from their documentation; each test picks the answers.
type fakeTerminalAPI struct {
	mu       sync.Mutex
	requests []fakeTerminalRequest
	connects int
	now      func() time.Time

	expiresIn time.Duration                             // of each session key
	connect   func() (int, any)                         // nil: 200 and a key
	authCard  func(w http.ResponseWriter) (int, any)    // nil: 404
	ping      func() (int, any)                         // nil: connected
	inquire   func(orderID string) (int, any)           // nil: not found
	refuse    func(path string, session string) bool    // answer 401
	onRequest func(path string, body map[string]string) // seen before answering
}

type fakeTerminalRequest struct {
	Path, Authorization, Session string
	Body                         map[string]string
}

func (f *fakeTerminalAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	body := map[string]string{}
	if len(raw) > 0 {
		var decoded map[string]any
		_ = json.Unmarshal(raw, &decoded)
		for k, v := range decoded {
			b, _ := json.Marshal(v)
			body[k] = strings.Trim(string(b), `"`)
		}
	}
	f.mu.Lock()
	f.requests = append(f.requests, fakeTerminalRequest{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"),
		Session: r.Header.Get("X-CardConnect-SessionKey"), Body: body})
	f.mu.Unlock()
	if f.onRequest != nil {
		f.onRequest(r.URL.Path, body)
	}
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	if strings.HasPrefix(r.URL.Path, "/api/v2/") && r.URL.Path != "/api/v2/connect" && f.refuse != nil &&
		f.refuse(r.URL.Path, r.Header.Get("X-CardConnect-SessionKey")) {
		answer(http.StatusUnauthorized, map[string]string{})
		return
	}
	switch {
	case r.URL.Path == "/api/v2/connect":
		if f.connect != nil {
			if status, v := f.connect(); status != http.StatusOK {
				answer(status, v)
				return
			}
		}
		f.mu.Lock()
		f.connects++
		n := f.connects
		f.mu.Unlock()
		expires := f.now().Add(f.expiresIn).UTC().Format("2006-01-02T15:04:05.000Z")
		w.Header().Set("X-CardConnect-SessionKey", "session"+string(rune('0'+n))+";expires="+expires)
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == "/api/v2/ping":
		status, v := http.StatusOK, any(map[string]bool{"connected": true})
		if f.ping != nil {
			status, v = f.ping()
		}
		answer(status, v)
	case r.URL.Path == "/api/v2/authCard" && f.authCard != nil:
		status, v := f.authCard(w)
		if status != 0 {
			answer(status, v)
		}
	case r.URL.Path == "/api/v2/cancel":
		w.WriteHeader(http.StatusOK)
	case strings.HasPrefix(r.URL.Path, "/cardconnect/rest/inquireByOrderid/"):
		parts := strings.Split(r.URL.Path, "/")
		status, v := http.StatusOK, any(map[string]string{"respstat": "C", "respcode": "29", "resptext": "Txn not found"})
		if f.inquire != nil {
			status, v = f.inquire(parts[len(parts)-2])
		}
		answer(status, v)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeTerminalAPI) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		out = append(out, r.Path)
	}
	return out
}

func newTerminalAPI(t *testing.T, f *fakeTerminalAPI) (*TerminalAPI, *httptest.Server) {
	t.Helper()
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	f.now = now
	if f.expiresIn == 0 {
		f.expiresIn = 10 * time.Minute
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	gw, err := NewCardPointe(strings.Replace(srv.URL, "http://", "http://user:pass@", 1)+"/cardconnect/rest", nil)
	if err != nil {
		t.Fatal(err)
	}
	api, err := NewTerminalAPI(strings.Replace(srv.URL, "http://", "http://apikey123@", 1)+"/api/v2", gw, nil)
	if err != nil {
		t.Fatal(err)
	}
	api.Now = now
	return api, srv
}

// The documented approval of authCard by chip: its EMV tags as a JSON text.
var chipApproval = map[string]string{
	"token": "9418594164541111", "expiry": "1228", "name": "CC TEST", "batchid": "1900941444", "retref": "343005123105",
	"avsresp": "Y", "respproc": "FNOR", "amount": "12.34", "resptext": "Approval", "authcode": "PPS568", "respcode": "00",
	"merchid": "800000000800", "cvvresp": "M", "respstat": "A", "entrymode": "EMV Contact",
	"emvTagData": `{"TVR":"0280008000","PIN":"None","Signature":"false","Mode":"Issuer","ARC":"00","TSI":"E800",` +
		`"Application Preferred Name":"CREDITO DE VISA","AID":"A0000000031010","IAD":"06010A03A00000",` +
		`"Entry method":"Chip Read","Application Label":"VISA CREDIT"}`,
}

func terminalSale() TerminalSale {
	var amount apd.Decimal
	_, _, _ = amount.SetString("12.34")
	return TerminalSale{MerchantID: "800000000800", HSN: "C032UQ03960148", OrderID: "TP7Q2M4K9X1B3C5D7F9", InvoiceRef: "INV-2026-000", Amount: amount}
}

func TestTerminalAPIAuthCardApprovedByChip(t *testing.T) {
	f := &fakeTerminalAPI{authCard: func(http.ResponseWriter) (int, any) { return http.StatusOK, chipApproval }}
	api, _ := newTerminalAPI(t, f)
	res, err := api.AuthCard(context.Background(), terminalSale())
	if err != nil {
		t.Fatal(err)
	}
	want := TerminalResult{Approved: true, RetRef: "343005123105", Token: "9418594164541111", CardBrand: "visa", LastFour: "1111",
		EntryMode: EntryChip, ApplicationLabel: "VISA CREDIT", AID: "A0000000031010"}
	if res != want {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	if got := f.paths(); strings.Join(got, " ") != "/api/v2/connect /api/v2/authCard" {
		t.Fatalf("requests %v", got)
	}
	auth := f.requests[1]
	if auth.Authorization != "apikey123" || auth.Session != "session1" {
		t.Fatalf("authCard sent Authorization %q and session %q", auth.Authorization, auth.Session)
	}
	for k, v := range map[string]string{"merchantId": "800000000800", "hsn": "C032UQ03960148", "amount": "1234",
		"orderId": "TP7Q2M4K9X1B3C5D7F9", "invoiceId": "INV-2026-000", "capture": "true"} {
		if auth.Body[k] != v {
			t.Errorf("authCard %s = %q, want %q", k, auth.Body[k], v)
		}
	}
	if f.requests[0].Body["force"] != "true" {
		t.Errorf("connect body %v", f.requests[0].Body)
	}
}

func TestTerminalAPIAuthCardContactlessFromEntryMode(t *testing.T) {
	f := &fakeTerminalAPI{authCard: func(http.ResponseWriter) (int, any) {
		return http.StatusOK, map[string]string{"respstat": "A", "retref": "1", "token": "9541234567894444", "entrymode": "Contactless",
			"resptext": "Approval"}
	}}
	api, _ := newTerminalAPI(t, f)
	res, err := api.AuthCard(context.Background(), terminalSale())
	if err != nil || res.EntryMode != EntryContactless || res.CardBrand != "mastercard" || res.LastFour != "4444" {
		t.Fatalf("result %+v, %v", res, err)
	}
}

func TestTerminalAPIAuthCardDeclined(t *testing.T) {
	f := &fakeTerminalAPI{authCard: func(http.ResponseWriter) (int, any) {
		return http.StatusOK, map[string]string{"respstat": "C", "respcode": "NU", "resptext": "Insufficient funds",
			"token": "9418594164541111", "retref": "343005123106", "entrymode": "Swipe"}
	}}
	api, _ := newTerminalAPI(t, f)
	res, err := api.AuthCard(context.Background(), terminalSale())
	if err != nil || res.Approved || res.DeclineReason != "Insufficient funds" || res.EntryMode != EntrySwipe || res.LastFour != "1111" {
		t.Fatalf("result %+v, %v", res, err)
	}
}

// Every documented error: what it says about the card.
func TestTerminalAPIAuthCardErrors(t *testing.T) {
	for _, c := range []struct {
		name        string
		status      int
		body        any
		is          error
		unavailable bool // the order may stand: the gateway must be asked
	}{
		{"timed out", http.StatusInternalServerError, map[string]any{"errorCode": 1, "errorMessage": "Request timed out"}, ErrTerminalTimedOut, true},
		{"terminal in use", http.StatusInternalServerError, map[string]any{"errorCode": 7, "errorMessage": "Terminal in use"}, ErrTerminalBusy, false},
		{"cancelled", http.StatusInternalServerError, map[string]any{"errorCode": 8, "errorMessage": "Command cancelled"}, ErrTerminalCancelled, false},
		{"another code", http.StatusInternalServerError, map[string]any{"errorCode": 4, "errorMessage": "Card read error"}, ErrProcessorError, true},
		{"not JSON", http.StatusBadGateway, "oops", ErrProcessorError, true},
		{"retry", http.StatusOK, map[string]string{"respstat": "B", "resptext": "Retry"}, ErrProcessorError, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeTerminalAPI{authCard: func(http.ResponseWriter) (int, any) { return c.status, c.body }}
			api, _ := newTerminalAPI(t, f)
			_, err := api.AuthCard(context.Background(), terminalSale())
			if !errors.Is(err, c.is) || errors.Is(err, ErrUnavailable) != c.unavailable {
				t.Fatalf("error %v: want %v, unavailable %v", err, c.is, c.unavailable)
			}
		})
	}
}

// A connection dropped while the customer is at the terminal: the outcome
// is unknown, never a decline or a "nothing charged".
func TestTerminalAPIAuthCardConnectionDropped(t *testing.T) {
	f := &fakeTerminalAPI{authCard: func(w http.ResponseWriter) (int, any) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return 0, nil
	}}
	api, _ := newTerminalAPI(t, f)
	_, err := api.AuthCard(context.Background(), terminalSale())
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTerminalCancelled) || errors.Is(err, ErrTerminalBusy) || errors.Is(err, ErrTerminalOffline) {
		t.Fatalf("error %v, want only ErrUnavailable", err)
	}
}

// The session key is reused until shortly before it expires, and a key
// the API refuses is replaced once.
func TestTerminalAPISession(t *testing.T) {
	f := &fakeTerminalAPI{expiresIn: 10 * time.Minute}
	api, _ := newTerminalAPI(t, f)
	ctx := context.Background()
	for range 3 {
		if err := api.Ping(ctx, "800000000800", "HSN1"); err != nil {
			t.Fatal(err)
		}
	}
	if f.connects != 1 {
		t.Fatalf("%d connects for 3 pings within the key's life", f.connects)
	}
	// 20 s before expiry: renewed first.
	api.Now = func() time.Time { return f.now().Add(10*time.Minute - 20*time.Second) }
	if err := api.Ping(ctx, "800000000800", "HSN1"); err != nil || f.connects != 2 {
		t.Fatalf("ping near expiry: %v, %d connects", err, f.connects)
	}
	// The API refuses session2: a new key, and the ping again.
	f.refuse = func(path, session string) bool { return session == "session2" }
	if err := api.Ping(ctx, "800000000800", "HSN1"); err != nil || f.connects != 3 {
		t.Fatalf("ping with a refused key: %v, %d connects", err, f.connects)
	}
	if last := f.requests[len(f.requests)-1]; last.Path != "/api/v2/ping" || last.Session != "session3" {
		t.Fatalf("last request %+v", last)
	}
}

func TestTerminalAPIOffline(t *testing.T) {
	t.Run("ping says not connected", func(t *testing.T) {
		f := &fakeTerminalAPI{ping: func() (int, any) { return http.StatusOK, map[string]bool{"connected": false} }}
		api, _ := newTerminalAPI(t, f)
		if err := api.Ping(context.Background(), "800000000800", "HSN1"); !errors.Is(err, ErrTerminalOffline) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("connect answers an errorCode", func(t *testing.T) {
		f := &fakeTerminalAPI{connect: func() (int, any) {
			return http.StatusInternalServerError, map[string]any{"errorCode": 6, "errorMessage": "Terminal not found"}
		}}
		api, _ := newTerminalAPI(t, f)
		if err := api.Ping(context.Background(), "800000000800", "HSN1"); !errors.Is(err, ErrTerminalOffline) {
			t.Fatalf("ping: %v", err)
		}
		if _, err := api.AuthCard(context.Background(), terminalSale()); !errors.Is(err, ErrTerminalOffline) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("authCard: %v", err)
		}
	})
	t.Run("gateway away", func(t *testing.T) {
		f := &fakeTerminalAPI{}
		api, srv := newTerminalAPI(t, f)
		srv.Close()
		if err := api.Ping(context.Background(), "800000000800", "HSN1"); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTerminalOffline) {
			t.Fatalf("ping: %v", err)
		}
	})
}

func TestTerminalAPICancel(t *testing.T) {
	f := &fakeTerminalAPI{}
	api, _ := newTerminalAPI(t, f)
	if err := api.CancelTerminal(context.Background(), "800000000800", "HSN1"); err != nil {
		t.Fatal(err)
	}
	if last := f.requests[len(f.requests)-1]; last.Path != "/api/v2/cancel" || last.Body["hsn"] != "HSN1" || last.Session == "" {
		t.Fatalf("cancel sent %+v", last)
	}
}

func TestTerminalAPIInquireOrder(t *testing.T) {
	approved := map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": "343005123105",
		"account": "9418594164541111", "amount": "12.34", "merchid": "800000000800", "orderid": "TP1"}
	for _, c := range []struct {
		name   string
		answer any
		found  bool
		want   TerminalResult
	}{
		{"not found", map[string]string{"respstat": "C", "respcode": "29", "resptext": "Txn not found"}, false, TerminalResult{}},
		{"approved", approved, true, TerminalResult{Approved: true, RetRef: "343005123105", Token: "9418594164541111", CardBrand: "visa", LastFour: "1111"}},
		{"a list with a decline then the approval", []any{
			map[string]string{"respstat": "C", "respcode": "05", "resptext": "Do not honor", "retref": "1"}, approved,
		}, true, TerminalResult{Approved: true, RetRef: "343005123105", Token: "9418594164541111", CardBrand: "visa", LastFour: "1111"}},
		{"declined", map[string]string{"respstat": "C", "respcode": "NU", "resptext": "Insufficient funds", "retref": "2"}, true,
			TerminalResult{RetRef: "2", DeclineReason: "Insufficient funds"}},
		{"an empty list", []any{}, false, TerminalResult{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked string
			f := &fakeTerminalAPI{inquire: func(orderID string) (int, any) { asked = orderID; return http.StatusOK, c.answer }}
			api, _ := newTerminalAPI(t, f)
			res, found, err := api.InquireOrder(context.Background(), "800000000800", "TP1")
			if err != nil || found != c.found || res != c.want || asked != "TP1" {
				t.Fatalf("inquire: %+v found %v err %v (asked %q)", res, found, err, asked)
			}
		})
	}
	t.Run("gateway error", func(t *testing.T) {
		f := &fakeTerminalAPI{inquire: func(string) (int, any) { return http.StatusInternalServerError, "down" }}
		api, _ := newTerminalAPI(t, f)
		if _, _, err := api.InquireOrder(context.Background(), "800000000800", "TP1"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestCentsOf(t *testing.T) {
	for in, want := range map[string]string{"12.34": "1234", "0.01": "1", "1000000": "100000000", "5.5": "550"} {
		var d apd.Decimal
		_, _, _ = d.SetString(in)
		if got, err := centsOf(d); err != nil || got != want {
			t.Errorf("centsOf(%s) = %q, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "1.005"} {
		var d apd.Decimal
		_, _, _ = d.SetString(in)
		if _, err := centsOf(d); err == nil {
			t.Errorf("centsOf(%s) took it", in)
		}
	}
}

func TestSimTerminals(t *testing.T) {
	s := NewSimTerminals()
	s.TerminalDelay = 10 * time.Millisecond
	ctx := context.Background()
	sale := func(hsn, order string) TerminalSale { x := terminalSale(); x.HSN, x.OrderID = hsn, order; return x }

	res, err := s.AuthCard(ctx, sale("SIM-OK-1", "o1"))
	if err != nil || !res.Approved || res.EntryMode != EntryContactless || res.CardBrand != "visa" || res.LastFour != "1111" || res.RetRef == "" {
		t.Fatalf("SIM-OK: %+v %v", res, err)
	}
	if got, found, _ := s.InquireOrder(ctx, "800000000800", "o1"); !found || got != res {
		t.Fatalf("inquire o1: %+v %v", got, found)
	}
	if _, found, _ := s.InquireOrder(ctx, "800000000800", "never"); found {
		t.Fatal("an order never made was found")
	}
	res, err = s.AuthCard(ctx, sale("SIM-CHIP-1", "o2"))
	if err != nil || !res.Approved || res.EntryMode != EntryChip || res.ApplicationLabel != "VISA CREDIT" || res.AID != "A0000000031010" {
		t.Fatalf("SIM-CHIP: %+v %v", res, err)
	}
	res, err = s.AuthCard(ctx, sale("SIM-DECLINE-1", "o3"))
	if err != nil || res.Approved || res.DeclineReason != "Insufficient funds" {
		t.Fatalf("SIM-DECLINE: %+v %v", res, err)
	}
	if err := s.Ping(ctx, "m", "SIM-OFFLINE-1"); !errors.Is(err, ErrTerminalOffline) {
		t.Fatalf("SIM-OFFLINE ping: %v", err)
	}
	if _, err := s.AuthCard(ctx, sale("SIM-OFFLINE-1", "o4")); !errors.Is(err, ErrTerminalOffline) {
		t.Fatalf("SIM-OFFLINE authCard: %v", err)
	}
	if err := s.Ping(ctx, "m", "SIM-SLOW-1"); err != nil {
		t.Fatalf("SIM-SLOW ping: %v", err)
	}

	// SIM-SLOW never answers: its caller gives up (unknown), or a cancel
	// ends it; a second sale meanwhile finds it busy.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.AuthCard(short, sale("SIM-SLOW-1", "o5")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("SIM-SLOW gave %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.AuthCard(ctx, sale("SIM-SLOW-1", "o6")); done <- err }()
	deadline := time.Now().Add(2 * time.Second)
	for {
		s.mu.Lock()
		_, waiting := s.waiting["SIM-SLOW-1"]
		s.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SIM-SLOW never took the sale")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := s.AuthCard(ctx, sale("SIM-SLOW-1", "o7")); !errors.Is(err, ErrTerminalBusy) {
		t.Fatalf("a second sale on SIM-SLOW gave %v", err)
	}
	_ = s.CancelTerminal(ctx, "m", "SIM-SLOW-1")
	if err := <-done; !errors.Is(err, ErrTerminalCancelled) {
		t.Fatalf("cancelled SIM-SLOW gave %v", err)
	}
}
