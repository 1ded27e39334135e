package recurring

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

// notices records what would be emailed to members.
type notices struct {
	mu   sync.Mutex
	sent []people.Notification
}

func (n *notices) Notify(_ context.Context, _ *sqlx.Tx, _ uuid.UUID, m people.Notification, _ time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, m)
	return nil
}

// payments is an instance's payment store on the shop's clock, charging
// through sim.
func (s *shop) payments(sim *processor.Simulator) *payment.Store {
	return &payment.Store{DB: s.db, Processor: sim, Now: s.clock, Invoices: s.invoices, CardRemoved: s.store.EndAutoPay}
}

// savedCard is a card the customer saved on the pay page, paying an
// invoice of their own, with consent to future charges or not.
func (s *shop) savedCard(t *testing.T, pay *payment.Store, number string, consent bool) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var inv invoice.Invoice
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) (err error) {
		send := false
		inv, err = s.invoices.CreateIn(ctx, tx, invoice.Actor{OrganizationID: s.org, Name: "test"}, invoice.Draft{
			MerchantAccountID: s.mid, InvoiceNumber: "SAVE-" + uuid.NewString()[:8], Amount: dec("1.00"), CustomerID: &s.customer, Send: &send,
		}, s.clock())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := payment.Request{AttemptID: uuid.New(), Card: processor.Card{Number: number, Expiry: "1239", CVV: "123", Name: "Pat Doe"},
		Amount: dec("1.00"), SaveCard: true, Version: inv.Version}
	if consent {
		r.ChargeConsent = payment.ChargeConsentWords("Dana's Bakery")
	}
	out, err := pay.Pay(ctx, inv, r)
	if err != nil || !out.Approved {
		t.Fatalf("saving card %s: %+v %v", number, out, err)
	}
	var id uuid.UUID
	if err := s.db.Get(&id, `SELECT id FROM saved_cards WHERE organization_id = $1 ORDER BY saved_at DESC, id DESC LIMIT 1`, s.org); err != nil {
		t.Fatal(err)
	}
	return id
}

