package faults

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/smtpfake"
)

// Receipts go out once per approved payment across instances and a
// restart: instance a records the payments and is killed with SIGKILL in
// the middle of delivering their receipts (its mail server takes each
// whole and never answers); instance b, started after, delivers a's
// receipts once their lease ends and the rest at once. Every approved
// sale has exactly one receipt queued, each arrives once at b's mail
// server with its PDF attached, and those a held were tried twice.
func TestReceiptsOncePerPaymentOneInstanceKilled(t *testing.T) {
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	const lease = 8 * time.Second // each try gets 4 s: the kill comes well within it
	d.Env["PAYREQ_DELIVERY_LEASE"] = lease.String()
	d.Env["PAYREQ_DELIVERY_BACKOFF"] = "100ms"
	mailA := smtpfake.Start(t, smtpfake.StallData)
	mailB := smtpfake.Start(t, smtpfake.Accept)
	keys := d.seed(t)
	a := d.start(t, "a", map[string]string{"PAYREQ_SMTP_URL": mailA.URL("a@example.com")})
	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, a.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, a.URL, tok)

	const payments = 6
	for i := range payments {
		_, path := payable(t, c, a.URL, tok, mid, fmt.Sprintf("RCPT-%d", i))
		customer := httpClient(fmt.Sprintf("127.0.0.%d", 120+i), 30*time.Second)
		r, err := pay(customer, a.URL, path, "30.00")
		if err != nil || r.Status != http.StatusSeeOther {
			t.Fatalf("pay RCPT-%d: %v, %v", i, r, err)
		}
	}
	// a's worker holds as many messages as it delivers at once, each in
	// the middle of its delivery.
	eventually(t, 20*time.Second, "a is delivering", func() bool { return mailA.Stalled() > 0 })
	deadline := time.Now().Add(1500 * time.Millisecond)
	for mailA.Stalled() < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	inDelivery := mailA.Held()
	a.kill()
	t.Logf("a killed while delivering %d messages", len(inDelivery))
	if len(inDelivery) == 0 {
		t.Fatal("no message was in the middle of its delivery at the kill")
	}

	d.start(t, "b", map[string]string{"PAYREQ_SMTP_URL": mailB.URL("b@example.com"), "PAYREQ_ADDR": freeAddr(t)})
	db := openDB(t, dsn)
	eventually(t, lease+30*time.Second, "b delivers every message", func() bool {
		var left int
		if err := db.Get(&left, `SELECT count(*) FROM outbox WHERE delivered_at IS NULL`); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})

	var receipts []struct {
		Payment   uuid.UUID `db:"payment_id"`
		MessageID string    `db:"message_id"`
		Attempts  int       `db:"attempts"`
		Number    string    `db:"invoice_number"`
	}
	if err := db.Select(&receipts, `SELECT o.payment_id, '<' || o.id || '@payreq>' AS message_id, o.attempts, i.invoice_number
		FROM outbox o JOIN invoices i ON i.id = o.invoice_id WHERE o.kind = 'receipt'`); err != nil {
		t.Fatal(err)
	}
	var sales []uuid.UUID
	if err := db.Select(&sales, `SELECT id FROM card_payments WHERE kind = 'sale' AND status = 'approved'`); err != nil {
		t.Fatal(err)
	}
	if len(sales) != payments || len(receipts) != payments {
		t.Fatalf("%d approved sales and %d receipts, want %d of each", len(sales), len(receipts), payments)
	}
	perPayment := map[uuid.UUID]int{}
	for _, r := range receipts {
		perPayment[r.Payment]++
	}
	for _, s := range sales {
		if perPayment[s] != 1 {
			t.Errorf("sale %s has %d receipts, want 1", s, perPayment[s])
		}
	}
	held := map[string]bool{}
	for _, id := range inDelivery {
		held[id] = true
	}
	arrived := mailB.ByMessageID()
	mails := map[string]smtpfake.Mail{}
	for _, m := range mailB.Received() {
		mails[m.MessageID] = m
	}
	heldReceipts := 0
	for _, r := range receipts {
		if arrived[r.MessageID] != 1 {
			t.Errorf("the receipt of %s arrived %d times at b's mail server, want once", r.Number, arrived[r.MessageID])
			continue
		}
		m := mails[r.MessageID]
		if !strings.Contains(m.Subject, "Receipt for invoice "+r.Number) || len(m.Attachments["receipt-"+r.Number+".pdf"]) == 0 {
			t.Errorf("the receipt of %s: subject %q, attachments %d", r.Number, m.Subject, len(m.Attachments))
		}
		if held[r.MessageID] {
			heldReceipts++
			if r.Attempts < 2 {
				t.Errorf("the receipt of %s was held by a, yet tried %d times", r.Number, r.Attempts)
			}
		}
	}
	t.Logf("%d of the receipts were in the middle of a's delivery at the kill", heldReceipts)
	if heldReceipts == 0 {
		t.Error("no receipt was in the middle of a's delivery at the kill")
	}
}
