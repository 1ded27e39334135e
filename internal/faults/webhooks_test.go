package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Two instances deliver webhooks from one outbox; one is killed with
// SIGKILL in the middle of a delivery (its receiver holds the request).
// The other delivers that event once its lease ends, and every event gets
// exactly one successful delivery, verified by the Standard Webhooks
// reference library.
func TestWebhooksTwoInstancesOneKilled(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	d.Env["PAYREQ_WEBHOOK_ALLOW_PRIVATE"] = "true"
	d.Env["PAYREQ_WEBHOOK_TIMEOUT"] = "3s" // a lease of 8 s
	keys := d.seed(t)

	var mu sync.Mutex
	var secret string
	stall := true
	stalled := make(chan struct{}, 1)
	ok := map[string]int{} // 2xx answers per webhook-id
	var refused []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		hold := stall
		stall = false
		s := secret
		mu.Unlock()
		if hold {
			stalled <- struct{}{}
			<-r.Context().Done() // until the sender dies
			return
		}
		wh, err := standardwebhooks.NewWebhook(s)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			refused = append(refused, err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		ok[r.Header.Get("webhook-id")]++
		w.WriteHeader(http.StatusOK)
	}))
	defer receiver.Close()

	a := d.start(t, "a", nil)
	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, a.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, a.URL, tok)
	made := send(c, "POST", a.URL+"/webhook-endpoints", tok, map[string]any{"url": receiver.URL, "eventTypes": []string{"invoice.created"}}, nil)
	if made.Status != http.StatusCreated {
		t.Fatalf("create endpoint: %v", made)
	}
	var ep struct{ Secret string }
	if err := json.Unmarshal(made.Body, &ep); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	secret = ep.Secret
	mu.Unlock()

	created(t, send(c, "POST", a.URL+"/payment-requests", tok, invoiceBody(mid, "WH-0", false), nil))
	select {
	case <-stalled:
	case <-time.After(20 * time.Second):
		t.Fatal("instance a delivered nothing")
	}
	a.kill()
	b := d.start(t, "b", map[string]string{"PAYREQ_ADDR": freeAddr(t)})
	for i := 1; i <= 20; i++ {
		created(t, send(c, "POST", b.URL+"/payment-requests", tok, invoiceBody(mid, fmt.Sprintf("WH-%d", i), false), nil))
	}
	eventually(t, 40*time.Second, "every event delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ok) == 21
	})
	time.Sleep(time.Second) // room for a second delivery to show
	mu.Lock()
	defer mu.Unlock()
	for id, n := range ok {
		if n != 1 {
			t.Errorf("event %s delivered %d times", id, n)
		}
	}
	if len(refused) > 0 {
		t.Errorf("deliveries the reference library refused: %v", refused)
	}
}