// autoPaid is a series started today with automatic payment by card.
func (s *shop) autoPaid(t *testing.T, card uuid.UUID) Series {
	t.Helper()
	tm := s.terms()
	tm.AutoPay = &card
	sr, _, err := s.store.Create(context.Background(), s.org, tm, Schedule{StartOn: Today(s.clock(), newYork), Interval: Month, Count: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sr
}

func (s *shop) chargeDue(t *testing.T, pay *payment.Store) int {
	t.Helper()
	asked, errs := pay.ChargeDue(context.Background())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return asked
}

// sales counts the card sales of the invoice by status.
func (s *shop) sales(t *testing.T, invoiceID uuid.UUID) map[string]int {
	t.Helper()
	var statuses []string
	if err := s.db.Select(&statuses, `SELECT status FROM card_payments WHERE invoice_id = $1 AND kind = 'sale'`, invoiceID); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, st := range statuses {
		out[st]++
	}
	return out
}

func (s *shop) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAutoPayRefusals: no consent, another customer's card, an unknown
// card → 422 keyed autoPay.savedCardId, and nothing written.
func TestAutoPayRefusals(t *testing.T) {
	s := newShop(t, at("2027-03-01", 10*time.Hour))
	sim := processor.NewSimulator()
	pay := s.payments(sim)
	noConsent := s.savedCard(t, pay, processor.TestCardApprove, false)
	ok := s.savedCard(t, pay, processor.TestCardApprove, true)
	// ok, moved to another customer of the organization.
	others := uuid.New()
	err := postgres.InTx(context.Background(), s.db, func(tx *sqlx.Tx) error {
		c, err := customer.Ensure(context.Background(), tx, s.org, "other@example.com", nil, nil, nil, s.clock())
		if err != nil {
			return err
		}
		_, err = tx.Exec(`UPDATE saved_cards SET id = $2, customer_id = $3 WHERE id = $1`, ok, others, c.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		card  uuid.UUID
		title string
	}{{noConsent, "No consent to future charges"}, {others, "Saved card of another customer"}, {uuid.New(), "Unknown saved card"}} {
		tm := s.terms()
		tm.AutoPay = &c.card
		_, _, err := s.store.Create(context.Background(), s.org, tm, Schedule{StartOn: dayOf("2027-03-02"), Interval: Month, Count: 1}, nil)
		re := rule.As(err)
		if re == nil || re.Kind != rule.Unprocessable || re.Field != "autoPay.savedCardId" || re.Title != c.title {
			t.Fatalf("card %s: %v, want 422 %q keyed autoPay.savedCardId", c.card, err, c.title)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM recurring_invoices`); n != 0 {
		t.Fatalf("%d series written by refused creations", n)
	}
	sr := s.create(t, Schedule{StartOn: dayOf("2027-03-02"), Interval: Month, Count: 1})
	_, err = s.store.Update(context.Background(), s.org, sr.ID, Change{SetAutoPay: true, AutoPay: &noConsent})
	if re := rule.As(err); re == nil || re.Field != "autoPay.savedCardId" {
		t.Fatalf("PATCH without consent: %v", err)
	}
	if got := s.get(t, sr.ID); got.AutoPay != nil || !got.UpdatedAt.Equal(sr.UpdatedAt) {
		t.Fatalf("refused PATCH changed the series: %+v", got)
	}
}

// TestAutoPayApproved: the issued invoice is charged its amount at once,
// as a merchant-initiated scheduled stored-credential payment, by the
// occurrence's order id; paid, with its events and receipt; nothing more
// to charge.
func TestAutoPayApproved(t *testing.T) {
	s := newShop(t, at("2027-03-01", 10*time.Hour))
	sim := processor.NewSimulator()
	pay := s.payments(sim)
	card := s.savedCard(t, pay, processor.TestCardApprove, true)
	var consent string
	if err := s.db.Get(&consent, `SELECT charge_consent FROM saved_cards WHERE id = $1 AND charge_consent_at IS NOT NULL`, card); err != nil {
		t.Fatal(err)
	}
	if consent != "Let Dana's Bakery charge this card for future invoices" {
		t.Fatalf("consent kept as %q", consent)
	}
	sr := s.autoPaid(t, card)
	if got := sr.Model(); got.AutoPay == nil || got.AutoPay.SavedCardId != card {
		t.Fatalf("autoPay %+v", got.AutoPay)
	}
	if done := s.issue(t, s.store); done.Issued != 1 {
		t.Fatalf("issued %+v", done)
	}
	if asked := s.chargeDue(t, pay); asked != 1 {
		t.Fatalf("asked %d, want 1", asked)
	}
	sr = s.get(t, sr.ID)
	inv, err := s.invoices.Get(context.Background(), s.org, *sr.LastInvoiceID)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Status != invoice.Paid {
		t.Fatalf("invoice %s, want paid", inv.Status)
	}
	order := occurrenceID(sr.ID, 0)
	stored := sim.StoredCharges()
	if len(stored) != 1 {
		t.Fatalf("stored charges %+v", stored)
	}
	got := stored[0]
	if got.OrderID != order.String() || got.COF != "M" || got.COFScheduled != "Y" || got.EcomInd != "R" || got.Amount != "500.00" || got.Profile == "" {
		t.Fatalf("stored charge %+v, want order %s, cof M, cofscheduled Y, ecomind R, 500.00", got, order)
	}
	if n := s.count(t, `SELECT count(*) FROM card_payments WHERE id = $1 AND status = 'approved' AND amount = 500`, order); n != 1 {
		t.Fatalf("approved payments by the occurrence's order: %d", n)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox WHERE invoice_id = $1 AND kind = 'receipt'`, inv.ID); n != 1 {
		t.Fatalf("%d receipts queued", n)
	}
	types := s.eventTypes(t)
	if types[event.CardPaymentApproved.Name] != 2 || types[event.InvoicePaid.Name] != 2 {
		t.Fatalf("events %v: want the saving sale's and the automatic one's", types)
	}
	if asked := s.chargeDue(t, pay); asked != 0 || s.count(t, `SELECT count(*) FROM auto_charges`) != 0 {
		t.Fatalf("charged again: %d", asked)
	}
}

// TestAutoPayDeclinedRetried: a decline leaves the invoice open and sends
// its pay link; tried again 1 and 3 days after, then no more.
func TestAutoPayDeclinedRetried(t *testing.T) {
	start := at("2027-03-01", 10*time.Hour)
	s := newShop(t, start)
	sim := processor.NewSimulator()
	pay := s.payments(sim)
	sr := s.autoPaid(t, s.savedCard(t, pay, processor.TestCardStoredDeclines, true))
	s.issue(t, s.store)
	invoiceID := *s.get(t, sr.ID).LastInvoiceID
	links := func() int {
		return s.count(t, `SELECT count(*) FROM outbox WHERE invoice_id = $1 AND kind = 'pay_link'`, invoiceID)
	}
	if asked := s.chargeDue(t, pay); asked != 1 {
		t.Fatalf("first try: asked %d", asked)
	}
	if sales := s.sales(t, invoiceID); sales[payment.Declined] != 1 || links() != 2 {
		t.Fatalf("after the decline: sales %v, %d pay links, want 1 declined and the link sent again", sales, links())
	}
	for _, step := range []struct {
		at    time.Duration
		asked int
	}{{time.Hour, 0}, {24*time.Hour - time.Second, 0}, {24 * time.Hour, 1}, {48 * time.Hour, 0}, {72*time.Hour - time.Second, 0},
		{72 * time.Hour, 1}, {96 * time.Hour, 0}, {30 * 24 * time.Hour, 0}} {
		s.set(start.Add(step.at))
		if asked := s.chargeDue(t, pay); asked != step.asked {
			t.Fatalf("at +%v: asked %d, want %d", step.at, asked, step.asked)
		}
	}
	inv, err := s.invoices.Get(context.Background(), s.org, invoiceID)
	if err != nil {
		t.Fatal(err)
	}
	if sales := s.sales(t, invoiceID); inv.Status != invoice.Open || sales[payment.Declined] != 3 || sales[payment.Approved] != 0 ||
		len(sim.StoredCharges()) != 3 || links() != 4 {
		t.Fatalf("at the end: %s, sales %v, %d stored charges, %d pay links; want open, 3 declines, 4 links",
			inv.Status, sales, len(sim.StoredCharges()), links())
	}
	if n := s.count(t, `SELECT count(*) FROM auto_charges`); n != 0 {
		t.Fatalf("%d automatic charges left", n)
	}
}

// TestAutoPayTwoInstances: two instances charging the same occurrence at
// once charge it once.
func TestAutoPayTwoInstances(t *testing.T) {
	s := newShop(t, at("2027-03-01", 10*time.Hour))
	sim := processor.NewSimulator()
	first, second := s.payments(sim), s.payments(sim)
	sr := s.autoPaid(t, s.savedCard(t, first, processor.TestCardApprove, true))
	s.issue(t, s.store)
	var wg sync.WaitGroup
	asked := make([]int, 2)
	for i, p := range []*payment.Store{first, second} {
		wg.Go(func() {
			n, errs := p.ChargeDue(context.Background())
			if len(errs) > 0 {
				t.Error(errs)
			}
			asked[i] = n
		})
	}
	wg.Wait()
	invoiceID := *s.get(t, sr.ID).LastInvoiceID
	if asked[0]+asked[1] != 1 || len(sim.StoredCharges()) != 1 || s.sales(t, invoiceID)[payment.Approved] != 1 {
		t.Fatalf("asked %v, %d stored charges, sales %v: want one", asked, len(sim.StoredCharges()), s.sales(t, invoiceID))
	}
}

// TestAutoPayCardRemoved: removing the saved card ends the series'
// automatic payment (autoPay null, recurring_invoice.updated, the Owners
// emailed), and an invoice issued before is not charged.
func TestAutoPayCardRemoved(t *testing.T) {
	s := newShop(t, at("2027-03-01", 10*time.Hour))
	sim := processor.NewSimulator()
	told := &notices{}
	s.store.Members = told
	pay := s.payments(sim)
	card := s.savedCard(t, pay, processor.TestCardApprove, true)
	sr := s.autoPaid(t, card)
	s.issue(t, s.store)
	before := s.eventTypes(t)[event.RecurringInvoiceUpdated.Name]
	if err := pay.DeleteSavedCard(context.Background(), s.org, card, nil); err != nil {
		t.Fatal(err)
	}
	if got := s.get(t, sr.ID); got.AutoPay != nil {
		t.Fatalf("autoPay %v after its card was removed", got.AutoPay)
	}
	if n := s.eventTypes(t)[event.RecurringInvoiceUpdated.Name]; n != before+1 {
		t.Fatalf("%d recurring_invoice.updated, want %d", n, before+1)
	}
	if len(told.sent) != 1 || told.sent[0].Choice != people.ToOwners {
		t.Fatalf("told %+v, want one email to the Owners", told.sent)
	}
	if asked := s.chargeDue(t, pay); asked != 0 || len(sim.StoredCharges()) != 0 {
		t.Fatalf("charged a removed card: asked %d", asked)
	}
	if n := s.count(t, `SELECT count(*) FROM auto_charges`); n != 0 {
		t.Fatalf("%d automatic charges left", n)
	}
	// The series goes on without automatic payment.
	s.set(at("2027-04-01", time.Minute))
	if done := s.issue(t, s.store); done.Issued != 1 || s.count(t, `SELECT count(*) FROM auto_charges`) != 0 {
		t.Fatalf("next occurrence: %+v", done)
	}
	if err := pay.DeleteSavedCard(context.Background(), s.org, card, nil); !errors.Is(err, payment.ErrCardNotFound) {
		t.Fatalf("removed twice: %v", err)
	}
}
