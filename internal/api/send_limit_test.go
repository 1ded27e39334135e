package api_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
)

// One invoice's pay link goes out at most 5 times in 24 hours, the send on
// creation among them: the sixth is a 429 with Retry-After (as
// openapi.yaml documents it, which every answer is checked against) that
// queues nothing; once the first send is a day old, a send goes out again.
func TestSixthSendInADayIsRefused(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	m := apitest.NewMerchant(t, env)
	b := m.Body("SEND-LIMIT", "20.00")
	b["send"] = true
	inv := m.MustCreate(t, b)
	send := func() *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/send", Token: m.Token})
	}
	queued := func() (n int) {
		if err := env.App.DB.Get(&n, `SELECT count(*) FROM outbox WHERE invoice_id = $1`, inv.Id); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := 2; i <= 5; i++ {
		env.Clock.Advance(time.Hour)
		m.Renew()
		if r := send(); r.StatusCode != http.StatusOK {
			t.Fatalf("send %d: %d %s", i, r.StatusCode, r.Body)
		}
	}
	r := send()
	if r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the sixth send: %d %s", r.StatusCode, r.Body)
	}
	// The first send leaves the day 20 hours from now.
	if secs, _ := strconv.Atoi(r.Header.Get("Retry-After")); secs != 20*3600 {
		t.Errorf("Retry-After %q, want %d", r.Header.Get("Retry-After"), 20*3600)
	}
	apitest.Want(t, "detail", r.Problem(t).Detail, "The pay link of an invoice can be sent at most 5 times in 24 hours. Retry after 72000 seconds.")
	if n := queued(); n != 5 {
		t.Fatalf("%d messages queued, want 5", n)
	}
	env.Clock.Advance(20 * time.Hour)
	m.Renew()
	if r := send(); r.StatusCode != http.StatusOK {
		t.Fatalf("a send a day after the first: %d %s", r.StatusCode, r.Body)
	}
	if r := send(); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second send then: %d %s", r.StatusCode, r.Body)
	}
}
