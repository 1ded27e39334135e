package payment

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

func dec(s string) apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic(err)
	}
	return *d
}

func ptr(s string) *string { return &s }

func TestLevel3Items(t *testing.T) {
	full := func() invoice.Line {
		return invoice.Line{Description: "Beans", Quantity: dec("3.0000"), UnitCost: dec("0.0149"),
			UOM: ptr("LB"), CommodityCode: ptr("0901"), UPC: ptr("012345678905")}
	}
	taxed := full()
	half := dec("12.5") // 12.5 % of 0.04 is 0.005: half a cent, rounded up
	taxed.TaxRate = &half
	items := Level3Items([]invoice.Line{full(), taxed})
	if len(items) != 2 || items[0].LineTotal.Text('f') != "0.04" || items[0].Quantity.Text('f') != "3" ||
		items[0].UnitCost.Text('f') != "0.0149" || items[1].UPC != "012345678905" {
		t.Fatalf("items: %+v", items)
	}
	if items[0].TaxAmount.Text('f') != "0.00" || items[1].TaxAmount.Text('f') != "0.01" {
		t.Fatalf("tax amounts %s and %s, want 0.00 and 0.01", items[0].TaxAmount.Text('f'), items[1].TaxAmount.Text('f'))
	}
	for name, edit := range map[string]func(*invoice.Line){
		"no uom":            func(l *invoice.Line) { l.UOM = nil },
		"no commodity code": func(l *invoice.Line) { l.CommodityCode = nil },
		"blank upc":         func(l *invoice.Line) { l.UPC = ptr("  ") },
	} {
		l := full()
		edit(&l)
		if items := Level3Items([]invoice.Line{full(), l}); items != nil {
			t.Errorf("%s: items sent", name)
		}
	}
	if Level3Items(nil) != nil || Level3Items([]invoice.Line{}) != nil {
		t.Errorf("items without lines")
	}
}

func TestBrandName(t *testing.T) {
	for in, want := range map[string]string{"visa": "Visa", "MASTERCARD": "Mastercard", "amex": "American Express",
		"discover": "Discover", "jcb": "JCB", "diners": "Diners Club", "unknown": "", "": "", "UnionPay": "UnionPay"} {
		if got := BrandName(in); got != want {
			t.Errorf("BrandName(%q) = %q, want %q", in, got, want)
		}
	}
}

// underWay is a pending charge of another Pay: in flight, or left behind.
type underWay struct {
	amount string
	age    time.Duration // since it was written
	lost   bool          // its Pay gave up on the outcome (last_error set)
}

// terminalHolds are the pending terminal payments' amounts by invoice
// (payment.Terminals).
type terminalHolds map[uuid.UUID]string

func (h terminalHolds) PendingAmount(_ context.Context, _ sqlx.QueryerContext, invoiceID uuid.UUID) (apd.Decimal, error) {
	held := dec("0")
	if a, ok := h[invoiceID]; ok {
		held = dec(a)
	}
	return held, nil
}

