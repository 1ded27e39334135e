package payment

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

// refundOf refunds amount (nil: all that is left) of sale.
func (f *fixture) refundOf(sale CardPayment, amount *string, key *string) (CardPayment, bool, error) {
	r := RefundRequest{Actor: invoice.Actor{OrganizationID: f.org, Name: "test key"}, SaleID: sale.ID, Key: key}
	if amount != nil {
		d := dec(*amount)
		r.Amount = &d
	}
	return f.svc.Refund(context.Background(), r)
}

// What may be refunded of a sale is its amount less its approved refunds
// and the refunds under way, lost ones too (the processor may have made
// them); the refund made adds to the sale's and the invoice's
// amountRefunded. A refused refund never reaches the processor.
func TestRefundHoldsWhatRefundsUnderWayTake(t *testing.T) {
	f := newFixture(t, 0)
	for _, c := range []struct {
		name           string
		refunded       []string // approved before
		underWay       []string // pending refunds of other requests
		lost           bool     // the pending ones' answers were lost
		amount         *string
		wantRefund     string // "" when refused
		wantRefundable string // suggested by the refusal
		wantRefunded   string // the sale's amountRefunded after
	}{
		{name: "all of it", wantRefund: "100.00", wantRefunded: "100.00"},
		{name: "part", amount: ptr("25.50"), wantRefund: "25.50", wantRefunded: "25.50"},
		{name: "the rest after refunds", refunded: []string{"20.00", "30.00"}, wantRefund: "50.00", wantRefunded: "100.00"},
		{name: "the rest beside one under way", underWay: []string{"30.00"}, amount: ptr("70.00"), wantRefund: "70.00", wantRefunded: "70.00"},
		{name: "all that is left beside one under way", refunded: []string{"20.00"}, underWay: []string{"30.00"},
			wantRefund: "50.00", wantRefunded: "70.00"},
		{name: "more than is left", refunded: []string{"20.00"}, underWay: []string{"30.00"}, amount: ptr("50.01"),
			wantRefundable: "50.00", wantRefunded: "20.00"},
		{name: "a lost refund holds its amount", underWay: []string{"100.00"}, lost: true, amount: ptr("0.01"),
			wantRefundable: "0.00", wantRefunded: "0.00"},
		{name: "nothing left", refunded: []string{"100.00"}, wantRefundable: "0.00", wantRefunded: "100.00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sale := f.sale(t, "100.00")
			for _, a := range c.refunded {
				if _, _, err := f.refundOf(sale, &a, nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, a := range c.underWay {
				var lastError *string
				if c.lost {
					lastError = ptr("the answer was lost")
				}
				_, err := f.db.Exec(`INSERT INTO pending_refunds (refund_id, organization_id, sale_id, amount, whole, created_by_name,
						created_at, settle_after, last_error) VALUES ($1, $2, $3, $4, false, 'other key', now(), $5, $6)`,
					uuid.New(), f.org, sale.ID, a, time.Now().Add(time.Hour), lastError)
				if err != nil {
					t.Fatal(err)
				}
			}
			asked := f.gate.times("refund")
			refund, _, err := f.refundOf(sale, c.amount, nil)
			exceeds := rule.As(err)
			switch {
			case c.wantRefund != "":
				if err != nil || refund.Kind != Refund || refund.Status != Approved || refund.Amount.Text('f') != c.wantRefund {
					t.Fatalf("refund: %+v, %v; want an approved refund of %s", refund, err, c.wantRefund)
				}
			case exceeds == nil || exceeds.Kind != rule.Unprocessable || exceeds.Field != "amount":
				t.Fatalf("refund: %+v, %v; want a refusal of the amount", refund, err)
			default:
				if got := exceeds.Suggest; got != c.wantRefundable {
					t.Errorf("refundable %s, want %s", got, c.wantRefundable)
				}
				if f.gate.times("refund") != asked {
					t.Errorf("a refused refund reached the processor")
				}
			}
			got, err := f.svc.CardPayment(context.Background(), f.org, sale.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.AmountRefunded.Text('f') != c.wantRefunded {
				t.Errorf("sale amountRefunded %s, want %s", got.AmountRefunded.Text('f'), c.wantRefunded)
			}
			if inv := f.read(t, sale.InvoiceID); inv.AmountRefunded.Text('f') != c.wantRefunded || inv.AmountPaid.Text('f') != "100.00" {
				t.Errorf("invoice amountRefunded %s, amountPaid %s; want %s and 100.00", inv.AmountRefunded.Text('f'),
					inv.AmountPaid.Text('f'), c.wantRefunded)
			}
			if n := f.count(t, `SELECT count(*) FROM pending_refunds WHERE sale_id = $1`, sale.ID); n != len(c.underWay) {
				t.Errorf("%d pending refunds, want the %d of the others", n, len(c.underWay))
			}
		})
	}
}

// While a refund of all of a sale is at the processor, a second is refused
// at once; a request with the first's Idempotency-Key waits for it and
// replays it. The card is refunded once.
func TestRefundWhileAnotherIsAtTheProcessor(t *testing.T) {
	f := newFixture(t, 0)
	sale := f.sale(t, "60.00")
	key := ptr(uuid.NewString())
	type result struct {
		refund   CardPayment
		replayed bool
		err      error
	}
	first := make(chan result, 1)
	f.gate.held.Store(true)
	go func() {
		r, replayed, err := f.refundOf(sale, nil, key)
		first <- result{r, replayed, err}
	}()
	f.gate.waitReached(t)

	if _, _, err := f.refundOf(sale, ptr("0.01"), nil); rule.As(err) == nil || rule.As(err).Suggest != "0.00" {
		t.Errorf("a second refund while all of the sale is under way: %v, want a refusal with nothing left", err)
	}
	if _, _, err := f.refundOf(sale, ptr("1.00"), key); !errors.Is(err, idempotency.ErrReused) {
		t.Errorf("the key with another request: %v, want idempotency.ErrReused", err)
	}
	again := make(chan result, 1)
	go func() {
		r, replayed, err := f.refundOf(sale, nil, key)
		again <- result{r, replayed, err}
	}()
	f.gate.release <- struct{}{}
	r1, r2 := <-first, <-again
	if r1.err != nil || r1.replayed || r1.refund.Amount.Text('f') != "60.00" {
		t.Fatalf("first: %+v, %v", r1.refund, r1.err)
	}
	if r2.err != nil || !r2.replayed || r2.refund.ID != r1.refund.ID {
		t.Errorf("the request with the key again: %+v replayed %v, %v; want the first's refund replayed", r2.refund, r2.replayed, r2.err)
	}
	if n := f.gate.times("refund"); n != 1 {
		t.Errorf("%d refunds asked of the processor, want 1", n)
	}
	got, err := f.svc.CardPayment(context.Background(), f.org, sale.ID)
	if err != nil || got.AmountRefunded.Cmp(apd.New(6000, -2)) != 0 {
		t.Errorf("sale amountRefunded %s (%v), want 60.00", got.AmountRefunded.Text('f'), err)
	}
}

// A refund that no refund may be is refused before the processor is
// asked, and nothing is written: what the request names is checked first,
// then what it acts on.
func TestRefundRefusals(t *testing.T) {
	f := newFixture(t, 0)
	sale := f.sale(t, "50.00")
	refund, _, err := f.refundOf(sale, ptr("5.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	declined, err := f.pay(f.invoice(t, "9.00", "0", invoice.Open), processor.TestCardDecline, "9.00")
	if err != nil || declined.Approved {
		t.Fatalf("declined pay: %+v, %v", declined, err)
	}
	var declinedSale uuid.UUID
	if err := f.db.Get(&declinedSale, `SELECT id FROM card_payments WHERE organization_id = $1 AND status = 'declined'`, f.org); err != nil {
		t.Fatal(err)
	}
	other := newFixture(t, 0)
	for _, c := range []struct {
		name   string
		org    uuid.UUID
		saleID uuid.UUID
		amount *string
		reason *string
		kind   rule.Kind
		field  string // the field named, of an Invalid refusal
	}{
		{name: "nothing", saleID: sale.ID, amount: ptr("0"), kind: rule.Invalid, field: "amount"},
		{name: "less than nothing", saleID: sale.ID, amount: ptr("-1.00"), kind: rule.Invalid, field: "amount"},
		{name: "a part of a cent", saleID: sale.ID, amount: ptr("1.005"), kind: rule.Invalid, field: "amount"},
		{name: "a reason too long", saleID: sale.ID, reason: ptr(strings.Repeat("é", MaxReason+1)), kind: rule.Invalid, field: "reason"},
		{name: "a declined sale", saleID: declinedSale, kind: rule.Unprocessable},
		{name: "a refund", saleID: refund.ID, kind: rule.Unprocessable},
		{name: "an unknown card payment", saleID: uuid.New(), kind: rule.NotFound},
		{name: "another organization's sale", org: other.org, saleID: sale.ID, kind: rule.NotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			org := f.org
			if c.org != uuid.Nil {
				org = c.org
			}
			r := RefundRequest{Actor: invoice.Actor{OrganizationID: org, Name: "test key"}, SaleID: c.saleID, Reason: c.reason}
			if c.amount != nil {
				d := dec(*c.amount)
				r.Amount = &d
			}
			asked := f.gate.times("refund") + other.gate.times("refund")
			payments, pending := f.count(t, `SELECT count(*) FROM card_payments`), f.count(t, `SELECT count(*) FROM pending_refunds`)
			_, _, err := f.svc.Refund(context.Background(), r)
			e := rule.As(err)
			if e == nil || e.Kind != c.kind || (c.field != "" && len(e.Fields[c.field]) != 1) {
				t.Fatalf("refund: %v; want a refusal of kind %v naming %q", err, c.kind, c.field)
			}
			if f.gate.times("refund")+other.gate.times("refund") != asked {
				t.Errorf("the processor was asked")
			}
			if n := f.count(t, `SELECT count(*) FROM card_payments`); n != payments {
				t.Errorf("%d card payments after the refusal, want %d", n, payments)
			}
			if n := f.count(t, `SELECT count(*) FROM pending_refunds`); n != pending {
				t.Errorf("%d pending refunds after the refusal, want %d", n, pending)
			}
		})
	}
}

// A refund the processor declines is recorded as a declined refund: the
// sale keeps all it had to refund, and may be refunded after.
func TestRefundDeclined(t *testing.T) {
	f := newFixture(t, 0)
	inv := f.invoice(t, "30.00", "0", invoice.Open)
	out, err := f.pay(inv, processor.TestCardRefundDeclines, "30.00")
	if err != nil || !out.Approved {
		t.Fatalf("pay: %+v, %v", out, err)
	}
	sale, err := f.svc.CardPayment(context.Background(), f.org, out.Payment.ID)
	if err != nil {
		t.Fatal(err)
	}
	refund, _, err := f.refundOf(sale, ptr("10.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if refund.Kind != Refund || refund.Status != Declined || refund.DeclineReason == nil || refund.RefundOf == nil || *refund.RefundOf != sale.ID {
		t.Errorf("refund %+v, want a declined refund of the sale", refund)
	}
	got, err := f.svc.CardPayment(context.Background(), f.org, sale.ID)
	if err != nil || got.AmountRefunded.Sign() != 0 {
		t.Errorf("sale amountRefunded %s (%v), want 0", got.AmountRefunded.Text('f'), err)
	}
	if inv := f.read(t, inv.ID); inv.AmountRefunded.Sign() != 0 {
		t.Errorf("invoice amountRefunded %s, want 0", inv.AmountRefunded.Text('f'))
	}
	if events := f.events(t); events[len(events)-1] != event.CardPaymentDeclined.Name {
		t.Errorf("events %v, want the refund's card_payment.declined last", events)
	}
	// All of it may still be refunded: the declined refund held nothing.
	if _, _, err := f.refundOf(sale, ptr("30.00"), nil); err != nil {
		t.Errorf("a refund of the whole sale after a declined one: %v", err)
	}
}

// An amount is the same request however it is written: 10, 10.0 and
// 10.00 under one Idempotency-Key replay the first refund, where 10.01
// is another request.
func TestRefundAmountWrittenAnyWay(t *testing.T) {
	f := newFixture(t, 0)
	sale := f.sale(t, "50.00")
	key := ptr(uuid.NewString())
	first, replayed, err := f.refundOf(sale, ptr("10"), key)
	if err != nil || replayed || first.Amount.Text('f') != "10.00" {
		t.Fatalf("first: %+v replayed %v, %v", first, replayed, err)
	}
	for _, a := range []string{"10.0", "10.00"} {
		again, replayed, err := f.refundOf(sale, ptr(a), key)
		if err != nil || !replayed || again.ID != first.ID {
			t.Errorf("%s with the key: %+v replayed %v, %v; want the first replayed", a, again.ID, replayed, err)
		}
	}
	if _, _, err := f.refundOf(sale, ptr("10.01"), key); !errors.Is(err, idempotency.ErrReused) {
		t.Errorf("10.01 with the key: %v, want idempotency.ErrReused", err)
	}
	if n := f.gate.times("refund"); n != 1 {
		t.Errorf("%d refunds asked, want 1", n)
	}
}

// The settlement takes up what was left behind once it is due, and not
// before: a pending charge is voided at the processor and forgotten; a
// pending refund the processor never made is forgotten, with its
// Idempotency-Key, so that the sale may be refunded again.
func TestSettlementTakesUpWhatWasLeftBehind(t *testing.T) {
	f := newFixture(t, 0)
	sale := f.sale(t, "20.00")
	inv := f.invoice(t, "15.00", "0", invoice.Open)
	charge, refund := uuid.New(), uuid.New()
	later := time.Now().Add(time.Hour)
	if _, err := f.db.Exec(`INSERT INTO pending_charges (order_id, invoice_id, mid, amount, created_at, void_after, last_error)
		VALUES ($1, $2, $3, '15.00', now(), $4, 'the answer was lost')`, charge, inv.ID, f.mid, later); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(`INSERT INTO pending_refunds (refund_id, organization_id, sale_id, amount, whole, created_by_name,
			created_at, settle_after, last_error) VALUES ($1, $2, $3, '20.00', true, 'test key', now(), $4, 'the answer was lost')`,
		refund, f.org, sale.ID, later); err != nil {
		t.Fatal(err)
	}
	settle := func() {
		t.Helper()
		if err := f.svc.SettlePending(context.Background(), quiet); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.SettlePendingRefunds(context.Background(), quiet); err != nil {
			t.Fatal(err)
		}
	}
	left := func() (int, int) {
		return f.count(t, `SELECT count(*) FROM pending_charges WHERE order_id = $1`, charge),
			f.count(t, `SELECT count(*) FROM pending_refunds WHERE refund_id = $1`, refund)
	}
	settle()
	if c, r := left(); c != 1 || r != 1 || f.gate.times("void") != 0 {
		t.Fatalf("before they are due: %d charges and %d refunds left, %d voids; want both left, none voided", c, r, f.gate.times("void"))
	}
	f.svc.Now = func() time.Time { return later.Add(time.Second) }
	settle()
	// Other tests' leftovers are due too: the charge's row goes once its
	// void is made.
	if c, r := left(); c != 0 || r != 0 || f.gate.times("void") == 0 {
		t.Errorf("once due: %d charges and %d refunds left, %d voids; want none left, voided", c, r, f.gate.times("void"))
	}
	f.svc.Now = time.Now
	if _, _, err := f.refundOf(sale, nil, nil); err != nil {
		t.Errorf("a refund of the sale after its lost refund was settled: %v", err)
	}
}
