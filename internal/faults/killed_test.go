package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/smtpfake"
)

// Two instances share one database; one is killed with SIGKILL while it is
// delivering (its mail server stalls) and while it answers creates. The
// other delivers the dead one's messages once their lease ends, takes over
// its clients, and the token limit, revocation and idempotency hold across
// both, before and after the kill.
func TestTwoInstancesOneKilled(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	const lease = 8 * time.Second // each try gets 4 s: the kill comes well within it
	d.Env["PAYREQ_DELIVERY_LEASE"] = lease.String()
	d.Env["PAYREQ_DELIVERY_BACKOFF"] = "100ms"
	d.Env["PAYREQ_REVOCATION_CHECK_INTERVAL"] = "1s"
	mailA := smtpfake.Start(t, smtpfake.StallData)
	mailB := smtpfake.Start(t, smtpfake.Accept)
	keys := d.seed(t)
	a := d.start(t, "a", map[string]string{"PAYREQ_SMTP_URL": mailA.URL("a@example.com")})
	b := d.start(t, "b", map[string]string{"PAYREQ_SMTP_URL": mailB.URL("b@example.com"), "PAYREQ_ADDR": freeAddr(t)})
	both := []*instance{a, b}

	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, a.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, b.URL, tok)

	// The token limit: 30 a minute per address, counted across both. The
	// count is per minute of the clock, so the burst keeps within one.
	if sec := time.Now().Second(); sec >= 55 {
		time.Sleep(time.Duration(61-sec) * time.Second)
	}
	limited := httpClient("127.0.0.77", 10*time.Second)
	tokenFrom := func(in *instance) answer {
		return send(limited, "POST", in.URL+"/oauth/token", "", map[string]string{
			"grant_type": "client_credentials", "client_id": keys.Merchant.KeyID, "client_secret": keys.Merchant.Secret}, nil)
	}
	for i := range 30 {
		if r := tokenFrom(both[i%2]); r.Status != http.StatusOK {
			t.Fatalf("token request %d of 30 on %s: %v", i+1, both[i%2].name, r)
		}
	}
	for _, in := range both {
		if r := tokenFrom(in); r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Errorf("31st token request on %s: %v, want 429 with Retry-After", in.name, r)
		}
	}

	// Revocation: a key revoked through one database is refused by both
	// within the check interval.
	var k struct {
		KeyID  string `json:"keyId"`
		Secret string `json:"secret"`
	}
	out := d.cli(t, "keys", "create", "--org", keys.Merchant.OrganizationID, "--name", "to revoke",
		"--permissions", "payments.view", "--json")
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	other := httpClient("127.0.0.78", 10*time.Second)
	doomed := token(t, other, b.URL, k.KeyID, k.Secret)
	for _, in := range both {
		if r := send(other, "GET", in.URL+"/payment-requests?limit=1", doomed, nil, nil); r.Status != http.StatusOK {
			t.Fatalf("%s before revocation: %v", in.name, r)
		}
	}
	d.cli(t, "keys", "revoke", k.KeyID)
	revoked := time.Now()
	for _, in := range both {
		eventually(t, 10*time.Second, in.name+" refuses the revoked key", func() bool {
			r := send(other, "GET", in.URL+"/payment-requests?limit=1", doomed, nil, nil)
			return r.Status == http.StatusUnauthorized && strings.Contains(string(r.Body), "API key revoked")
		})
	}
	t.Logf("both instances refuse the revoked key %v after the revocation", time.Since(revoked).Round(time.Millisecond))
	if r := send(other, "POST", a.URL+"/oauth/token", "", map[string]string{
		"grant_type": "client_credentials", "client_id": k.KeyID, "client_secret": k.Secret}, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("token for a revoked key: %v", r)
	}

	// Idempotency: one key sent to both at once makes one invoice.
	twice := map[string]string{} // key → invoice id
	for range 10 {
		key := uuid.NewString()
		body := invoiceBody(mid, "BOTH-"+key[:13], false)
		answers := make([]answer, 2)
		var wg sync.WaitGroup
		for i, in := range both {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = send(c, "POST", in.URL+"/payment-requests", tok, body, http.Header{"Idempotency-Key": {key}})
			}()
		}
		wg.Wait()
		statuses := []int{answers[0].Status, answers[1].Status}
		if !(statuses[0] == 201 && statuses[1] == 200 || statuses[0] == 200 && statuses[1] == 201) {
			t.Errorf("one key sent to both: answers %v and %v, want 201 and 200", answers[0], answers[1])
			continue
		}
		if id0, id1 := created(t, answers[0]), created(t, answers[1]); id0 != id1 {
			t.Errorf("one key, two invoices: %s and %s", id0, id1)
		} else {
			twice[key] = id0
		}
	}

	// Load on a: creates that send their link (so both workers have mail
	// to deliver), until a dies; its clients then go to b with their keys.
	var killed atomic.Bool
	load := newCreates(t, mid, tok, "KILL", true, func() string {
		if killed.Load() {
			return b.URL
		}
		return a.URL
	})
	load.retryOn = func(answer) bool { return killed.Load() } // a connection cut by the kill
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	creators := load.run(ctx, 4, "127.0.0.1", time.Now().Add(60*time.Second))

	// Kill a while it holds as many deliveries as it makes at once, well
	// within their time, so each is cut in the middle.
	eventually(t, 20*time.Second, "a is delivering", func() bool { return mailA.Stalled() > 0 })
	deadline := time.Now().Add(1500 * time.Millisecond)
	for mailA.Stalled() < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stalled := mailA.Stalled()
	killed.Store(true)
	a.kill()
	killedAt := time.Now()
	// What was leased before the kill and is still not delivered once b
	// has finished the deliveries it had under way is what a held: those in
	// the middle of their delivery (the mail server took them whole and never
	// answered), and any claimed just before.
	time.Sleep(time.Second)
	db := openDB(t, dsn)
	type leased struct {
		ID    uuid.UUID `db:"id"`
		Until time.Time `db:"next_attempt_at"`
	}
	var held []leased
	if err := db.Select(&held, `SELECT id, next_attempt_at FROM outbox
		WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at > now() AND next_attempt_at <= $1`,
		killedAt.Add(lease)); err != nil { // leased before the kill
		t.Fatal(err)
	}
	inDelivery := mailA.Held()
	t.Logf("a killed while delivering %d messages; %d messages leased by a at the kill", stalled, len(held))
	if len(inDelivery) == 0 {
		t.Fatal("no message was in the middle of its delivery at the kill")
	}
	leasedIDs := map[string]bool{}
	for _, h := range held {
		leasedIDs["<"+h.ID.String()+"@payreq>"] = true
	}
	for _, id := range inDelivery {
		if !leasedIDs[id] {
			t.Errorf("message %s was in the middle of a's delivery, yet is not leased", id)
		}
	}
	stopLoad()
	creators.Wait()

	ids, statuses, errs, _ := load.summary()
	t.Logf("creates: %d keys, answers %v, cut by the kill and sent again to b: %d", len(ids), statuses, len(errs))
	for status := range statuses {
		if status != http.StatusCreated && status != http.StatusOK {
			t.Errorf("creates answered %d", status)
		}
	}
	load.checkExactlyOne(t, countByNumber(t, db))
	checkInvoicesWhole(t, db)

	// b delivers everything, a's messages once their lease has ended.
	eventually(t, lease+20*time.Second, "b delivers every message", func() bool {
		var left int
		if err := db.Get(&left, `SELECT count(*) FROM outbox WHERE delivered_at IS NULL`); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
	// Each message a's mail server held was a's (b's server accepts at
	// once): it waits for a's lease and is tried again. The rest of held
	// may be b's own, claimed just before the kill and still in delivery
	// a second later on a loaded machine.
	for _, h := range held {
		if !slices.Contains(inDelivery, "<"+h.ID.String()+"@payreq>") {
			continue
		}
		var r struct {
			DeliveredAt time.Time `db:"delivered_at"`
			Attempts    int       `db:"attempts"`
		}
		if err := db.Get(&r, `SELECT delivered_at, attempts FROM outbox WHERE id = $1`, h.ID); err != nil {
			t.Fatal(err)
		}
		if r.DeliveredAt.Before(h.Until) {
			t.Errorf("message %s delivered at %v, before a's lease ended at %v", h.ID, r.DeliveredAt, h.Until)
		}
		if r.Attempts < 2 {
			t.Errorf("message %s: %d attempts, want a's and b's", h.ID, r.Attempts)
		}
	}
	var messageIDs []string
	if err := db.Select(&messageIDs, `SELECT '<' || id || '@payreq>' FROM outbox`); err != nil {
		t.Fatal(err)
	}
	got := mailB.ByMessageID()
	for _, id := range messageIDs {
		if got[id] != 1 {
			t.Errorf("message %s arrived %d times at b's mail server, want once", id, got[id])
		}
	}
	if n := len(mailA.Received()); n != 0 {
		t.Errorf("a's stalled mail server took %d messages", n)
	}
	t.Logf("%d messages delivered by b, the last %v after the kill", len(messageIDs), time.Since(killedAt).Round(time.Millisecond))

	// After the kill, b alone: the revocation and the keys are the
	// database's, not a's.
	if r := send(other, "GET", b.URL+"/payment-requests?limit=1", doomed, nil, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("revoked key on b after a's death: %v", r)
	}
	for key, id := range twice {
		r := send(c, "POST", b.URL+"/payment-requests", tok, invoiceBody(mid, "BOTH-"+key[:13], false), http.Header{"Idempotency-Key": {key}})
		if r.Status != http.StatusOK || created(t, r) != id {
			t.Errorf("key %s again on b: %v, want 200 with %s", key, r, id)
		}
	}
	perNumber := countByNumber(t, db)("BOTH-")
	for key := range twice {
		if n := perNumber["BOTH-"+key[:13]]; n != 1 {
			t.Errorf("key %s: %d invoices", key, n)
		}
	}
}

// The process is killed (SIGKILL) in the middle of a charge on the pay
// page: the processor got the authorisation, charged the card and has not
// answered. What is left is the pending charge written before the
// processor was asked, and no payment. The next process voids that order at
// the processor once the pending charge is due (a payment is recorded only
// with the processor's answer, which died with the process, so the charge
// is cancelled rather than kept) and forgets it; the invoice is as it was
// and can be paid.
func TestKilledMidCharge(t *testing.T) {
	t.Parallel() // waits for the settlement more than it works
	g := startGateway(t, func(n int) authPlan {
		if n == 1 {
			return authPlan{slow: true} // charged, and the answer never comes
		}
		return authPlan{}
	})
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	d.Env["PAYREQ_PROCESSOR"] = "cardpointe"
	d.Env["PAYREQ_CARDPOINTE_URL"] = g.url()
	keys := d.seed(t)
	first := d.start(t, "first", nil)
	c := httpClient("127.0.0.1", 60*time.Second)
	tok := token(t, c, first.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, first.URL, tok)

	invoiceID, path := payable(t, c, first.URL, tok, mid, "KILLED-1")

	customer := httpClient("127.0.0.121", 60*time.Second)
	answered := make(chan answer, 1)
	go func() {
		r, err := pay(customer, first.URL, path, "30.00")
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	var order string
	eventually(t, 20*time.Second, "the processor has charged the card", func() bool {
		for id := range g.captured() {
			order = id
		}
		return order != ""
	})
	first.kill()
	if r := <-answered; r.Err == nil {
		t.Errorf("the customer got an answer from the killed process: %v", r)
	}

	db := openDB(t, dsn)
	countPayments := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM card_payments WHERE status = 'approved'`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := countPayments(); n != 0 {
		t.Errorf("%d payments after the kill, want none", n)
	}
	var pending []struct {
		OrderID   string `db:"order_id"`
		InvoiceID string `db:"invoice_id"`
	}
	if err := db.Select(&pending, `SELECT order_id::text, invoice_id::text FROM pending_charges`); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].OrderID != order || pending[0].InvoiceID != invoiceID {
		t.Fatalf("pending charges %+v, want order %s of invoice %s", pending, order, invoiceID)
	}

	second := d.start(t, "second", nil)
	if v := g.voidRequests(); len(v) != 0 {
		t.Errorf("voided before the pending charge was due: %v", v)
	}
	// Stands in for time passing: the pending charge falls due 3 minutes
	// after it was written, once no Pay can record it any more.
	if _, err := db.Exec(`UPDATE pending_charges SET void_after = now() WHERE order_id = $1`, order); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pending charge is settled", func() bool {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM pending_charges`); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if v := g.voidRequests(); len(v) != 1 || v[order] != 1 {
		t.Errorf("void requests %v, want one for order %s", v, order)
	}
	if ledger := g.captured(); len(ledger) != 0 {
		t.Errorf("charges standing at the processor after the settlement: %v", ledger)
	}
	if n := countPayments(); n != 0 {
		t.Errorf("%d payments after the settlement, want none", n)
	}

	// The invoice is as it was, and the customer can pay it.
	a := send(c, "GET", second.URL+"/payment-requests/"+invoiceID, tok, nil, nil)
	var got struct {
		Status     string `json:"status"`
		AmountPaid string `json:"amountPaid"`
		Balance    string `json:"balance"`
	}
	if err := json.Unmarshal(a.Body, &got); a.Status != http.StatusOK || err != nil {
		t.Fatalf("get invoice: %v", a)
	}
	if got.Status != "open" || !sameAmount(got.AmountPaid, "0") || !sameAmount(got.Balance, "30") {
		t.Errorf("invoice after the settlement: %+v, want open with 30.00 to pay", got)
	}
	r, err := pay(customer, second.URL, path, "30.00")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusSeeOther {
		t.Fatalf("pay after the settlement: %v", r)
	}
	if ledger := g.captured(); len(ledger) != 1 || countPayments() != 1 {
		t.Errorf("charges standing %v and %d payments, want the one payment", ledger, countPayments())
	}
}

// The process is killed (SIGKILL) in the middle of a refund: the processor
// made the refund and has not answered. What is left is the pending refund
// written before the processor was asked, and no refund recorded. Once it
// is due, the next process asks the processor, finds the refund and records
// it; the request retried with the same Idempotency-Key then replays it.
// The card is refunded once.
func TestKilledMidRefund(t *testing.T) {
	t.Parallel() // waits for the settlement more than it works
	g := startGateway(t, func(int) authPlan { return authPlan{} })
	g.refundsHeld = new(atomic.Bool)
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	d.Env["PAYREQ_PROCESSOR"] = "cardpointe"
	d.Env["PAYREQ_CARDPOINTE_URL"] = g.url()
	keys := d.seed(t)
	first := d.start(t, "first", nil)
	c := httpClient("127.0.0.1", 60*time.Second)
	tok := token(t, c, first.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, first.URL, tok)
	invoiceID, path := payable(t, c, first.URL, tok, mid, "KILLED-R1")
	if r, err := pay(httpClient("127.0.0.122", 60*time.Second), first.URL, path, "30.00"); err != nil || r.Status != http.StatusSeeOther {
		t.Fatalf("pay: %v, %v", r, err)
	}
	db := openDB(t, dsn)
	var sale string
	if err := db.Get(&sale, `SELECT id::text FROM card_payments WHERE invoice_id = $1 AND kind = 'sale'`, invoiceID); err != nil {
		t.Fatal(err)
	}

	g.refundsHeld.Store(true)
	key := "refund-" + invoiceID
	refundURL := first.URL + "/card-payments/" + sale + "/refund"
	answered := make(chan answer, 1)
	go func() {
		answered <- send(c, "POST", refundURL, tok, `{"amount":"10.00"}`, http.Header{"Idempotency-Key": {key}})
	}()
	eventually(t, 20*time.Second, "the processor has made the refund", func() bool {
		made, _ := g.refundsMade()
		return len(made) == 1
	})
	first.kill()
	if r := <-answered; r.Err == nil {
		t.Errorf("the merchant got an answer from the killed process: %v", r)
	}
	countRefunds := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM card_payments WHERE kind = 'refund'`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := countRefunds(); n != 0 {
		t.Errorf("%d refunds recorded after the kill, want none", n)
	}
	var pending int
	if err := db.Get(&pending, `SELECT count(*) FROM pending_refunds`); err != nil || pending != 1 {
		t.Fatalf("pending refunds %d (%v), want 1", pending, err)
	}

	g.refundsHeld.Store(false)
	second := d.start(t, "second", nil)
	// Stands in for time passing: the pending refund falls due 3 minutes
	// after it was written, once no request can record it any more.
	if _, err := db.Exec(`UPDATE pending_refunds SET settle_after = now()`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pending refund is settled", func() bool {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM pending_refunds`); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if n := countRefunds(); n != 1 {
		t.Fatalf("%d refunds recorded after the settlement, want 1", n)
	}
	again := send(c, "POST", second.URL+"/card-payments/"+sale+"/refund", tok, `{"amount":"10.00"}`, http.Header{"Idempotency-Key": {key}})
	if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry with the key: %v, want a 200 replay", again)
	}
	made, asked := g.refundsMade()
	if len(made) != 1 || asked != 1 {
		t.Errorf("refunds at the processor %v after %d requests, want one made once", made, asked)
	}
	var refunded string
	if err := db.Get(&refunded, `SELECT amount_refunded::text FROM invoices WHERE id = $1`, invoiceID); err != nil || refunded != "10.00" {
		t.Errorf("invoice amount_refunded %q (%v), want 10.00", refunded, err)
	}
}