// A payment may take at most what is left to pay (LeftToPay): the balance
// less what the charges under way and the pending terminal payments of the
// invoice hold; a charge whose outcome was lost, or whose Pay can no
// longer record it, holds nothing (it is only ever voided). A refused
// payment never reaches the processor; nothing left is a conflict.
func TestPayHoldsTheBalanceOfPaymentsUnderWay(t *testing.T) {
	f := newFixture(t, 0)
	atTerminals := terminalHolds{}
	f.svc.Terminals = atTerminals
	for _, c := range []struct {
		name         string
		amount, paid string
		status       invoice.Status
		underWay     []underWay
		atTerminal   string // pending at a terminal, "" for nothing
		pay          string
		wantBalance  string // "" when approved
		wantUnderWay string
		wantPaid     string
	}{
		{name: "the whole balance", amount: "100.00", paid: "0", status: invoice.Open, pay: "100.00", wantPaid: "100.00"},
		{name: "the rest beside one under way", amount: "100.00", paid: "0", status: invoice.Open,
			underWay: []underWay{{amount: "60.00"}}, pay: "40.00", wantPaid: "40.00"},
		{name: "more than the rest beside one under way", amount: "100.00", paid: "0", status: invoice.Open,
			underWay: []underWay{{amount: "60.00"}}, pay: "40.01", wantBalance: "100.00", wantUnderWay: "60.00", wantPaid: "0.00"},
		{name: "all of it under way", amount: "100.00", paid: "0", status: invoice.Open,
			underWay: []underWay{{amount: "70.00"}, {amount: "30.00"}}, pay: "0.01", wantBalance: "100.00", wantUnderWay: "100.00", wantPaid: "0.00"},
		{name: "part paid, part under way", amount: "100.00", paid: "30.00", status: invoice.PartPaid,
			underWay: []underWay{{amount: "50.00"}}, pay: "20.00", wantPaid: "50.00"},
		{name: "more than the balance", amount: "100.00", paid: "30.00", status: invoice.PartPaid,
			pay: "70.01", wantBalance: "70.00", wantUnderWay: "0.00", wantPaid: "30.00"},
		{name: "the rest beside a payment at a terminal", amount: "100.00", paid: "0", status: invoice.Open,
			atTerminal: "25.00", pay: "75.00", wantPaid: "75.00"},
		{name: "more than the rest beside a payment at a terminal", amount: "100.00", paid: "0", status: invoice.Open,
			atTerminal: "25.00", pay: "75.01", wantBalance: "100.00", wantUnderWay: "25.00", wantPaid: "0.00"},
		{name: "all of it under way, part at a terminal", amount: "100.00", paid: "0", status: invoice.Open,
			underWay: []underWay{{amount: "60.00"}}, atTerminal: "40.00", pay: "0.01", wantBalance: "100.00", wantUnderWay: "100.00", wantPaid: "0.00"},
		{name: "a charge whose outcome was lost", amount: "100.00", paid: "0", status: invoice.Open,
			underWay: []underWay{{amount: "100.00", lost: true}}, pay: "100.00", wantPaid: "100.00"},
		{name: "a charge of a Pay that is over", amount: "100.00", paid: "0", status: invoice.Open,
			underWay: []underWay{{amount: "100.00", age: PayTimeout + time.Second}}, pay: "100.00", wantPaid: "100.00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			inv := f.invoice(t, c.amount, c.paid, c.status)
			if c.atTerminal != "" {
				atTerminals[inv.ID] = c.atTerminal
			}
			for _, u := range c.underWay {
				var lastError *string
				if u.lost {
					lastError = ptr("the answer was lost")
				}
				_, err := f.db.Exec(`INSERT INTO pending_charges (order_id, invoice_id, mid, amount, created_at, void_after, last_error)
					VALUES ($1, $2, $3, $4, $5, $6, $7)`, uuid.New(), inv.ID, f.mid, u.amount, time.Now().Add(-u.age),
					time.Now().Add(time.Hour), lastError)
				if err != nil {
					t.Fatal(err)
				}
			}
			charges := f.gate.times("charge")
			out, err := f.pay(inv, processor.TestCardApprove, c.pay)
			refused := rule.As(err)
			switch {
			case c.wantBalance == "":
				if err != nil || !out.Approved {
					t.Fatalf("pay: %+v, %v; want approved", out, err)
				}
			case refused == nil || refused.Field != "amount":
				t.Fatalf("pay: %+v, %v; want the amount refused", out, err)
			default:
				var left apd.Decimal
				balance, underWay := dec(c.wantBalance), dec(c.wantUnderWay)
				_, _ = apd.BaseContext.Sub(&left, &balance, &underWay)
				if refused.Suggest != left.Text('f') {
					t.Errorf("suggested %s, want %s (balance %s, %s under way)", refused.Suggest, left.Text('f'), c.wantBalance, c.wantUnderWay)
				}
				if asked := f.gate.times("charge") - charges; asked != 0 {
					t.Errorf("a refused payment reached the processor")
				}
				if wantKind := map[bool]rule.Kind{true: rule.Conflict, false: rule.Unprocessable}[left.IsZero()]; refused.Kind != wantKind {
					t.Errorf("refused as %v, want %v", refused.Kind, wantKind)
				}
				if c.atTerminal != "" && !strings.Contains(refused.Message, "card terminal") {
					t.Errorf("the refusal %q does not say a payment is being taken at a card terminal", refused.Message)
				}
			}
			got := f.read(t, inv.ID)
			if got.AmountPaid.Text('f') != c.wantPaid {
				t.Errorf("amountPaid %s, want %s", got.AmountPaid.Text('f'), c.wantPaid)
			}
			// Only this payment's own pending charge is gone.
			if n := f.count(t, `SELECT count(*) FROM pending_charges WHERE invoice_id = $1`, inv.ID); n != len(c.underWay) {
				t.Errorf("%d pending charges, want the %d of the others", n, len(c.underWay))
			}
		})
	}
}

