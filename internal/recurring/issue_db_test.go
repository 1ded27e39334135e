package recurring

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// noCards: these tests make no card payment.
type noCards struct{}

func (noCards) InvoiceSales(context.Context, sqlx.QueryerContext, uuid.UUID, uuid.UUID) ([]invoice.Payment, error) {
	return nil, nil
}

func (noCards) SavedCardsOf(context.Context, sqlx.QueryerContext, uuid.UUID, uuid.UUID) ([]invoice.SavedCard, error) {
	return nil, nil
}

func (noCards) ChargesUnderWay(context.Context, sqlx.QueryerContext, uuid.UUID) (bool, error) {
	return false, nil
}

// shop is a merchant with a MID in New York, its invoices and its series
// on a clock the test moves.
type shop struct {
	db       *sqlx.DB
	org      uuid.UUID
	mid      uuid.UUID
	customer uuid.UUID
	now      time.Time
	mu       sync.Mutex
	invoices *invoice.Store
	store    *Store
	events   *event.Store
}

var newYork = must(time.LoadLocation("America/New_York"))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func newShop(t *testing.T, now time.Time) *shop {
	t.Helper()
	ctx := context.Background()
	// A database of its own: the loop issues every organization's series.
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dir := &directory.Store{DB: db}
	org, err := dir.CreateOrganization(ctx, auth.KindMerchant, "Dana's Bakery", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := dir.CreateLocation(ctx, org.ID, directory.NewLocation{Name: "Main Street", TimeZone: "America/New_York",
		AddressLine1: "1 Main St", City: "New York", State: "NY", PostalCode: "10001"})
	if err != nil {
		t.Fatal(err)
	}
	mid, err := dir.CreateMID(ctx, org.ID, loc.ID, fmt.Sprintf("4961%08d", rand.IntN(1e8)))
	if err != nil {
		t.Fatal(err)
	}
	s := &shop{db: db, org: org.ID, mid: mid.ID, now: now}
	err = postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		c, err := customer.Ensure(ctx, tx, org.ID, "pat@example.com", nil, nil, nil, now)
		s.customer = c.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.invoices, s.store = s.stores()
	s.events = &event.Store{DB: db, Now: s.clock}
	return s
}

func (s *shop) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *shop) set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = t
}

// stores are an instance's stores: another instance's are another pair.
func (s *shop) stores() (*invoice.Store, *Store) {
	links, err := invoice.NewPayLinks(make([]byte, 32))
	if err != nil {
		panic(err)
	}
	inv := &invoice.Store{DB: s.db, Now: s.clock, PublicURL: "https://pay.example", PayLinks: links, Cards: noCards{}}
	return inv, &Store{DB: s.db, Now: s.clock, Invoices: inv}
}

func dec(s string) apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic(err)
	}
	return *d
}

func (s *shop) terms() Terms {
	return Terms{MerchantAccountID: s.mid, CustomerID: s.customer, Prefix: "RET", Amount: dec("500.00"),
		Lines: []invoice.Line{{Description: "Retainer", Quantity: dec("1"), UnitCost: dec("500.00")}}, DueDays: 14, Send: true}
}

func (s *shop) create(t *testing.T, sc Schedule) Series { t.Helper(); return s.createAs(t, "RET", sc) }

