package demo_test

import (
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/demo"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/recurring"
)

// TestDemoMerchantHasItsPast seeds the demo as payreq demo does and counts
// what its merchant has: 12 customers, 40 invoices over the last 60 days
// in every status, card payments (one declined) and refunds, recorded
// payments, deposits on most days, a recurring invoice and a terminal of
// each of the simulator's kinds; the clock is back where it was.
func TestDemoMerchantHasItsPast(t *testing.T) {
	t.Parallel()
	start := time.Now().Truncate(time.Second)
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(start)})
	ctx := t.Context()
	seed := env.Seed()
	org := seed.Merchant.OrganizationID
	a := env.App
	if _, err := demo.SeedTerminals(ctx, a.Directory, a.Terminals, org); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := demo.SeedActivity(ctx, a, env.Clock, org); err != nil {
		t.Fatal(err)
	}
	t.Logf("the activity took %s", time.Since(began))
	if now := env.Clock.Now(); !now.Equal(start) {
		t.Errorf("the clock is at %s after the demo, not %s", now, start)
	}

	people, _, err := a.Customers.List(ctx, org, customer.Filter{}, 100, "")
	apitest.Want(t, "customers", len(people), 12)
	if err != nil {
		t.Fatal(err)
	}
	invoices, _, err := a.Invoices.List(ctx, org, invoice.Filter{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]int{}
	oldest, today := start, start.Format(time.DateOnly)
	for _, inv := range invoices {
		s := string(inv.Status)
		switch {
		case inv.Status == invoice.Paid && inv.AmountRefunded.Sign() > 0:
			s = "refunded"
		case inv.Status.Payable() && inv.DueDate.Format(time.DateOnly) < today:
			s += ", overdue"
		case inv.Status.Payable() && inv.AmountPaid.Sign() > 0 && inv.Status != invoice.PartPaid:
			t.Errorf("%s is %s with %s paid", inv.InvoiceNumber, inv.Status, inv.AmountPaid.Text('f'))
		}
		statuses[s]++
		if inv.CreatedAt.Before(oldest) {
			oldest = inv.CreatedAt
		}
		if inv.CreatedAt.After(start) {
			t.Errorf("%s made in the future: %s", inv.InvoiceNumber, inv.CreatedAt)
		}
	}
	want := map[string]int{"draft": 3, "open": 4, "open, overdue": 4, "part_paid": 1, "part_paid, overdue": 3,
		"paid": 19, "refunded": 4, "cancelled": 2}
	apitest.Want(t, "invoices", len(invoices), 40)
	for s, n := range want {
		apitest.Want(t, "invoices "+s, statuses[s], n)
	}
	if days := start.Sub(oldest).Hours() / 24; days < 55 || days > 60 {
		t.Errorf("the oldest invoice is %.1f days old", days)
	}

	cards, _, err := a.Payments.CardPayments(ctx, org, payment.Filter{}, 200, "")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, p := range cards {
		kinds[p.Kind+" "+p.Status]++
	}
	apitest.Want(t, "approved sales", kinds["sale approved"], 31)
	apitest.Want(t, "declined sales", kinds["sale declined"], 1)
	apitest.Want(t, "refunds", kinds["refund approved"], 4)

	deposits, _, err := a.Payments.Deposits(ctx, org, payment.DepositFilter{}, 200, "")
	if err != nil {
		t.Fatal(err)
	}
	days := map[string]bool{}
	for i, d := range deposits {
		days[d.BatchDate.Format(time.DateOnly)] = true
		if i > 0 && d.BatchDate.After(deposits[i-1].BatchDate) {
			t.Errorf("deposit of %s listed after one of %s", d.BatchDate, deposits[i-1].BatchDate)
		}
	}
	t.Logf("deposits on %d days", len(days))
	if len(days) <= demo.ActivityDays/2 {
		t.Errorf("deposits on %d days of %d", len(days), demo.ActivityDays)
	}

	series, _, err := a.Recurring.List(ctx, org, recurring.Filter{}, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "recurring invoices", len(series), 1)
	terminals, err := a.Terminals.List(ctx, &org)
	if err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "terminals", len(terminals), 5)
}
