package delivery

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// smsProvider is an httptest fake of a Twilio-style messages API. It answers
// with the statuses in script, one a request, then 201.
type smsProvider struct {
	srv *httptest.Server

	mu       sync.Mutex
	script   []int
	requests []smsRequest
}

type smsRequest struct {
	Path, Query    string
	User, Pass     string
	Auth           bool
	ContentType    string
	IdempotencyKey string
	Form           url.Values
}

func startSMSProvider(t *testing.T, script ...int) *smsProvider {
	t.Helper()
	p := &smsProvider{script: script}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.requests = append(p.requests, smsRequest{Path: r.URL.Path, Query: r.URL.RawQuery,
			User: user, Pass: pass, Auth: ok, ContentType: r.Header.Get("Content-Type"),
			IdempotencyKey: r.Header.Get(IdempotencyHeader), Form: r.PostForm})
		status := http.StatusCreated
		if len(p.script) > 0 {
			status, p.script = p.script[0], p.script[1:]
		}
		p.mu.Unlock()
		switch {
		case status == http.StatusBadRequest:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(`{"code": 21211, "message": "The 'To' number ` + r.PostForm.Get("To") + ` is not a valid phone number.", "status": 400}`))
		case status >= 300:
			http.Error(w, "Upstream\nunavailable", status)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(`{"sid": "SM123", "status": "queued"}`))
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *smsProvider) url() string {
	u, _ := url.Parse(p.srv.URL)
	u.User = url.UserPassword("AC123", "tok&en")
	u.Path = "/2010-04-01/Accounts/AC123/Messages.json"
	u.RawQuery = url.Values{"from": {"+15550000000"}}.Encode()
	return u.String()
}

func (p *smsProvider) received() []smsRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]smsRequest(nil), p.requests...)
}

func TestTextThroughSMSProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		script       []int
		wantAttempts int
		wantProblem  string // empty: delivered
	}{
		{name: "sent", script: nil, wantAttempts: 1},
		{name: "500 then 200", script: []int{500, 200}, wantAttempts: 2},
		{name: "429 then 201", script: []int{429}, wantAttempts: 2},
		{name: "400 fails at once", script: []int{400, 201}, wantAttempts: 1,
			wantProblem: "Text message could not be delivered to " + testPhone + " after 1 attempt: " +
				"the text message provider answered 400 Bad Request: The 'To' number " + testPhone +
				" is not a valid phone number. (code 21211)."},
		{name: "500 until the last try", script: []int{500, 502, 503, 201}, wantAttempts: 3,
			wantProblem: "Text message could not be delivered to " + testPhone + " after 3 attempts: " +
				"the text message provider answered 503 Service Unavailable: Upstream unavailable."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			provider := startSMSProvider(t, tt.script...)
			cfg := testConfig(t)
			cfg.SMSURL = provider.url()
			inv := newInvoice(t, db)
			id := enqueue(t, db, inv, ChannelText, testPhone)

			run(t, newWorker(t, db, cfg))
			if tt.wantProblem == "" {
				eventually(t, "the text message is delivered", delivered(t, db, id))
			} else {
				eventually(t, "the text message fails", failed(t, db, id))
			}
			if r := readOutbox(t, db, id); r.Attempts != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", r.Attempts, tt.wantAttempts)
			}
			if got := readSendProblem(t, db, inv); got != tt.wantProblem {
				t.Errorf("send_problem = %q, want %q", got, tt.wantProblem)
			}

			reqs := provider.received()
			if len(reqs) != tt.wantAttempts {
				t.Fatalf("provider got %d requests, want %d", len(reqs), tt.wantAttempts)
			}
			for _, r := range reqs {
				if r.Path != "/2010-04-01/Accounts/AC123/Messages.json" || r.Query != "" {
					t.Errorf("request to %s?%s, want the URL's path without from", r.Path, r.Query)
				}
				if !r.Auth || r.User != "AC123" || r.Pass != "tok&en" {
					t.Errorf("basic auth %q/%q (%v), want AC123/tok&en", r.User, r.Pass, r.Auth)
				}
				if r.ContentType != "application/x-www-form-urlencoded" {
					t.Errorf("Content-Type %q", r.ContentType)
				}
				// Every try carries the same id, so the provider can drop a repeat.
				if r.IdempotencyKey != id.String() || r.Form.Get("IdempotencyKey") != id.String() {
					t.Errorf("idempotency key %q / %q, want %s", r.IdempotencyKey, r.Form.Get("IdempotencyKey"), id)
				}
				if r.Form.Get("To") != testPhone || r.Form.Get("From") != "+15550000000" {
					t.Errorf("To %q From %q", r.Form.Get("To"), r.Form.Get("From"))
				}
				body := r.Form.Get("Body")
				for _, want := range []string{testLocation, inv.Number, testAmountShown, testDueShown, inv.payLink()} {
					if !strings.Contains(body, want) {
						t.Errorf("Body %q lacks %q", body, want)
					}
				}
			}
		})
	}
}

// A provider answering with a redirect gets no second request anywhere:
// the message and the account's token stay where they were sent.
func TestTextFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(other.Close)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(provider.Close)
	cfg := testConfig(t)
	cfg.SMSURL = strings.Replace(provider.URL, "http://", "http://AC123:token@", 1) + "/Messages.json?from=%2B15550000000"
	cfg.MaxAttempts = 1
	inv := newInvoice(t, db)
	id := enqueue(t, db, inv, ChannelText, testPhone)

	run(t, newWorker(t, db, cfg))
	eventually(t, "the text message fails", failed(t, db, id))
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests, want none", n)
	}
}
