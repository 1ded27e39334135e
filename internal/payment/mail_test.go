package payment

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
)

// receipts are the receipts queued for the invoice: payment id → recipient.
func (f *fixture) receipts(t *testing.T, inv uuid.UUID) map[uuid.UUID]string {
	t.Helper()
	var rows []struct {
		Payment   uuid.UUID `db:"payment_id"`
		Recipient string    `db:"recipient"`
	}
	if err := f.db.Select(&rows, `SELECT payment_id, recipient FROM outbox WHERE invoice_id = $1 AND kind = 'receipt'`, inv); err != nil {
		t.Fatal(err)
	}
	got := map[uuid.UUID]string{}
	for _, r := range rows {
		if _, twice := got[r.Payment]; twice {
			t.Errorf("payment %s has two receipts", r.Payment)
		}
		got[r.Payment] = r.Recipient
	}
	return got
}

// An approved sale and an approved refund each queue one receipt to the
// invoice's email, in the transaction that records them: a form sent
// again, a refund repeated with its key, or a second enqueue of the same
// payment add none; a decline queues none; with the organization's
// receipts off, nothing is queued.
func TestReceiptOncePerApprovedPayment(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	inv := f.invoice(t, "80.00", "0", invoice.Open)
	form := Request{AttemptID: uuid.New(), Version: inv.Version, Amount: dec("30.00"),
		Card: processor.Card{Number: processor.TestCardApprove, Expiry: "1299", CVV: "123", Name: "Dana Whitfield"}}
	first, err := f.svc.Pay(ctx, inv, form)
	if err != nil || !first.Approved {
		t.Fatalf("pay: %+v, %v", first, err)
	}
	again, err := f.svc.Pay(ctx, inv, form) // the same form posted again
	if err != nil || again.Payment.ID != first.Payment.ID {
		t.Fatalf("the form again: %+v, %v, want the first answer", again, err)
	}
	if got := f.receipts(t, inv.ID); len(got) != 1 || got[first.Payment.ID] != "dana@example.com" {
		t.Fatalf("receipts %v, want one to dana@example.com for %s", got, first.Payment.ID)
	}
	if out, err := f.pay(inv, processor.TestCardDecline, "50.00"); err != nil || out.Approved {
		t.Fatalf("declined pay: %+v, %v", out, err)
	}
	if got := f.receipts(t, inv.ID); len(got) != 1 {
		t.Errorf("after a decline: receipts %v, want still one", got)
	}
	sale, err := f.svc.CardPayment(ctx, f.org, first.Payment.ID)
	if err != nil {
		t.Fatal(err)
	}
	key := "refund-" + uuid.NewString()
	amount := "10.00"
	refund, _, err := f.refundOf(sale, &amount, &key)
	if err != nil || refund.Status != Approved {
		t.Fatalf("refund: %+v, %v", refund, err)
	}
	if _, replayed, err := f.refundOf(sale, &amount, &key); err != nil || !replayed {
		t.Fatalf("refund again: replayed %v, %v", replayed, err)
	}
	got := f.receipts(t, inv.ID)
	if len(got) != 2 || got[refund.ID] != "dana@example.com" {
		t.Fatalf("receipts %v, want the sale's and the refund's", got)
	}
	// The unique key, whoever asks again.
	err = postgres.InTx(ctx, f.db, func(tx *sqlx.Tx) error {
		return delivery.Enqueue(ctx, tx, delivery.Message{ID: uuid.New(), Kind: delivery.KindReceipt, OrganizationID: f.org,
			InvoiceID: inv.ID, PaymentID: refund.ID, Channel: delivery.ChannelEmail, Recipient: "dana@example.com", At: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.receipts(t, inv.ID); len(got) != 2 {
		t.Errorf("after a second enqueue: receipts %v, want 2", got)
	}

	dir := &directory.Store{DB: f.db}
	if err := dir.SetReceipts(ctx, nil, f.org, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	quiet := f.invoice(t, "20.00", "0", invoice.Open)
	if out, err := f.pay(quiet, processor.TestCardApprove, "20.00"); err != nil || !out.Approved {
		t.Fatalf("pay: %+v, %v", out, err)
	}
	if got := f.receipts(t, quiet.ID); len(got) != 0 {
		t.Errorf("receipts off: receipts %v, want none", got)
	}
	if err := dir.SetReceipts(ctx, nil, f.org, true, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// plainSealer keeps notices as they are: a test reads them back.
type plainSealer struct{}

func (plainSealer) Seal(plaintext, _ string) ([]byte, string, error) {
	return []byte(plaintext), "plain", nil
}

func (plainSealer) Open(sealed []byte, _, _ string) (string, error) { return string(sealed), nil }

// member adds an accepted membership of the fixture's organization.
func (f *fixture) member(t *testing.T, email, role string, permissions ...string) uuid.UUID {
	t.Helper()
	person, id := uuid.New(), uuid.New()
	if _, err := f.db.Exec(`INSERT INTO people (id, email, name, created_at) VALUES ($1, $2, $2, now())`, person, email); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(`INSERT INTO memberships (id, organization_id, person_id, role, permissions, accepted_at)
		VALUES ($1, $2, $3, $4, $5, now())`, id, f.org, person, role, "{"+strings.Join(permissions, ",")+"}"); err != nil {
		t.Fatal(err)
	}
	return id
}

// notices are the notices queued to the organization's members since
// since: recipient → their texts.
func (f *fixture) notices(t *testing.T, since time.Time) map[string][]string {
	t.Helper()
	var rows []struct {
		To     string `db:"recipient"`
		Notice []byte `db:"notice"`
	}
	if err := f.db.Select(&rows, `SELECT recipient, notice FROM outbox
		WHERE organization_id = $1 AND notice IS NOT NULL AND created_at >= $2 ORDER BY created_at, id`, f.org, since); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, r := range rows {
		got[r.To] = append(got[r.To], string(r.Notice))
	}
	return got
}

// Members hear of what they chose, and only what their permissions let
// them read: an invoice paid (on for Owners and Admins by default), a
// declined card payment, a deposit paid (off by default); one email each
// per event, never a card number.
func TestMembersAreToldWhatTheyChose(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	members := &people.Store{DB: f.db, Now: time.Now, Vault: plainSealer{}, PublicURL: "https://payreq.test"}
	f.svc.Members, f.svc.Invoices.Members = members, members
	suffix := "@" + f.org.String()[:8] + ".example"
	owner := f.member(t, "owner"+suffix, people.Owner, auth.PaymentsView, auth.PaymentsCreate)
	f.member(t, "admin-blind"+suffix, people.Admin, auth.PaymentsCreate) // cannot read payments
	clerk := f.member(t, "clerk"+suffix, people.Member, auth.PaymentsView)
	f.member(t, "bystander"+suffix, people.Member, auth.PaymentsView) // chose nothing
	set := func(m uuid.UUID, on ...string) {
		t.Helper()
		ms, err := members.Membership(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := members.SetNotificationChoices(ctx, people.Actor{Membership: &ms}, on); err != nil {
			t.Fatal(err)
		}
	}
	set(clerk, people.NotifyCardDeclined, people.NotifyDepositPaid)

	start := time.Now()
	inv := f.invoice(t, "80.00", "0", invoice.Open)
	if out, err := f.pay(inv, processor.TestCardApprove, "30.00"); err != nil || !out.Approved {
		t.Fatalf("pay: %+v, %v", out, err)
	}
	if got := f.notices(t, start); len(got) != 0 {
		t.Errorf("after a part payment: %v, want nothing", got)
	}
	if out, err := f.pay(inv, processor.TestCardDecline, "50.00"); err != nil || out.Approved {
		t.Fatalf("declined: %+v, %v", out, err)
	}
	if out, err := f.pay(inv, processor.TestCardApprove, "50.00"); err != nil || !out.Approved {
		t.Fatalf("pay the rest: %+v, %v", out, err)
	}
	got := f.notices(t, start)
	if keys := slicesSorted(got); !slices.Equal(keys, []string{"clerk" + suffix, "owner" + suffix}) {
		t.Fatalf("told %v, want the clerk (the decline) and the Owner (paid)", keys)
	}
	if n := got["owner"+suffix]; len(n) != 1 || !strings.Contains(n[0], "paid invoice "+inv.InvoiceNumber+" of $80.00 in full") {
		t.Errorf("the Owner was told %q", n)
	}
	if n := got["clerk"+suffix]; len(n) != 1 || !strings.Contains(n[0], "$50.00 on invoice "+inv.InvoiceNumber) ||
		!strings.Contains(n[0], "was declined") {
		t.Errorf("the clerk was told %q", n)
	}
	for to, texts := range got {
		for _, text := range texts {
			if strings.Contains(text, processor.TestCardDecline) || strings.Contains(text, processor.TestCardApprove) {
				t.Errorf("%s was told a card number: %s", to, text)
			}
		}
	}

	// The Owner turns invoice paid off: the next one tells nobody.
	set(owner)
	start = time.Now()
	other := f.invoice(t, "5.00", "0", invoice.Open)
	if out, err := f.pay(other, processor.TestCardApprove, "5.00"); err != nil || !out.Approved {
		t.Fatalf("pay: %+v, %v", out, err)
	}
	if got := f.notices(t, start); len(got) != 0 {
		t.Errorf("with invoice paid off: %v, want nothing", got)
	}
	choices, err := members.NotificationChoices(ctx, owner)
	if err != nil || slices.ContainsFunc(people.Notifications, func(c string) bool { return choices[c] }) {
		t.Errorf("the Owner's choices: %v, %v; want all off", choices, err)
	}

	// A deposit paid: the clerk, who chose it.
	made := f.settle(t)
	start = time.Now()
	f.svc.Now = func() time.Time { return made[0].ExpectedAt.Add(48 * time.Hour) }
	defer func() { f.svc.Now = time.Now }()
	if _, err := f.svc.MarkDepositsPaid(ctx); err != nil {
		t.Fatal(err)
	}
	got = f.notices(t, start)
	if n := got["clerk"+suffix]; len(got) != 1 || len(n) != len(made) || !strings.Contains(n[0], "was paid into your bank account") {
		t.Errorf("after the deposits were paid: %v, want the clerk told of each of %d", got, len(made))
	}
}

func slicesSorted(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
