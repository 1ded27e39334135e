package delivery

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/smtpfake"
)

// Providers that answer slower than the send timeout, are down, or answer
// errors: every try ends within the timeout, the message is tried again after
// a backoff and finally fails with send_problem; meanwhile the worker keeps
// delivering through the provider that works, and nothing is lost.

// stallingSMS is an SMS provider that takes requests and answers none of them
// (while stalling is set), or answers 201.
type stallingSMS struct {
	srv      *httptest.Server
	stalling atomic.Bool
	got      atomic.Int32
	open     atomic.Int32 // requests being held now
	quit     chan struct{}
}

func startStallingSMS(t *testing.T) *stallingSMS {
	t.Helper()
	p := &stallingSMS{quit: make(chan struct{})}
	p.stalling.Store(true)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.got.Add(1)
		// With the body read, the server notices the client hanging up.
		io.Copy(io.Discard, r.Body)
		if p.stalling.Load() {
			p.open.Add(1)
			defer p.open.Add(-1)
			select {
			case <-r.Context().Done(): // the client gave up
			case <-p.quit:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"sid": "SM123", "status": "queued"}`))
	}))
	t.Cleanup(func() {
		close(p.quit)
		p.srv.Close()
	})
	return p
}

func (p *stallingSMS) url() string {
	return p.srv.URL + "/Messages.json?" + url.Values{"from": {"+15550000000"}}.Encode()
}

// slowConfig gives each try 1 s (half the lease). The other half is room for
// claiming and recording on a loaded machine (and under -race): a try that
// outlived its lease would be claimed again and counted twice.
func slowConfig(t *testing.T) Config {
	cfg := testConfig(t)
	cfg.Lease = 2 * time.Second
	cfg.MaxAttempts = 3
	return cfg
}

func TestProviderSlowerThanTheTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		slow        string // the channel whose provider stalls
		mode        smtpfake.Mode
		wantProblem string
	}{
		{name: "mail server never greets", slow: ChannelEmail, mode: smtpfake.StallGreeting,
			wantProblem: "the mail server did not answer in time"},
		{name: "mail server never answers the message", slow: ChannelEmail, mode: smtpfake.StallData,
			wantProblem: "the mail server did not answer in time"},
		{name: "text provider never answers", slow: ChannelText,
			wantProblem: "the text message provider did not answer in time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			cfg := slowConfig(t)
			mail := smtpfake.Start(t, smtpfake.Accept)
			sms := startStallingSMS(t)
			sms.stalling.Store(false)
			fast, recipient, fastRecipient := ChannelText, testCustomer, testPhone
			if tt.slow == ChannelEmail {
				mail.SetMode(tt.mode)
			} else {
				sms.stalling.Store(true)
				fast, recipient, fastRecipient = ChannelEmail, testPhone, testCustomer
			}
			cfg.SMTPURL, cfg.SMSURL = mail.URL("billing@example.com"), sms.url()

			// More slow messages than the worker delivers at once, so every
			// slot is held by a stalled try.
			var slowIDs []uuid.UUID
			var slowInvoices []invoice
			for range 2 * DefaultConcurrency {
				inv := newInvoice(t, db)
				slowInvoices = append(slowInvoices, inv)
				slowIDs = append(slowIDs, enqueue(t, db, inv, tt.slow, recipient))
			}
			start := time.Now()
			run(t, newWorker(t, db, cfg))

			// Messages through the working provider still go out: a stalled
			// try gives its slot back at the timeout.
			var fastIDs []uuid.UUID
			for range 3 {
				fastIDs = append(fastIDs, enqueue(t, db, newInvoice(t, db), fast, fastRecipient))
			}
			for _, id := range fastIDs {
				eventually(t, "a message through the working provider is delivered", delivered(t, db, id))
			}
			if took := time.Since(start); took > 8*time.Second {
				t.Errorf("messages through the working provider took %v: the stalled provider held the worker", took)
			}

			for i, id := range slowIDs {
				eventually(t, "the stalled message fails", failed(t, db, id))
				r := readOutbox(t, db, id)
				if r.Attempts != cfg.MaxAttempts || r.DeliveredAt.Valid {
					t.Errorf("outbox row = %+v, want %d attempts and not delivered", r, cfg.MaxAttempts)
				}
				// Backoffs between tries: at least half of 20 ms and of 40 ms.
				if took := r.FailedAt.Time.Sub(r.CreatedAt); took < time.Duration(cfg.MaxAttempts)*cfg.sendTimeout() {
					t.Errorf("failed after %v, want %d tries of %v each", took, cfg.MaxAttempts, cfg.sendTimeout())
				}
				if got := readSendProblem(t, db, slowInvoices[i]); !strings.HasSuffix(got, "after 3 attempts: "+tt.wantProblem+".") {
					t.Errorf("send_problem = %q, want it to end %q", got, "after 3 attempts: "+tt.wantProblem+".")
				}
			}
			// Every stalled connection was given up by the client.
			eventually(t, "the stalled connections are closed", func() bool {
				return mail.Stalled() == 0 && sms.open.Load() == 0
			})
			if n := len(mail.Received()); tt.slow == ChannelEmail && n != 0 {
				t.Errorf("the stalled mail server took %d messages", n)
			}
		})
	}
}

// A provider that is slow, down or failing for a while, then recovers: every
// message arrives, once, and no send_problem is set.
func TestProviderRecoversNothingLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mode smtpfake.Mode // the mail server's trouble; the text provider stalls
	}{
		{name: "stalls", mode: smtpfake.StallData},
		{name: "answers 451", mode: smtpfake.Temporary},
		{name: "down", mode: smtpfake.Down},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			cfg := slowConfig(t)
			cfg.MaxAttempts = 50 // enough to outlast the trouble
			cfg.BackoffMax = 50 * time.Millisecond
			sms := startStallingSMS(t)
			cfg.SMSURL = sms.url()

			mail := smtpfake.Start(t, tt.mode)
			cfg.SMTPURL = mail.URL("billing@example.com")

			var ids []uuid.UUID
			var invoices []invoice
			for range 5 {
				inv := newInvoice(t, db)
				invoices = append(invoices, inv)
				ids = append(ids, enqueue(t, db, inv, ChannelEmail, testCustomer))
				ids = append(ids, enqueue(t, db, inv, ChannelText, testPhone))
			}
			run(t, newWorker(t, db, cfg))
			// Let every message fail at least once, then let the providers work.
			eventually(t, "every message has been tried and failed", func() bool {
				for _, id := range ids {
					if r := readOutbox(t, db, id); r.Attempts < 2 || !r.LastError.Valid {
						return false
					}
				}
				return true
			})
			mail.SetMode(smtpfake.Accept)
			sms.stalling.Store(false)

			for _, id := range ids {
				eventually(t, "the message is delivered", delivered(t, db, id))
			}
			got := mail.ByMessageID()
			for i := 0; i < len(ids); i += 2 { // the emails
				if id := ids[i]; got[MessageID(id)] != 1 {
					t.Errorf("received %s %d times, want once", MessageID(id), got[MessageID(id)])
				}
			}
			for _, inv := range invoices {
				if p := readSendProblem(t, db, inv); p != "" {
					t.Errorf("send_problem = %q, want none", p)
				}
			}
		})
	}
}

func TestTextProviderDown(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	cfg := testConfig(t)
	cfg.SMSURL = "http://" + closed + "/Messages.json?from=%2B15550000000"
	inv := newInvoice(t, db)
	id := enqueue(t, db, inv, ChannelText, testPhone)

	run(t, newWorker(t, db, cfg))
	eventually(t, "the text message fails", failed(t, db, id))
	if r := readOutbox(t, db, id); r.Attempts != cfg.MaxAttempts {
		t.Errorf("attempts = %d, want %d", r.Attempts, cfg.MaxAttempts)
	}
	want := "Text message could not be delivered to " + testPhone + " after 3 attempts: the text message provider could not be reached."
	if got := readSendProblem(t, db, inv); got != want {
		t.Errorf("send_problem = %q, want %q", got, want)
	}
}
