package delivery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/postgres"
)

func TestFilesWhenNoProvider(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	cfg := testConfig(t)
	cfg.DataDir = t.TempDir()
	inv := newInvoice(t, db)
	email := enqueue(t, db, inv, ChannelEmail, testCustomer)
	text := enqueue(t, db, inv, ChannelText, testPhone)

	w := newWorker(t, db, cfg)
	run(t, w)
	eventually(t, "both messages are delivered", func() bool {
		return delivered(t, db, email)() && delivered(t, db, text)()
	})

	dir := filepath.Join(cfg.DataDir, "outbox")
	raw, err := os.ReadFile(filepath.Join(dir, email.String()+".eml"))
	if err != nil {
		t.Fatal(err)
	}
	checkEmailContent(t, parseEmail(t, raw), inv, email)

	txt, err := os.ReadFile(filepath.Join(dir, text.String()+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"To: " + testPhone, inv.payLink(), inv.Number, testAmountShown} {
		if !strings.Contains(string(txt), want) {
			t.Errorf(".txt lacks %q:\n%s", want, txt)
		}
	}

	// A second delivery of the same message replaces the file, whole.
	c := claimed{ID: email, OrganizationID: inv.OrganizationID, InvoiceID: inv.ID,
		Channel: ChannelEmail, Recipient: testCustomer, Attempts: 2}
	r, err := w.render(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.senders[ChannelEmail].Send(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("outbox directory holds %v, want the two messages only", entries)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600: the pay link is a secret", e.Name(), info.Mode().Perm())
		}
	}
}

func TestCancelledMessageIsNeverDelivered(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	srv := startSMTPServer(t, smtpServerOptions{})
	cfg := testConfig(t)
	cfg.SMTPURL = "smtp://" + srv.Addr + "?tls=none&from=billing@example.com"
	ctx := context.Background()

	// Cancelled with CancelPending before any worker saw it; its receipt,
	// which tells of money that moved, goes all the same.
	cfg.Documents = testDocuments{db}
	cancelledInv := newInvoice(t, db)
	cancelled := enqueue(t, db, cancelledInv, ChannelEmail, testCustomer)
	receipt := uuid.New()
	if err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		if err := Enqueue(ctx, tx, Message{ID: receipt, Kind: KindReceipt, OrganizationID: cancelledInv.OrganizationID,
			InvoiceID: cancelledInv.ID, PaymentID: uuid.New(), Channel: ChannelEmail, Recipient: testCustomer, At: time.Now()}); err != nil {
			return err
		}
		return CancelPending(ctx, tx, cancelledInv.ID, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	// Claimed, and then the invoice was cancelled without the outbox being told:
	// the worker checks the invoice before sending.
	lateInv := newInvoice(t, db)
	late := enqueue(t, db, lateInv, ChannelEmail, testCustomer)
	if _, err := db.Exec(`UPDATE invoices SET status = 'cancelled' WHERE id = $1`, lateInv.ID); err != nil {
		t.Fatal(err)
	}
	// A message of another invoice shows that the worker has been at work.
	otherInv := newInvoice(t, db)
	other := enqueue(t, db, otherInv, ChannelEmail, testCustomer)

	run(t, newWorker(t, db, cfg))
	eventually(t, "the other email is delivered", delivered(t, db, other))
	eventually(t, "the receipt is delivered", delivered(t, db, receipt))
	eventually(t, "the late message is cancelled", func() bool { return readOutbox(t, db, late).CancelledAt.Valid })
	time.Sleep(5 * cfg.PollInterval)

	if got := srv.byMessageID(t); len(got) != 2 || got[MessageID(other)] != 1 || got[MessageID(receipt)] != 1 {
		t.Errorf("received %v, want only %s and the receipt %s", got, MessageID(other), MessageID(receipt))
	}
	for _, id := range []uuid.UUID{cancelled, late} {
		r := readOutbox(t, db, id)
		if !r.CancelledAt.Valid || r.DeliveredAt.Valid || r.FailedAt.Valid {
			t.Errorf("message %s = %+v, want cancelled only", id, r)
		}
	}
	if r := readOutbox(t, db, cancelled); r.Attempts != 0 {
		t.Errorf("the cancelled message was claimed %d times, want never", r.Attempts)
	}
}

func TestEnqueueIsPartOfTheTransaction(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	inv := newInvoice(t, db)
	ctx := context.Background()
	id := uuid.New()
	boom := errors.New("the invoice could not be saved")
	err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		if err := Enqueue(ctx, tx, Message{ID: id, OrganizationID: inv.OrganizationID, InvoiceID: inv.ID,
			Channel: ChannelEmail, Recipient: testCustomer, At: time.Now()}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM outbox`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d outbox rows after a rollback, want 0", n)
	}

	bad := []Message{
		{OrganizationID: inv.OrganizationID, InvoiceID: inv.ID, Channel: ChannelEmail, Recipient: testCustomer, At: time.Now()},
		{ID: id, OrganizationID: inv.OrganizationID, InvoiceID: inv.ID, Channel: "fax", Recipient: testCustomer, At: time.Now()},
		{ID: id, OrganizationID: inv.OrganizationID, InvoiceID: inv.ID, Channel: ChannelText, At: time.Now()},
	}
	for _, m := range bad {
		err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error { return Enqueue(ctx, tx, m) })
		if err == nil {
			t.Errorf("Enqueue(%+v) succeeded, want an error", m)
		}
	}
}

func TestNewWorkerChecksConfiguration(t *testing.T) {
	t.Parallel()
	ok := Config{Invoices: testInvoices{}, DataDir: t.TempDir()}
	tests := []struct {
		name string
		edit func(*Config)
		want string // part of the error; empty: no error
	}{
		{"defaults", func(*Config) {}, ""},
		{"both providers, no data dir", func(c *Config) {
			c.DataDir = ""
			c.SMTPURL = "smtps://u:p@mail.example.com?from=billing@example.com"
			c.SMSURL = "https://a:b@api.example.com/Messages.json?from=%2B15550000000"
		}, ""},
		{"no invoices", func(c *Config) { c.Invoices = nil }, "invoices"},
		{"no data dir for files", func(c *Config) { c.DataDir = "" }, "data directory"},
		{"smtp scheme", func(c *Config) { c.SMTPURL = "http://mail.example.com?from=a@example.com" }, "smtp://"},
		{"smtp from", func(c *Config) { c.SMTPURL = "smtp://mail.example.com" }, "from"},
		{"smtp user as from", func(c *Config) { c.SMTPURL = "smtp://billing%40example.com:pw@mail.example.com" }, ""},
		{"smtp port", func(c *Config) { c.SMTPURL = "smtp://mail.example.com:99999?from=a@example.com" }, "port"},
		{"smtp plain with a login", func(c *Config) { c.SMTPURL = "smtp://u:p@relay.local:25?tls=none&from=a@example.com" }, "tls=none"},
		{"smtps plain", func(c *Config) { c.SMTPURL = "smtps://relay.local?tls=none&from=a@example.com" }, "tls=none"},
		{"smtp tls other", func(c *Config) { c.SMTPURL = "smtp://relay.local?tls=maybe&from=a@example.com" }, "tls=maybe"},
		{"sms scheme", func(c *Config) { c.SMSURL = "ftp://api.example.com?from=%2B1555" }, "http"},
		{"sms from", func(c *Config) { c.SMSURL = "https://api.example.com/Messages.json" }, "from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			w, err := NewWorker(nil, cfg, nil, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("NewWorker: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("NewWorker error %v, want one about %q", err, tt.want)
			case tt.want == "" && (w.cfg.PollInterval != DefaultPollInterval || w.cfg.MaxAttempts != DefaultMaxAttempts):
				t.Fatalf("defaults not applied: %+v", w.cfg)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	w := &Worker{cfg: Config{BackoffBase: time.Second, BackoffMax: time.Minute}}
	tests := []struct {
		attempt int
		full    time.Duration
	}{
		{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 32 * time.Second},
		{7, time.Minute}, {40, time.Minute}, {1000, time.Minute},
	}
	for _, tt := range tests {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := w.backoff(tt.attempt)
			if d < tt.full/2 || d > tt.full {
				t.Fatalf("backoff(%d) = %v, want between %v and %v", tt.attempt, d, tt.full/2, tt.full)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("backoff(%d) has no jitter", tt.attempt)
		}
	}
}

// A reminder says it is one, with the balance and the due date, by email
// and by text; one queued for an invoice paid before its delivery is
// never sent.
func TestReminderMessages(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	cfg := testConfig(t)
	cfg.DataDir = t.TempDir()
	inv := newInvoice(t, db)
	if _, err := db.Exec(`UPDATE invoices SET amount_paid = 1000.00, status = 'part_paid' WHERE id = $1`, inv.ID); err != nil {
		t.Fatal(err)
	}
	remind := func(inv invoice, channel, recipient string) uuid.UUID {
		t.Helper()
		id := uuid.New()
		err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
			return Enqueue(context.Background(), tx, Message{ID: id, Kind: KindReminder, OrganizationID: inv.OrganizationID,
				InvoiceID: inv.ID, Channel: channel, Recipient: recipient, At: time.Now()})
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	email, text := remind(inv, ChannelEmail, testCustomer), remind(inv, ChannelText, testPhone)
	paid := newInvoice(t, db)
	late := remind(paid, ChannelEmail, testCustomer)
	if _, err := db.Exec(`UPDATE invoices SET amount_paid = amount, status = 'paid', paid_at = now() WHERE id = $1`, paid.ID); err != nil {
		t.Fatal(err)
	}

	w := newWorker(t, db, cfg)
	run(t, w)
	eventually(t, "the reminders are delivered", func() bool { return delivered(t, db, email)() && delivered(t, db, text)() })
	eventually(t, "the paid invoice's reminder is cancelled", func() bool { return readOutbox(t, db, late).CancelledAt.Valid })

	dir := filepath.Join(cfg.DataDir, "outbox")
	raw, err := os.ReadFile(filepath.Join(dir, email.String()+".eml"))
	if err != nil {
		t.Fatal(err)
	}
	msg := parseEmail(t, raw)
	if !strings.HasPrefix(msg.Subject, "Reminder: invoice "+inv.Number) {
		t.Errorf("subject %q", msg.Subject)
	}
	for _, want := range []string{"This is a reminder", "The balance of $234.50 was due on March 5, 2026",
		inv.payLink(), inv.Number} {
		if !strings.Contains(msg.Plain, want) {
			t.Errorf("the reminder email lacks %q:\n%s", want, msg.Plain)
		}
	}
	sms, err := os.ReadFile(filepath.Join(dir, text.String()+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Reminder from", "balance $234.50", inv.payLink()} {
		if !strings.Contains(string(sms), want) {
			t.Errorf("the reminder text lacks %q:\n%s", want, sms)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, late.String()+".eml")); err == nil {
		t.Error("a reminder of a paid invoice was sent")
	}
}
