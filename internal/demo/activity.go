package demo

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/recurring"
)

// Clock is the time the demo's app reads (app.Options.Now). SeedActivity
// moves it back to each moment of the merchant's past it makes, and
// forward to where it was at the end.
type Clock interface {
	Now() time.Time
	Advance(time.Duration)
}

// RealClock is the real time, moved by Advance: payreq demo's clock.
type RealClock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now is the real time, moved.
func (c *RealClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock by d (back when d is negative).
func (c *RealClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// ActivityDays is how far back the demo's activity goes.
const ActivityDays = 60

// What becomes of each demo invoice.
const (
	fateDraft      = "draft"       // saved as a draft
	fateOpen       = "open"        // sent, not due yet
	fateOverdue    = "overdue"     // sent, past its due date
	fatePartCard   = "part-card"   // a part paid by card
	fatePartCheck  = "part-check"  // a part paid by a check recorded
	fateCard       = "card"        // paid by card
	fateCardTwice  = "card-twice"  // paid by card in two payments, days apart
	fateDeclined   = "declined"    // a card declined, then paid by card
	fateCheck      = "check"       // paid by a check recorded
	fateCash       = "cash"        // paid in cash recorded
	fateBank       = "bank"        // paid by bank transfer recorded
	fateRefundPart = "refund-part" // paid by card, then a part refunded
	fateRefundAll  = "refund-all"  // paid by card, then all refunded
	fateCancelled  = "cancelled"   // sent, then cancelled
)

// cardFates are the fates with a card payment.
var cardFates = []string{fateCard, fateCardTwice, fateDeclined, fatePartCard, fateRefundPart, fateRefundAll}

// fates are the demo's invoices, oldest first: the older ones settled
// (paid, refunded, cancelled, overdue), the recent ones open or drafts.
var fates = []string{
	fateCardTwice, fateCard, fateCheck, fateRefundPart, fateCardTwice, fateCancelled, fateCard, fateOverdue, fateCash, fateRefundAll,
	fateCardTwice, fatePartCard, fateDeclined, fateOverdue, fateCardTwice, fateBank, fateRefundPart, fateCard, fatePartCheck, fateCardTwice,
	fateOverdue, fateCard, fateCancelled, fateCardTwice, fateRefundPart, fateCardTwice, fateDraft, fatePartCard, fateCardTwice, fateOverdue,
	fateCheck, fateCardTwice, fateOpen, fatePartCard, fateOpen, fateCard, fateOpen, fateDraft, fateOpen, fateDraft,
}

// customers are the merchant's: cafés, offices and shops buying coffee.
var customers = []struct{ name, company, email string }{
	{"Dana Whitfield", "Whitfield & Co. Catering", "dana@whitfield.example.com"},
	{"Marcus Oyelaran", "Rose City Bikes", "marcus@rosecitybikes.example.com"},
	{"Priya Raman", "Hawthorne Dental", "office@hawthornedental.example.com"},
	{"Tom Becker", "Becker's Bakery", "tom@beckersbakery.example.com"},
	{"Lucía Ortega", "Ortega Design Studio", "lucia@ortegadesign.example.com"},
	{"Sam Nguyen", "Pearl District Yoga", "sam@pearlyoga.example.com"},
	{"Hannah Kowalski", "Kowalski Law", "hannah@kowalskilaw.example.com"},
	{"Jamal Carter", "Carter Coworking", "jamal@cartercowork.example.com"},
	{"Emily Sato", "Sato Flowers", "emily@satoflowers.example.com"},
	{"Owen MacLeod", "MacLeod Books", "owen@macleodbooks.example.com"},
	{"Grace Liu", "Northeast Climbing", "grace@neclimbing.example.com"},
	{"Rafael Silva", "Silva Architects", "rafael@silvaarch.example.com"},
}

// products are what the roaster sells, by the unit, in cents.
var products = []struct {
	name string
	cost int64
}{
	{"House espresso, 5 lb bag", 6800},
	{"Ethiopia Guji, 2 lb bag", 3600},
	{"Swiss water decaf, 5 lb bag", 7200},
	{"Cold brew concentrate, 1 gal", 2800},
	{"Drip blend, 5 lb bag", 5800},
	{"Barista training, per hour", 8500},
	{"Grinder service", 12000},
}

// demoCard is the simulator's approving card, valid for years.
func demoCard(now time.Time, name string) processor.Card {
	exp := now.AddDate(3, 0, 0)
	return processor.Card{Number: processor.TestCardApprove, Expiry: fmt.Sprintf("%02d%02d", int(exp.Month()), exp.Year()%100),
		CVV: "123", Name: name}
}

// activity makes the merchant's past through the domain stores, each step
// at its moment on the clock.
type activity struct {
	a     *app.App
	clock Clock
	org   uuid.UUID
	actor invoice.Actor
	base  time.Time // the clock when the demo began
	// day is the day (back from base) the clock is on; settle lists
	// those a card payment was made on.
	day    int
	settle []int
}

// at moves the clock to minute m of the day days back from base (each
// day's moments 3 h before base's time of day, so that today's are past).
func (x *activity) at(days, m int) time.Time {
	t := x.base.AddDate(0, 0, -days).Add(-3*time.Hour + time.Duration(m)*time.Minute)
	x.clock.Advance(t.Sub(x.clock.Now()))
	x.day = days
	return t
}

// card marks the clock's day as one with a card payment, whose batch is
// settled at its end.
func (x *activity) card() {
	if !slices.Contains(x.settle, x.day) {
		x.settle = append(x.settle, x.day)
	}
}

// step is something done to an invoice days back from base.
type step struct {
	days, order int
	do          func(ctx context.Context) error
}

// SeedActivity gives the demo merchant (made by Seed, its Owner the
// actor) its last ActivityDays days: 12 customers, an invoice in each of
// fates (every status: drafts, open, overdue, part paid, paid, refunded,
// cancelled) with card payments (one declined), recorded payments and
// refunds, each day's card payments settled into deposits, and one
// monthly recurring invoice starting next month. Every step is the domain
// stores' own, at its moment on clock, which is where it began at the
// end. The same call makes the same activity.
func SeedActivity(ctx context.Context, a *app.App, clock Clock, merchant uuid.UUID) (err error) {
	x := &activity{a: a, clock: clock, org: merchant, actor: invoice.Actor{OrganizationID: merchant, Name: "Demo Owner"}, base: clock.Now()}
	defer func() { clock.Advance(x.base.Sub(clock.Now())) }()
	mids, err := a.Directory.MerchantAccounts(ctx, merchant, nil)
	if err != nil || len(mids) < 2 {
		return fmt.Errorf("demo: the merchant's MIDs: %w", err)
	}
	x.at(ActivityDays, 0)
	var people []customer.Customer
	for _, c := range customers {
		made, _, err := a.Customers.Create(ctx, customer.Actor{OrganizationID: merchant},
			customer.Fields{Email: c.email, Name: &c.name, Company: &c.company}, nil)
		if err != nil {
			return fmt.Errorf("demo: customer %s: %w", c.email, err)
		}
		people = append(people, made)
	}

	var steps []step
	// cardDay is a day for a card payment wanted on day want, made on day
	// made or later: want, or the nearest after it (up to 3 days) or
	// before it with no card payment yet, so that deposits fall on most
	// days.
	used := map[int]bool{}
	cardDay := func(want, made int) int {
		d := want
		for _, c := range []int{want, want - 1, want - 2, want - 3, want + 1, want + 2} {
			if c >= 0 && c <= made && !used[c] {
				d = c
				break
			}
		}
		used[d] = true
		return d
	}
	for i, fate := range fates {
		made := ActivityDays - 1 - i*3/2 // 59 days back to 1
		mid := mids[0].ID
		if i%4 == 3 {
			mid = mids[1].ID
		}
		lines, amount := linesOf(i)
		d := invoice.Draft{MerchantAccountID: mid, InvoiceNumber: fmt.Sprintf("BF-%04d", 1001+i), Amount: amount,
			Lines: lines, CustomerID: &people[i%len(people)].ID, AsDraft: fate == fateDraft}
		if fate != fateDraft {
			send, due := true, x.base.AddDate(0, 0, 14-made)
			if fate == fateOpen {
				due = x.base.AddDate(0, 0, 30-made)
			}
			due = time.Date(due.Year(), due.Month(), due.Day(), 0, 0, 0, 0, time.UTC)
			d.Send, d.DueDate = &send, &due
		}
		var inv invoice.Invoice
		steps = append(steps, step{made, i, func(ctx context.Context) (err error) {
			inv, _, err = a.Invoices.Create(ctx, x.actor, d, nil)
			return err
		}})
		paid := max(made-1-i%3, 0) // the day of its payment
		later := func() int {      // the day of a second payment or a refund
			return cardDay(max(paid-2, 0), max(paid-1, 0))
		}
		if slices.Contains(cardFates, fate) {
			paid = cardDay(paid, made)
		}
		var sale uuid.UUID
		pay := func(days int, share int64, number string) step {
			return step{days, i, func(ctx context.Context) error {
				id, err := x.pay(ctx, inv.ID, share, number)
				if sale == uuid.Nil {
					sale = id
				}
				return err
			}}
		}
		record := func(days int, share int64, method, ref string) step {
			return step{days, i, func(ctx context.Context) error { return x.record(ctx, inv.ID, share, method, ref) }}
		}
		switch fate {
		case fateCard:
			steps = append(steps, pay(paid, 100, processor.TestCardApprove))
		case fateDeclined:
			steps = append(steps, pay(paid, 100, processor.TestCardDecline), pay(paid, 100, processor.TestCardApprove))
		case fateCardTwice:
			steps = append(steps, pay(paid, 50, processor.TestCardApprove), pay(later(), 100, processor.TestCardApprove))
		case fatePartCard:
			steps = append(steps, pay(paid, 40, processor.TestCardApprove))
		case fatePartCheck:
			steps = append(steps, record(paid, 50, invoice.MethodCheck, fmt.Sprintf("Check %d", 2041+i)))
		case fateCheck:
			steps = append(steps, record(paid, 100, invoice.MethodCheck, fmt.Sprintf("Check %d", 2041+i)))
		case fateCash:
			steps = append(steps, record(paid, 100, invoice.MethodCash, ""))
		case fateBank:
			steps = append(steps, record(paid, 100, invoice.MethodBankTransfer, fmt.Sprintf("ACH %d", 880310+i)))
		case fateRefundPart, fateRefundAll:
			reason, share := "Two bags arrived damaged", int64(30)
			if fate == fateRefundAll {
				reason, share = "Order sent to the wrong address; sent again on a new invoice", 100
			}
			steps = append(steps, pay(paid, 100, processor.TestCardApprove), step{later(), i, func(ctx context.Context) error {
				return x.refund(ctx, sale, share, reason)
			}})
		case fateCancelled:
			steps = append(steps, step{paid, i, func(ctx context.Context) error {
				_, err := a.Invoices.Cancel(ctx, x.actor, inv.ID)
				return err
			}})
		}
	}
	// Oldest first; on a day, the invoices in their order, each making
	// its steps in turn.
	slices.SortStableFunc(steps, func(p, q step) int {
		if p.days != q.days {
			return q.days - p.days
		}
		return p.order - q.order
	})
	x.day = -1
	minute := 0 // of the day's steps, two apart
	for _, s := range steps {
		if s.days != x.day {
			if err := x.settleDay(ctx); err != nil {
				return err
			}
			minute = 0
		}
		x.at(s.days, minute)
		minute += 2
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("demo: invoice BF-%04d (%s): %w", 1001+s.order, fates[s.order], err)
		}
	}
	if err := x.settleDay(ctx); err != nil {
		return err
	}

	// A monthly invoice to a coworking space, from the first of next month.
	x.at(30, 0)
	next := x.base.AddDate(0, 1, 0)
	lines, amount := linesOf(2)
	_, _, err = a.Recurring.Create(ctx, merchant, recurring.Terms{MerchantAccountID: mids[0].ID, CustomerID: people[7].ID,
		Prefix: "BF-M", Amount: amount, Lines: lines, DueDays: 14, Send: true},
		recurring.Schedule{StartOn: time.Date(next.Year(), next.Month(), 1, 0, 0, 0, 0, time.UTC), Interval: recurring.Month, Count: 1}, nil)
	if err != nil {
		return fmt.Errorf("demo: the recurring invoice: %w", err)
	}
	return nil
}

// settleDay closes the batches of the clock's day, if it had card
// payments, at its end.
func (x *activity) settleDay(ctx context.Context) error {
	if !slices.Contains(x.settle, x.day) {
		return nil
	}
	x.at(x.day, 150)
	if _, err := x.a.Payments.SettleOrganization(ctx, x.org, slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("demo: settle: %w", err)
	}
	return nil
}

// linesOf are invoice i's lines, one to three of the products, and their
// total.
func linesOf(i int) ([]invoice.Line, apd.Decimal) {
	var lines []invoice.Line
	var total int64
	for n := range 1 + i%3 {
		p := products[(i*3+n*2)%len(products)]
		q := int64(1 + (i+n)%4)
		if p.cost > 8000 {
			q = 1
		}
		lines = append(lines, invoice.Line{Description: p.name, Quantity: *apd.New(q, 0), UnitCost: *apd.New(p.cost, -2)})
		total += q * p.cost
	}
	return lines, *apd.New(total, -2)
}

// share is percent of amount (all of it at 100), to the cent, rounded
// down.
func share(amount apd.Decimal, percent int64) (apd.Decimal, error) {
	if percent == 100 {
		return amount, nil
	}
	var out apd.Decimal
	c := apd.BaseContext.WithPrecision(34)
	c.Rounding = apd.RoundDown
	_, err := c.Mul(&out, &amount, apd.New(percent, -2))
	if err == nil {
		_, err = c.Quantize(&out, &out, -2)
	}
	return out, err
}

// pay pays percent of the invoice's balance with the card numbered number,
// as its pay page would, and gives the sale's id.
func (x *activity) pay(ctx context.Context, id uuid.UUID, percent int64, number string) (uuid.UUID, error) {
	inv, err := x.a.Invoices.Get(ctx, x.org, id)
	if err != nil {
		return uuid.Nil, err
	}
	amount, err := share(inv.Balance(), percent)
	if err != nil {
		return uuid.Nil, err
	}
	card := demoCard(x.clock.Now(), *inv.CustomerName)
	card.Number = number
	out, err := x.a.Payments.Pay(ctx, inv, payment.Request{AttemptID: uuid.New(), Card: card, Amount: amount, Version: inv.Version})
	if err != nil {
		return uuid.Nil, err
	}
	x.card()
	if !out.Approved {
		return uuid.Nil, nil
	}
	return out.Payment.ID, nil
}

// record records a payment of percent of the balance made outside the card.
func (x *activity) record(ctx context.Context, id uuid.UUID, percent int64, method, ref string) error {
	inv, err := x.a.Invoices.Get(ctx, x.org, id)
	if err != nil {
		return err
	}
	amount, err := share(inv.Balance(), percent)
	if err != nil {
		return err
	}
	p := invoice.RecordedPayment{Amount: amount, Method: method}
	if ref != "" {
		p.Reference = &ref
	}
	_, _, err = x.a.Invoices.RecordPayment(ctx, x.actor, id, p, nil)
	return err
}

// refund refunds percent of the sale.
func (x *activity) refund(ctx context.Context, sale uuid.UUID, percent int64, reason string) error {
	p, err := x.a.Payments.CardPayment(ctx, x.org, sale)
	if err != nil {
		return err
	}
	amount, err := share(p.Amount, percent)
	if err != nil {
		return err
	}
	if _, _, err := x.a.Payments.Refund(ctx, payment.RefundRequest{Actor: x.actor, SaleID: sale, Amount: &amount, Reason: &reason}); err != nil {
		return err
	}
	x.card()
	return nil
}
