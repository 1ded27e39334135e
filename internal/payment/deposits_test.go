package payment

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/processor"
)

var quiet = slog.New(slog.DiscardHandler)

// settle closes the fixture's batches now and returns the deposits made.
func (f *fixture) settle(t *testing.T) []Deposit {
	t.Helper()
	made, err := f.svc.SettleOrganization(context.Background(), f.org, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return made
}

// A batch's deposit sums its approved sales and refunds; the simulator's
// fees are 2.9% + 0.30 of each sale, rounded half up to the cent, and none
// of a refund; net is sales less refunds less fees, negative when the
// refunds and fees are more. Declined sales count for nothing.
func TestSettlementSums(t *testing.T) {
	for _, c := range []struct {
		name      string
		sales     []string
		refunds   map[int][]string // of sale i, before the batch closes
		declined  []string
		wantSales string
		wantCount int
		wantRefs  string
		wantRefN  int
		wantFees  string
		wantNet   string
	}{
		{name: "one sale", sales: []string{"100.00"}, wantSales: "100.00", wantCount: 1, wantRefs: "0.00", wantFees: "3.20", wantNet: "96.80"},
		{name: "fees rounded per sale", sales: []string{"10.00", "0.50"},
			wantSales: "10.50", wantCount: 2, wantRefs: "0.00", wantFees: "0.90", wantNet: "9.60"},
		{name: "a half cent of fee rounds up", sales: []string{"5.00"}, wantSales: "5.00", wantCount: 1, wantRefs: "0.00",
			wantFees: "0.45", wantNet: "4.55"},
		{name: "a part refund in the same batch", sales: []string{"100.00"}, refunds: map[int][]string{0: {"40.00"}},
			wantSales: "100.00", wantCount: 1, wantRefs: "40.00", wantRefN: 1, wantFees: "3.20", wantNet: "56.80"},
		{name: "refunded whole: net below zero", sales: []string{"10.00"}, refunds: map[int][]string{0: {"4.00", "6.00"}},
			wantSales: "10.00", wantCount: 1, wantRefs: "10.00", wantRefN: 2, wantFees: "0.59", wantNet: "-0.59"},
		{name: "declined sales left out", sales: []string{"20.00"}, declined: []string{"99.00", "1.00"},
			wantSales: "20.00", wantCount: 1, wantRefs: "0.00", wantFees: "0.88", wantNet: "19.12"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 0)
			var sales []CardPayment
			for i, a := range c.sales {
				sale := f.sale(t, a)
				sales = append(sales, sale)
				for _, r := range c.refunds[i] {
					if _, _, err := f.refundOf(sale, &r, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, a := range c.declined {
				if out, err := f.pay(f.invoice(t, a, "0", invoice.Open), processor.TestCardDecline, a); err != nil || out.Approved {
					t.Fatalf("declined pay: %+v, %v", out, err)
				}
			}
			made := f.settle(t)
			if len(made) != 1 {
				t.Fatalf("%d deposits, want 1", len(made))
			}
			d := made[0]
			got := []any{d.SalesCount, d.SalesAmount.Text('f'), d.RefundsCount, d.RefundsAmount.Text('f'), d.FeesAmount.Text('f'), d.NetAmount.Text('f')}
			want := []any{c.wantCount, c.wantSales, c.wantRefN, c.wantRefs, c.wantFees, c.wantNet}
			if !slices.Equal(got, want) {
				t.Errorf("deposit sales count, sales, refunds count, refunds, fees, net = %v, want %v", got, want)
			}
			if d.Status != DepositPending || d.MID != f.mid || d.PaidAt != nil {
				t.Errorf("deposit %s of %s, paid at %v; want pending of %s", d.Status, d.MID, d.PaidAt, f.mid)
			}
			// Every approved payment of the batch is in the deposit, and read
			// back as settled by it.
			inDeposit := f.count(t, `SELECT count(*) FROM card_payments WHERE deposit_id = $1`, d.ID)
			if inDeposit != c.wantCount+c.wantRefN {
				t.Errorf("%d card payments in the deposit, want %d", inDeposit, c.wantCount+c.wantRefN)
			}
			if p, err := f.svc.CardPayment(context.Background(), f.org, sales[0].ID); err != nil || p.DepositID == nil || *p.DepositID != d.ID {
				t.Errorf("the sale's deposit: %v (%v), want %s", p.DepositID, err, d.ID)
			}
			if read, err := f.svc.Deposit(context.Background(), f.org, d.ID); err != nil || read.NetAmount.Text('f') != c.wantNet {
				t.Errorf("deposit read back: %+v, %v", read, err)
			}
		})
	}
}

// A refund made after its sale settled goes to the next batch, alone: a
// deposit of no sales and no fees, whose net is the refund taken back.
func TestRefundAfterSettlement(t *testing.T) {
	f := newFixture(t, 0)
	sale := f.sale(t, "80.00")
	first := f.settle(t)
	if len(first) != 1 || first[0].NetAmount.Text('f') != "77.38" {
		t.Fatalf("first deposits %+v, want one of net 77.38", first)
	}
	refund, _, err := f.refundOf(sale, ptr("30.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	second := f.settle(t)
	if len(second) != 1 {
		t.Fatalf("%d deposits after the refund, want 1", len(second))
	}
	d := second[0]
	if d.SalesCount != 0 || d.SalesAmount.Text('f') != "0.00" || d.RefundsCount != 1 || d.RefundsAmount.Text('f') != "30.00" ||
		d.FeesAmount.Text('f') != "0.00" || d.NetAmount.Text('f') != "-30.00" {
		t.Errorf("the refund's deposit %+v, want only the refund of 30.00, net -30.00", d)
	}
	for id, want := range map[uuid.UUID]uuid.UUID{sale.ID: first[0].ID, refund.ID: d.ID} {
		if p, err := f.svc.CardPayment(context.Background(), f.org, id); err != nil || p.DepositID == nil || *p.DepositID != want {
			t.Errorf("card payment %s in deposit %v (%v), want %s", id, p.DepositID, err, want)
		}
	}
}

// An empty batch makes no deposit and asks the processor nothing; nor does
// a batch already settled, settled again; nor one of declined sales only.
func TestEmptyBatchesMakeNoDeposit(t *testing.T) {
	f := newFixture(t, 0)
	if made := f.settle(t); len(made) != 0 {
		t.Errorf("deposits of no payments: %+v", made)
	}
	if out, err := f.pay(f.invoice(t, "12.00", "0", invoice.Open), processor.TestCardDecline, "12.00"); err != nil || out.Approved {
		t.Fatalf("declined pay: %+v, %v", out, err)
	}
	if made := f.settle(t); len(made) != 0 {
		t.Errorf("deposits of a declined sale: %+v", made)
	}
	if n := f.gate.times("settle"); n != 0 {
		t.Errorf("the processor was asked to settle %d empty batches", n)
	}
	f.sale(t, "12.00")
	if made := f.settle(t); len(made) != 1 {
		t.Fatalf("%d deposits, want 1", len(made))
	}
	if made := f.settle(t); len(made) != 0 {
		t.Errorf("settled again: %+v", made)
	}
	if n := f.count(t, `SELECT count(*) FROM deposits WHERE organization_id = $1`, f.org); n != 1 {
		t.Errorf("%d deposits stored, want 1", n)
	}
	if _, err := f.svc.SettleOrganization(context.Background(), uuid.New(), quiet); !errors.Is(err, ErrUnknownOrganization) {
		t.Errorf("settle of an unknown organization: %v", err)
	}
}

// A deposit is paid on its expected day in its location's time zone, not
// a minute before; it is paid once, with its deposit.paid event.
func TestDepositPaidOnItsExpectedDay(t *testing.T) {
	f := newFixture(t, 0)
	f.sale(t, "40.00")
	made := f.settle(t)
	if len(made) != 1 {
		t.Fatalf("%d deposits, want 1", len(made))
	}
	d := made[0]
	chicago, err := time.LoadLocation("America/Chicago")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(d.ExpectedAt.Year(), d.ExpectedAt.Month(), d.ExpectedAt.Day(), 0, 0, 0, 0, chicago)
	read := func() Deposit {
		t.Helper()
		got, err := f.svc.Deposit(context.Background(), f.org, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		at       time.Time
		wantPaid bool
	}{{due.Add(-time.Minute), false}, {due, true}, {due.Add(48 * time.Hour), true}} {
		f.svc.Now = func() time.Time { return c.at }
		if _, err := f.svc.MarkDepositsPaid(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := read()
		if paid := got.Status == DepositPaid; paid != c.wantPaid {
			t.Errorf("at %s: %s, want paid %v", c.at, got.Status, c.wantPaid)
		}
		if c.wantPaid && (got.PaidAt == nil || !got.PaidAt.Equal(due)) {
			t.Errorf("at %s: paid at %v, want %s", c.at, got.PaidAt, due)
		}
	}
	paid := 0
	for _, e := range f.events(t) {
		if e == event.DepositPaid.Name {
			paid++
		}
	}
	if paid != 1 {
		t.Errorf("%d deposit.paid events, want 1", paid)
	}
}

// The net of a day is the sum of its deposits' nets (a refund's negative
// one too), every day of the range is there, 0.00 when it has none; a
// sale's refunds are listed by RefundOf.
func TestDailyNetAndRefundsOfASale(t *testing.T) {
	f := newFixture(t, 0)
	sale := f.sale(t, "80.00")
	first := f.settle(t)
	refund, _, err := f.refundOf(sale, ptr("30.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	second := f.settle(t)
	if len(first) != 1 || len(second) != 1 || !first[0].BatchDate.Equal(second[0].BatchDate) {
		t.Fatalf("deposits %+v and %+v, want one each, of one day", first, second)
	}
	day := first[0].BatchDate
	days, err := f.svc.DailyNet(context.Background(), f.org, day.AddDate(0, 0, -2), day.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range days {
		got = append(got, d.Day.Format(time.DateOnly)+" "+d.Net.Text('f')+" "+strconv.Itoa(d.Count))
	}
	want := []string{day.AddDate(0, 0, -2).Format(time.DateOnly) + " 0.00 0", day.AddDate(0, 0, -1).Format(time.DateOnly) + " 0.00 0",
		day.Format(time.DateOnly) + " 47.38 2", day.AddDate(0, 0, 1).Format(time.DateOnly) + " 0.00 0"}
	if !slices.Equal(got, want) {
		t.Errorf("daily net %v, want %v", got, want)
	}

	refunds, _, err := f.svc.CardPayments(context.Background(), f.org, Filter{RefundOf: &sale.ID}, 25, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(refunds) != 1 || refunds[0].ID != refund.ID {
		t.Errorf("the sale's refunds: %+v, want the one", refunds)
	}
}