// Paid and cancelled invoices take no payment, whatever the amount.
func TestPayRefusesWhatIsNotPayable(t *testing.T) {
	f := newFixture(t, 0)
	for _, c := range []struct {
		name, paid string
		status     invoice.Status
	}{{"paid", "20.00", invoice.Paid}, {"cancelled", "0", invoice.Cancelled}} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.pay(f.invoice(t, "20.00", c.paid, c.status), processor.TestCardApprove, "1.00")
			if !errors.Is(err, ErrNotPayable) {
				t.Errorf("pay: %v, want ErrNotPayable", err)
			}
		})
	}
	if f.gate.times("charge") != 0 {
		t.Errorf("the processor was asked")
	}
}

// An approval is recorded in a transaction of its own, after the
// processor answered: the payment, the invoice, the submission and the
// events; a decline likewise.
func TestPayRecordsTheAnswer(t *testing.T) {
	f := newFixture(t, 0)
	inv := f.invoice(t, "80.00", "0", invoice.Open)
	out, err := f.pay(inv, processor.TestCardApprove, "30.00")
	if err != nil || !out.Approved {
		t.Fatalf("pay: %+v, %v", out, err)
	}
	got := f.read(t, inv.ID)
	if got.Status != invoice.PartPaid || got.AmountPaid.Text('f') != "30.00" || len(got.Payments) != 1 || got.Payments[0].ID != out.Payment.ID {
		t.Errorf("after a part payment: %s, paid %s, payments %+v", got.Status, got.AmountPaid.Text('f'), got.Payments)
	}
	out, err = f.pay(inv, processor.TestCardDecline, "50.00")
	if err != nil || out.Approved || out.DeclineReason == "" {
		t.Fatalf("declined pay: %+v, %v", out, err)
	}
	if out, err = f.pay(inv, processor.TestCardApprove, "50.00"); err != nil || !out.Approved {
		t.Fatalf("pay the rest: %+v, %v", out, err)
	}
	got = f.read(t, inv.ID)
	if got.Status != invoice.Paid || got.AmountPaid.Text('f') != "80.00" || got.FailedAttempts != 1 || got.PaidAt == nil {
		t.Errorf("after the rest: %s, paid %s, failedAttempts %d", got.Status, got.AmountPaid.Text('f'), got.FailedAttempts)
	}
	want := []string{event.CardPaymentApproved.Name, event.InvoicePartPaid.Name, event.CardPaymentDeclined.Name,
		event.CardPaymentApproved.Name, event.InvoicePaid.Name}
	if got := f.events(t); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if n := f.count(t, `SELECT count(*) FROM pending_charges WHERE invoice_id = $1`, inv.ID); n != 0 {
		t.Errorf("%d pending charges left", n)
	}
	if n := f.count(t, `SELECT count(*) FROM pay_submissions WHERE invoice_id = $1`, inv.ID); n != 3 {
		t.Errorf("%d submissions recorded, want 3", n)
	}
}

