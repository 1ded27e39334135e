package faults

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/smtpfake"
)

// SIGTERM under load: every request the process accepted is answered in
// full, nothing is half-written, and the messages it had not delivered
// (some of them in the middle of a delivery to a stalled mail server) are
// delivered by the next process.
func TestSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	mail := smtpfake.Start(t, smtpfake.StallData)
	d.Env["PAYREQ_SMTP_URL"] = mail.URL("billing@example.com")
	d.Env["PAYREQ_DELIVERY_LEASE"] = "4s" // each try gets 2 s
	d.Env["PAYREQ_DELIVERY_BACKOFF"] = "100ms"
	keys := d.seed(t)
	first := d.start(t, "first", nil)

	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, first.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, first.URL, tok)

	// Clients send to the deployment's address; the next process takes it
	// over, and clients send what got no answer again, with its key.
	load := newCreates(t, mid, tok, "TERM", true, func() string { return first.URL })
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	creators := load.run(ctx, 8, "127.0.0.1", time.Now().Add(90*time.Second))
	var readErrs []string
	var reads int
	var mu sync.Mutex
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for ctx.Err() == nil {
				a := send(c, "GET", first.URL+"/payment-requests?limit=10", tok, nil, nil)
				mu.Lock()
				switch {
				case a.Err != nil && neverReached(a.Err):
				case a.Status != http.StatusOK:
					readErrs = append(readErrs, a.String())
				default:
					reads++
				}
				mu.Unlock()
			}
		}()
	}

	eventually(t, 20*time.Second, "deliveries are under way", func() bool { return mail.Stalled() > 0 })
	time.Sleep(time.Second)
	_, before, _, _ := load.summary()
	term := time.Now()
	first.signal(syscall.SIGTERM)
	if err := first.wait(40 * time.Second); err != nil {
		t.Errorf("first process exited with %v after SIGTERM", err)
	}
	t.Logf("first process stopped %v after SIGTERM", time.Since(term).Round(time.Millisecond))
	if !strings.Contains(first.logs.String(), `"msg":"stopped"`) {
		t.Error("first process did not log that it stopped")
	}

	db := openDB(t, dsn)
	var undelivered, outboxRows int
	if err := db.Get(&outboxRows, `SELECT count(*) FROM outbox`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&undelivered, `SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND failed_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	if undelivered == 0 {
		t.Fatal("every message was delivered before SIGTERM; the test needs some that were not")
	}
	var claimed int // held by a lease that the first process left
	if err := db.Get(&claimed, `SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND next_attempt_at > now()`); err != nil {
		t.Fatal(err)
	}
	t.Logf("at exit: %d messages, %d undelivered, %d of them leased (none should be: cut-short tries are given back)",
		outboxRows, undelivered, claimed)
	if claimed > 0 {
		t.Errorf("%d messages left leased by the stopped process", claimed)
	}

	// The next process, with the mail server working again.
	mail.SetMode(smtpfake.Accept)
	second := d.start(t, "second", nil)
	time.Sleep(time.Second)
	stopLoad()
	creators.Wait()
	readers.Wait()

	ids, statuses, errs, slowest := load.summary()
	t.Logf("creates: %d keys, answers %v (before SIGTERM %v), transport errors %d, slowest %v; reads %d",
		len(ids), statuses, before, len(errs), slowest, reads)
	for _, err := range errs {
		if !neverReached(err) {
			t.Errorf("a create the process had accepted got no answer: %v", err)
		}
	}
	for status := range statuses {
		if status != http.StatusCreated && status != http.StatusOK {
			t.Errorf("creates answered %d: %v", status, statuses)
		}
	}
	for _, e := range readErrs {
		t.Errorf("list: %s", e)
	}
	load.checkExactlyOne(t, countByNumber(t, db))
	checkInvoicesWhole(t, db)

	// Every message goes out.
	eventually(t, 30*time.Second, "the second process delivers every message", func() bool {
		var left int
		if err := db.Get(&left, `SELECT count(*) FROM outbox WHERE delivered_at IS NULL`); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
	var messageIDs []string
	if err := db.Select(&messageIDs, `SELECT '<' || id || '@payreq>' FROM outbox`); err != nil {
		t.Fatal(err)
	}
	got := mail.ByMessageID()
	dups := 0
	for _, id := range messageIDs {
		switch n := got[id]; {
		case n == 0:
			t.Errorf("message %s never arrived", id)
		case n > 1:
			dups++
		}
	}
	t.Logf("%d messages delivered, %d of them more than once", len(messageIDs), dups)
	second.signal(syscall.SIGTERM)
	if err := second.wait(40 * time.Second); err != nil {
		t.Errorf("second process exited with %v", err)
	}
}
