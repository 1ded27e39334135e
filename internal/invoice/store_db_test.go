package invoice

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// shop is a merchant with one MID at an active location, and the store
// that keeps its invoices, on a clock the test moves.
type shop struct {
	store  *Store
	events *event.Store
	actor  Actor
	mid    uuid.UUID
	now    time.Time

	dir      *directory.Store
	location uuid.UUID
}

func newShop(t *testing.T) *shop {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dir := &directory.Store{DB: db}
	org, err := dir.CreateOrganization(ctx, auth.KindMerchant, "Dana's Bakery", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := dir.CreateLocation(ctx, org.ID, directory.NewLocation{Name: "Main Street", TimeZone: "America/Chicago",
		AddressLine1: "1 Main St", City: "Austin", State: "TX", PostalCode: "78701"})
	if err != nil {
		t.Fatal(err)
	}
	mid, err := dir.CreateMID(ctx, org.ID, loc.ID, fmt.Sprintf("4961%08d", rand.IntN(1e8)))
	if err != nil {
		t.Fatal(err)
	}
	links, err := NewPayLinks(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	s := &shop{dir: dir, location: loc.ID, actor: Actor{OrganizationID: org.ID, Name: "Billing key"}, mid: mid.ID,
		now: time.Date(2026, 3, 2, 15, 4, 5, 0, time.UTC)}
	clock := func() time.Time { return s.now }
	s.store = &Store{DB: db, Now: clock, PublicURL: "https://pay.example", PayLinks: links, Cards: noCards{}, Terminals: noCards{}}
	s.events = &event.Store{DB: db, Now: clock}
	return s
}

// draft is a one-line invoice of amount on the shop's MID.
func (s *shop) draft(number, amount string) Draft {
	return Draft{MerchantAccountID: s.mid, InvoiceNumber: number, Amount: d(amount),
		CustomerEmail: ptr("pat@example.com"), Lines: []Line{{Description: "Cakes", Quantity: d("1"), UnitCost: d(amount)}}}
}

// eventTypes lists the types of the invoice's events, oldest first.
func (s *shop) eventTypes(t *testing.T, id uuid.UUID) []string {
	t.Helper()
	list, _, err := s.events.List(context.Background(), s.actor.OrganizationID, []string{auth.PaymentsView}, event.Filter{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range slices.Backward(list) {
		if strings.Contains(string(e.Data), id.String()) {
			types = append(types, e.Type)
		}
	}
	return types
}

func wantKind(t *testing.T, err error, k rule.Kind) {
	t.Helper()
	if !rule.Is(err, k) {
		t.Fatalf("err = %v, want a refusal of kind %v", err, k)
	}
}

func wantMoney(t *testing.T, what string, got apd.Decimal, want string) {
	t.Helper()
	if got.Text('f') != want {
		t.Errorf("%s = %s, want %s", what, got.Text('f'), want)
	}
}

// A made invoice is open, its pay link queued at once; the next read shows
// it as made, with its lines, and a second one with its number is refused.
func TestCreateKeepsTheInvoiceAndSendsItsLink(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	inv, replayed, err := s.store.Create(ctx, s.actor, s.draft("INV-1", "12.30"), nil)
	if err != nil || replayed {
		t.Fatalf("Create: %v, replayed %v", err, replayed)
	}
	if inv.Status != Open || inv.SentVia == nil || *inv.SentVia != Email || inv.SentAt == nil || inv.CreatedByName != "Billing key" {
		t.Errorf("made = %+v, want open, sent by email, by Billing key", inv)
	}
	got, err := s.store.Get(ctx, s.actor.OrganizationID, inv.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantMoney(t, "amount", got.Amount, "12.30")
	wantMoney(t, "balance", got.Balance(), "12.30")
	if got.InvoiceNumber != "INV-1" || len(got.Lines) != 1 || got.Lines[0].Description != "Cakes" || got.MerchantAccountID != s.mid {
		t.Errorf("read = %+v, want INV-1 with its one line on its MID", got)
	}
	if types := s.eventTypes(t, inv.ID); !slices.Equal(types, []string{"invoice.created", "invoice.sent"}) {
		t.Errorf("events = %v, want invoice.created, invoice.sent", types)
	}

	_, _, err = s.store.Create(ctx, s.actor, s.draft("INV-1", "5.00"), nil)
	wantKind(t, err, rule.Unprocessable)
	if _, err := s.store.Get(ctx, uuid.New(), inv.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get from another organization: %v, want ErrNotFound", err)
	}
}

// Create refuses a MID of another organization and a deactivated
// location's, and makes nothing.
func TestCreateRefusesAnUnusableMID(t *testing.T) {
	s := newShop(t)
	other := newShop(t)
	ctx := context.Background()
	_, _, err := s.store.Create(ctx, s.actor, other.draft("INV-1", "5.00"), nil)
	wantKind(t, err, rule.Unprocessable)
	if _, err := s.dir.DeactivateLocation(ctx, s.location); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.store.Create(ctx, s.actor, s.draft("INV-1", "5.00"), nil)
	wantKind(t, err, rule.Unprocessable)
	list, _, err := s.store.List(ctx, s.actor.OrganizationID, Filter{}, 10, "")
	if err != nil || len(list) != 0 {
		t.Errorf("List = %d invoices, %v; want none", len(list), err)
	}
}

// A key sent again with the same draft answers the invoice already made;
// with another draft it is refused.
func TestCreateWithAKeyMakesOneInvoice(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	key := "order-7"
	first, _, err := s.store.Create(ctx, s.actor, s.draft("INV-7", "9.99"), &key)
	if err != nil {
		t.Fatal(err)
	}
	again, replayed, err := s.store.Create(ctx, s.actor, s.draft("INV-7", "9.99"), &key)
	if err != nil || !replayed || again.ID != first.ID {
		t.Errorf("repeat: %v, replayed %v, id %v; want the first invoice %v replayed", err, replayed, again.ID, first.ID)
	}
	_, _, err = s.store.Create(ctx, s.actor, s.draft("INV-8", "9.99"), &key)
	if !errors.Is(err, idempotency.ErrReused) {
		t.Errorf("key with another draft: %v, want idempotency.ErrReused", err)
	}
}

// Send sends the link again, at most MaxSends times a day in all; a
// cancelled invoice is not sent, nor cancelled twice.
func TestSendAndCancel(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	inv, _, err := s.store.Create(ctx, s.actor, s.draft("INV-2", "40.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= MaxSends; i++ {
		s.now = s.now.Add(time.Minute)
		sent, err := s.store.Send(ctx, s.actor, inv.ID)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if !sent.SentAt.Equal(s.now) {
			t.Errorf("send %d: sentAt %v, want %v", i, sent.SentAt, s.now)
		}
	}
	s.now = s.now.Add(time.Minute)
	_, err = s.store.Send(ctx, s.actor, inv.ID)
	wantKind(t, err, rule.Limited)
	if got, _ := s.store.Get(ctx, s.actor.OrganizationID, inv.ID); !got.SentAt.Equal(s.now.Add(-time.Minute)) {
		t.Errorf("after a refused send, sentAt = %v, want the last send's", got.SentAt)
	}
	if _, err := s.store.Send(ctx, Actor{OrganizationID: uuid.New()}, inv.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Send from another organization: %v, want ErrNotFound", err)
	}

	cancelled, err := s.store.Cancel(ctx, Actor{OrganizationID: s.actor.OrganizationID, Name: "Dana"}, inv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != Cancelled || cancelled.CancelledAt == nil || !cancelled.CancelledAt.Equal(s.now) ||
		cancelled.CancelledByName == nil || *cancelled.CancelledByName != "Dana" {
		t.Errorf("cancelled = %v at %v by %v, want cancelled now by Dana", cancelled.Status, cancelled.CancelledAt, cancelled.CancelledByName)
	}
	if got, _ := s.store.Get(ctx, s.actor.OrganizationID, inv.ID); got.Status != Cancelled {
		t.Errorf("read after cancel: %v", got.Status)
	}
	s.now = s.now.Add(SendWindow)
	_, err = s.store.Send(ctx, s.actor, inv.ID)
	wantKind(t, err, rule.Conflict)
	_, err = s.store.Cancel(ctx, s.actor, inv.ID)
	wantKind(t, err, rule.Conflict)
	types := s.eventTypes(t, inv.ID)
	if want := []string{"invoice.created", "invoice.sent", "invoice.sent", "invoice.sent", "invoice.sent", "invoice.sent",
		"invoice.cancelled"}; !slices.Equal(types, want) {
		t.Errorf("events = %v, want %v", types, want)
	}
}

// Recorded payments move the invoice to part_paid and paid; one above the
// balance is refused; removing one moves the invoice back.
func TestRecordAndRemovePayments(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	inv, _, err := s.store.Create(ctx, s.actor, s.draft("INV-3", "100.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	check := RecordedPayment{Amount: d("30"), Method: MethodCheck, Reference: ptr("1042")}
	part, replayed, err := s.store.RecordPayment(ctx, s.actor, inv.ID, check, nil)
	if err != nil || replayed {
		t.Fatalf("RecordPayment: %v, replayed %v", err, replayed)
	}
	if part.Status != PartPaid || len(part.Payments) != 1 || part.Payments[0].Method != MethodCheck ||
		*part.Payments[0].Reference != "1042" {
		t.Errorf("after 30.00 = %v with %+v, want part_paid with the check", part.Status, part.Payments)
	}
	wantMoney(t, "balance", part.Balance(), "70.00")

	_, _, err = s.store.RecordPayment(ctx, s.actor, inv.ID, RecordedPayment{Amount: d("70.01"), Method: MethodCash}, nil)
	wantKind(t, err, rule.Unprocessable)
	_, _, err = s.store.RecordPayment(ctx, s.actor, inv.ID, RecordedPayment{Amount: d("1"), Method: "barter"}, nil)
	wantKind(t, err, rule.Invalid)

	paid, _, err := s.store.RecordPayment(ctx, s.actor, inv.ID, RecordedPayment{Amount: d("70"), Method: MethodCash}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if paid.Status != Paid || paid.PaidAt == nil {
		t.Errorf("after the rest = %v, paidAt %v; want paid", paid.Status, paid.PaidAt)
	}
	wantMoney(t, "balance", paid.Balance(), "0.00")

	back, err := s.store.RemovePayment(ctx, s.actor, inv.ID, part.Payments[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if back.Status != PartPaid || back.PaidAt != nil || len(back.Payments) != 1 || back.Payments[0].Method != MethodCash {
		t.Errorf("after removing the check = %v, paidAt %v, %+v; want part_paid with the cash", back.Status, back.PaidAt, back.Payments)
	}
	wantMoney(t, "balance", back.Balance(), "30.00")
	if _, err := s.store.RemovePayment(ctx, s.actor, inv.ID, part.Payments[0].ID); !errors.Is(err, ErrPaymentNotFound) {
		t.Errorf("removing it again: %v, want ErrPaymentNotFound", err)
	}

	if _, err := s.store.Cancel(ctx, s.actor, inv.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.store.RemovePayment(ctx, s.actor, inv.ID, back.Payments[0].ID)
	wantKind(t, err, rule.Conflict)
	if got, _ := s.store.Get(ctx, s.actor.OrganizationID, inv.ID); got.Status != Cancelled || len(got.Payments) != 1 {
		t.Errorf("read = %v with %d payments, want cancelled with the cash", got.Status, len(got.Payments))
	}
	types := s.eventTypes(t, inv.ID)
	if want := []string{"invoice.created", "invoice.sent", "invoice.payment_recorded", "invoice.part_paid",
		"invoice.payment_recorded", "invoice.paid", "invoice.payment_removed", "invoice.cancelled"}; !slices.Equal(types, want) {
		t.Errorf("events = %v, want %v", types, want)
	}
}

// noCards is payment's side of an invoice when no card was used: these
// tests make no card payment (payment, which imports invoice, has its own).
type noCards struct{}

func (noCards) InvoiceSales(context.Context, sqlx.QueryerContext, uuid.UUID, uuid.UUID) ([]Payment, error) {
	return nil, nil
}

func (noCards) SavedCardsOf(context.Context, sqlx.QueryerContext, uuid.UUID, uuid.UUID) ([]SavedCard, error) {
	return nil, nil
}

func (noCards) ChargesUnderWay(context.Context, sqlx.QueryerContext, uuid.UUID) (bool, error) {
	return false, nil
}

func (noCards) PendingFor(context.Context, sqlx.QueryerContext, uuid.UUID) (bool, error) {
	return false, nil
}