// While one payment of the whole balance is at the processor, a second is
// refused at once; the same form sent again waits for the first answer and
// gets it; the settlement leaves the charge under way alone. The first is
// then recorded as usual.
func TestPayWhileAnotherIsAtTheProcessor(t *testing.T) {
	f := newFixture(t, 0)
	inv := f.invoice(t, "45.00", "0", invoice.Open)
	form := Request{AttemptID: uuid.New(), Version: inv.Version, Amount: dec("45.00"),
		Card: processor.Card{Number: processor.TestCardApprove, Expiry: "1299", CVV: "123", Name: "Dana Whitfield"}}
	type result struct {
		out Outcome
		err error
	}
	first := make(chan result, 1)
	f.gate.held.Store(true)
	go func() {
		out, err := f.svc.Pay(context.Background(), inv, form)
		first <- result{out, err}
	}()
	f.gate.waitReached(t)

	if _, err := f.pay(inv, processor.TestCardApprove, "0.01"); !rule.Is(err, rule.Conflict) || rule.As(err).Suggest != "0.00" {
		t.Errorf("a second payment while the whole balance is under way: %v, want a conflict with nothing left to pay", err)
	}
	again := make(chan result, 1)
	go func() {
		out, err := f.svc.Pay(context.Background(), inv, form)
		again <- result{out, err}
	}()
	if err := f.svc.SettlePending(context.Background(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if f.gate.times("void") != 0 {
		t.Errorf("the settlement voided the charge under way")
	}
	select {
	case r := <-again:
		t.Fatalf("the same form sent again was answered before the first: %+v, %v", r.out, r.err)
	default:
	}
	f.gate.release <- struct{}{}
	r1, r2 := <-first, <-again
	if r1.err != nil || !r1.out.Approved {
		t.Fatalf("first: %+v, %v", r1.out, r1.err)
	}
	if r2.err != nil || !r2.out.Approved || r2.out.Payment.ID != r1.out.Payment.ID {
		t.Errorf("the form sent again: %+v, %v; want the first's payment %s", r2.out, r2.err, r1.out.Payment.ID)
	}
	if n := f.gate.times("charge"); n != 1 {
		t.Errorf("%d charges asked, want 1", n)
	}
	got := f.read(t, inv.ID)
	if got.Status != invoice.Paid || len(got.Payments) != 1 {
		t.Errorf("invoice %s with %d payments, want paid with one", got.Status, len(got.Payments))
	}
}

// The invoice is cancelled while its payment is at the processor: the
// approval cannot be recorded, so the charge is voided and the customer
// told that the invoice can no longer be paid.
func TestPayVoidsWhenTheInvoiceWasCancelledMeanwhile(t *testing.T) {
	f := newFixture(t, 0)
	inv := f.invoice(t, "25.00", "0", invoice.Open)
	f.gate.held.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := f.pay(inv, processor.TestCardApprove, "25.00")
		done <- err
	}()
	f.gate.waitReached(t)
	if _, err := f.db.Exec(`UPDATE invoices SET status = 'cancelled', cancelled_at = now() WHERE id = $1`, inv.ID); err != nil {
		t.Fatal(err)
	}
	f.gate.release <- struct{}{}
	err := <-done
	if !errors.Is(err, ErrVoided) || !errors.Is(err, ErrNotPayable) {
		t.Errorf("pay: %v, want ErrVoided and ErrNotPayable", err)
	}
	if f.gate.times("void") != 1 {
		t.Errorf("%d voids, want 1", f.gate.times("void"))
	}
	if got := f.read(t, inv.ID); got.AmountPaid.Sign() != 0 || len(got.Payments) != 0 {
		t.Errorf("a payment was recorded on the cancelled invoice")
	}
	if n := f.count(t, `SELECT count(*) FROM pending_charges WHERE invoice_id = $1`, inv.ID); n != 0 {
		t.Errorf("%d pending charges left after the void", n)
	}
}

// A change of the invoice while a charge is at the processor is refused
// (its pending charge is under way), and the charge is recorded at the
// amount it was reserved for; a payment of the version before a change is
// refused before the processor is asked.
func TestChangeWhileAChargeIsAtTheProcessor(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	actor := invoice.Actor{OrganizationID: f.org, Name: "test key"}
	memo := invoice.Change{To: invoice.Draft{Memo: optional.String("changed")}, Given: map[string]bool{"memo": true}}
	inv := f.invoice(t, "45.00", "0", invoice.Open)
	paid := make(chan error, 1)
	f.gate.held.Store(true)
	go func() { _, err := f.pay(inv, processor.TestCardApprove, "45.00"); paid <- err }()
	f.gate.waitReached(t)
	if _, err := f.svc.Invoices.Update(ctx, actor, inv.ID, memo); !rule.Is(err, rule.Conflict) {
		t.Errorf("a change while a charge is under way: %v, want a conflict", err)
	}
	f.gate.release <- struct{}{}
	if err := <-paid; err != nil {
		t.Fatal(err)
	}
	if got := f.read(t, inv.ID); got.Status != invoice.Paid || got.Version != 1 || got.Memo != nil {
		t.Errorf("after the charge: %s v%d memo %v", got.Status, got.Version, got.Memo)
	}

	stale := f.invoice(t, "30.00", "0", invoice.Open)
	if _, err := f.svc.Invoices.Update(ctx, actor, stale.ID, memo); err != nil {
		t.Fatal(err)
	}
	charges := f.gate.times("charge")
	if _, err := f.pay(stale, processor.TestCardApprove, "30.00"); !errors.Is(err, ErrChanged) {
		t.Errorf("a payment of the version before a change: %v, want ErrChanged", err)
	}
	if f.gate.times("charge") != charges {
		t.Errorf("the processor was asked to charge a version that is gone")
	}
	if under, err := f.svc.ChargesUnderWay(ctx, f.db, stale.ID); err != nil || under {
		t.Errorf("a pending charge left behind: %v %v", under, err)
	}
}