// createAs is create with the invoices numbered from prefix.
func (s *shop) createAs(t *testing.T, prefix string, sc Schedule) Series {
	t.Helper()
	tm := s.terms()
	tm.Prefix = prefix
	sr, _, err := s.store.Create(context.Background(), s.org, tm, sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sr
}

// at is 00:00 of day in New York plus d.
func at(day string, d time.Duration) time.Time { return DueAt(dayOf(day), newYork).Add(d) }

func dayOf(s string) time.Time { return must(time.Parse(time.DateOnly, s)) }

func (s *shop) issue(t *testing.T, st *Store) Issued {
	t.Helper()
	done, errs := st.IssueDue(context.Background())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return done
}

// issued are the series' invoices: number → due date.
func (s *shop) issued(t *testing.T) map[string]string {
	t.Helper()
	list, _, err := s.invoices.List(context.Background(), s.org, invoice.Filter{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, inv := range list {
		if _, dup := out[inv.InvoiceNumber]; dup {
			t.Fatalf("invoice %s issued twice", inv.InvoiceNumber)
		}
		out[inv.InvoiceNumber] = inv.DueDate.Format(time.DateOnly)
		if inv.SentAt == nil {
			t.Fatalf("invoice %s not sent", inv.InvoiceNumber)
		}
	}
	return out
}

func (s *shop) get(t *testing.T, id uuid.UUID) Series {
	t.Helper()
	sr, err := s.store.Get(context.Background(), s.org, id)
	if err != nil {
		t.Fatal(err)
	}
	return sr
}

// TestIssuedOnTheDayWithinTheMinute: nothing before 00:00 of the day in
// the location's zone, the invoice at 00:00 on, numbered and due as
// decided, and the series' counts and next days follow.
func TestIssuedOnTheDayWithinTheMinute(t *testing.T) {
	s := newShop(t, at("2027-01-20", 15*time.Hour))
	sr := s.create(t, Schedule{StartOn: dayOf("2027-01-31"), Interval: Month, Count: 1})
	s.set(at("2027-01-31", -time.Second))
	if done := s.issue(t, s.store); done.Issued != 0 {
		t.Fatalf("issued before the day: %+v", done)
	}
	s.set(at("2027-01-31", 0))
	if done := s.issue(t, s.store); done.Issued != 1 {
		t.Fatalf("at 00:00 in New York: %+v", done)
	}
	if got := s.issued(t); len(got) != 1 || got["RET-0001"] != "2027-02-14" {
		t.Fatalf("invoices %v, want RET-0001 due 2027-02-14", got)
	}
	got := s.get(t, sr.ID)
	if got.IssuedCount != 1 || got.LastInvoiceID == nil {
		t.Fatalf("series after its first: %+v", got)
	}
	if up := got.Upcoming(); len(up) != 3 || !up[0].Equal(dayOf("2027-02-28")) || !up[1].Equal(dayOf("2027-03-31")) {
		t.Fatalf("upcoming %v", up)
	}
	types := s.eventTypes(t)
	for _, want := range []string{event.RecurringInvoiceCreated.Name, event.InvoiceCreated.Name, event.InvoiceSent.Name, event.RecurringInvoiceIssued.Name} {
		if types[want] != 1 {
			t.Fatalf("events %v: want one %s", types, want)
		}
	}
}

func (s *shop) eventTypes(t *testing.T) map[string]int {
	t.Helper()
	var names []string
	if err := s.db.Select(&names, `SELECT type FROM events WHERE organization_id = $1`, s.org); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, n := range names {
		out[n]++
	}
	return out
}

// TestTwoInstancesIssueEachOccurrenceOnce: two instances' stores issue the
// same due occurrences at once; each makes one invoice.
func TestTwoInstancesIssueEachOccurrenceOnce(t *testing.T) {
	s := newShop(t, at("2027-03-01", 9*time.Hour))
	const series = 6
	for i := range series {
		s.createAs(t, fmt.Sprintf("S%d", i), Schedule{StartOn: dayOf("2027-03-02"), Interval: Week, Count: 1})
	}
	s.set(at("2027-03-02", 30*time.Second))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total Issued
	)
	for range 2 {
		_, st := s.stores()
		wg.Go(func() {
			done, errs := st.IssueDue(context.Background())
			if len(errs) > 0 {
				t.Error(errs)
			}
			mu.Lock()
			total.Issued += done.Issued
			mu.Unlock()
		})
	}
	wg.Wait()
	var invoices int
	if err := s.db.Get(&invoices, `SELECT count(*) FROM invoices WHERE organization_id = $1`, s.org); err != nil {
		t.Fatal(err)
	}
	if total.Issued != series || invoices != series {
		t.Fatalf("issued %d, %d invoices; want %d of each", total.Issued, invoices, series)
	}
	// The claim holds where the series' row does not: one whose next
	// occurrence is set back (as by a write lost to a failover) does not
	// issue it again.
	if _, err := s.db.Exec(`UPDATE recurring_invoices SET next_n = 0, next_due_at = $2 WHERE organization_id = $1`,
		s.org, at("2027-03-02", 0)); err != nil {
		t.Fatal(err)
	}
	if done := s.issue(t, s.store); done.Issued != 0 {
		t.Fatalf("issued again: %+v", done)
	}
	if err := s.db.Get(&invoices, `SELECT count(*) FROM invoices WHERE organization_id = $1`, s.org); err != nil || invoices != series {
		t.Fatalf("%d invoices after a second pass (%v)", invoices, err)
	}
}

// TestRestartAfterTwoAndFourDays: an instance down 2 days issues the
// occurrence it missed; down 4 days, it skips it and counts it.
func TestRestartAfterTwoAndFourDays(t *testing.T) {
	s := newShop(t, at("2027-01-20", 15*time.Hour))
	sr := s.create(t, Schedule{StartOn: dayOf("2027-01-31"), Interval: Month, Count: 1})
	s.set(at("2027-02-02", time.Hour)) // 2 days and an hour late
	if done := s.issue(t, s.store); done.Issued != 1 || done.Skipped != 0 {
		t.Fatalf("after 2 days: %+v", done)
	}
	s.set(at("2027-03-04", time.Minute)) // Feb 28's, 4 days late
	_, restarted := s.stores()
	if done := s.issue(t, restarted); done.Issued != 0 || done.Skipped != 1 {
		t.Fatalf("after 4 days: %+v", done)
	}
	got := s.get(t, sr.ID)
	if got.IssuedCount != 1 || got.SkippedCount != 1 {
		t.Fatalf("counts: issued %d, skipped %d", got.IssuedCount, got.SkippedCount)
	}
	if next, _ := got.NextOn(); !next.Equal(dayOf("2027-03-31")) {
		t.Fatalf("next %v, want 2027-03-31 (never drifting from startOn)", next)
	}
	if s.eventTypes(t)[event.RecurringInvoiceSkipped.Name] != 1 {
		t.Fatal("no recurring_invoice.skipped event")
	}
	s.set(at("2027-03-31", 0))
	s.issue(t, s.store)
	if got := s.issued(t); len(got) != 2 || got["RET-0002"] != "2027-04-14" {
		t.Fatalf("invoices %v", got)
	}
}

// TestPauseAndResume: nothing is issued while paused; on resume the days
// passed are passed over and nothing is issued twice.
func TestPauseAndResume(t *testing.T) {
	ctx := context.Background()
	s := newShop(t, at("2027-03-01", 9*time.Hour))
	sr := s.create(t, Schedule{StartOn: dayOf("2027-03-01"), Interval: Week, Count: 1})
	s.issue(t, s.store)
	paused := Paused
	if _, err := s.store.Update(ctx, s.org, sr.ID, Change{Status: &paused}); err != nil {
		t.Fatal(err)
	}
	s.set(at("2027-03-22", 10*time.Hour))
	if done := s.issue(t, s.store); done != (Issued{}) {
		t.Fatalf("issued while paused: %+v", done)
	}
	active := Active
	resumed, err := s.store.Update(ctx, s.org, sr.ID, Change{Status: &active})
	if err != nil {
		t.Fatal(err)
	}
	if next, _ := resumed.NextOn(); !next.Equal(dayOf("2027-03-22")) {
		t.Fatalf("next on resume %v, want today 2027-03-22", next)
	}
	for range 2 {
		s.issue(t, s.store)
	}
	if got := s.issued(t); len(got) != 2 || got["RET-0002"] != "2027-04-05" {
		t.Fatalf("invoices %v: want RET-0001 and today's RET-0002 only", got)
	}
	if got := s.get(t, sr.ID); got.SkippedCount != 0 || got.IssuedCount != 2 {
		t.Fatalf("counts after resume: %+v", got)
	}
}

// TestEndsAfterEndAfterInvoices and on DELETE: nothing more is issued.
func TestEnds(t *testing.T) {
	ctx := context.Background()
	s := newShop(t, at("2027-03-01", 9*time.Hour))
	two := 2
	sr := s.create(t, Schedule{StartOn: dayOf("2027-03-01"), Interval: Week, Count: 1, EndAfter: &two})
	s.issue(t, s.store)
	s.set(at("2027-03-08", 0))
	s.issue(t, s.store)
	if got := s.get(t, sr.ID); got.Status != Ended || len(got.Upcoming()) != 0 {
		t.Fatalf("after its 2 invoices: %s, upcoming %v", got.Status, got.Upcoming())
	}
	other := s.createAs(t, "OTHER", Schedule{StartOn: dayOf("2027-03-08"), Interval: Week, Count: 1})
	if _, err := s.store.End(ctx, s.org, other.ID); err != nil {
		t.Fatal(err)
	}
	s.set(at("2027-03-15", 0))
	s.issue(t, s.store)
	if got := s.issued(t); len(got) != 2 {
		t.Fatalf("invoices %v", got)
	}
	paused := Paused
	if _, err := s.store.Update(ctx, s.org, other.ID, Change{Status: &paused}); !rule.Is(err, rule.Unprocessable) {
		t.Fatalf("changing an ended series: %v", err)
	}
}

// TestRefusedWritesNothing: each refusal is keyed by the field as sent.
func TestRefusedWritesNothing(t *testing.T) {
	s := newShop(t, at("2027-03-01", 9*time.Hour))
	one := 1
	end := dayOf("2027-06-01")
	cases := []struct {
		name  string
		edit  func(*Terms, *Schedule)
		field string
	}{
		{"startOn yesterday in New York", func(_ *Terms, sc *Schedule) { sc.StartOn = dayOf("2027-02-28") }, "startOn"},
		{"both ends", func(_ *Terms, sc *Schedule) { sc.EndAfter, sc.EndOn = &one, &end }, "endOn"},
		{"intervalCount 0", func(_ *Terms, sc *Schedule) { sc.Count = 0 }, "intervalCount"},
		{"intervalCount 13", func(_ *Terms, sc *Schedule) { sc.Count = 13 }, "intervalCount"},
		{"an unknown interval", func(_ *Terms, sc *Schedule) { sc.Interval = "day" }, "interval"},
		{"lines that do not add up", func(tm *Terms, _ *Schedule) { tm.Amount = dec("499.99") }, "lines"},
	}
	if _, _, err := s.store.Create(context.Background(), s.org, func() Terms { tm := s.terms(); tm.CustomerID = uuid.New(); return tm }(),
		Schedule{StartOn: dayOf("2027-03-01"), Interval: Month, Count: 1}, nil); !rule.Is(err, rule.Unprocessable) || rule.As(err).Field != "customerId" {
		t.Fatalf("an unknown customer: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm, sc := s.terms(), Schedule{StartOn: dayOf("2027-03-01"), Interval: Month, Count: 1}
			c.edit(&tm, &sc)
			_, _, err := s.store.Create(context.Background(), s.org, tm, sc, nil)
			re := rule.As(err)
			if re == nil || re.Kind != rule.Invalid || len(re.Fields[c.field]) == 0 {
				t.Fatalf("refusal %v, want one keyed %s", err, c.field)
			}
		})
	}
	var n int
	if err := s.db.Get(&n, `SELECT count(*) FROM recurring_invoices WHERE organization_id = $1`, s.org); err != nil || n != 0 {
		t.Fatalf("%d series written (%v)", n, err)
	}
	// A prefix once per organization, ended series too: their numbers
	// would meet.
	first := s.create(t, Schedule{StartOn: dayOf("2027-03-01"), Interval: Month, Count: 1})
	if _, err := s.store.End(context.Background(), s.org, first.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.store.Create(context.Background(), s.org, s.terms(), Schedule{StartOn: dayOf("2027-03-01"), Interval: Week, Count: 1}, nil)
	if re := rule.As(err); re == nil || re.Kind != rule.Unprocessable || re.Field != "invoiceNumberPrefix" {
		t.Fatalf("a prefix used before: %v", err)
	}
}

// TestDueAcrossTheSpringChange: New York's clocks go forward on
// 2027-03-14, so the Monday after is due at 04:00 UTC, not 05:00 as the
// Monday before.
func TestDueAcrossTheSpringChange(t *testing.T) {
	s := newShop(t, time.Date(2027, 3, 8, 4, 0, 0, 0, time.UTC))
	s.create(t, Schedule{StartOn: dayOf("2027-03-08"), Interval: Week, Count: 1})
	for _, c := range []struct {
		at   time.Time
		want int
	}{
		{time.Date(2027, 3, 8, 4, 59, 59, 0, time.UTC), 0}, // Mar 7, 23:59:59 EST
		{time.Date(2027, 3, 8, 5, 0, 30, 0, time.UTC), 1},
		{time.Date(2027, 3, 15, 3, 59, 59, 0, time.UTC), 0}, // Mar 14, 23:59:59 EDT
		{time.Date(2027, 3, 15, 4, 0, 30, 0, time.UTC), 1},
	} {
		s.set(c.at)
		if done := s.issue(t, s.store); done.Issued != c.want {
			t.Fatalf("at %s: issued %d, want %d", c.at.Format(time.RFC3339), done.Issued, c.want)
		}
	}
	if got := s.issued(t); got["RET-0002"] != "2027-03-29" {
		t.Fatalf("invoices %v", got)
	}
}

// TestRunIssuesWithinItsInterval: the loop every instance runs issues a
// due occurrence within one poll interval, and stops with its context.
func TestRunIssuesWithinItsInterval(t *testing.T) {
	s := newShop(t, at("2027-03-01", 9*time.Hour))
	sr := s.create(t, Schedule{StartOn: dayOf("2027-03-02"), Interval: Week, Count: 1})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { s.store.Run(ctx, 20*time.Millisecond, slog.New(slog.DiscardHandler)); close(stopped) }()
	s.set(at("2027-03-02", time.Second))
	deadline := time.Now().Add(5 * time.Second)
	for s.get(t, sr.ID).IssuedCount == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not issued within 5 s of polls every 20 ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-stopped
}
