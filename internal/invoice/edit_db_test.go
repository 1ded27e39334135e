package invoice

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/rule"
)

// A draft keeps everything a made invoice keeps but is not sent, has no
// pay link and is not payable; finalizing opens it and sends its link.
func TestDraftIsFinalizedIntoAnOpenInvoice(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	d := s.draft("INV-D1", "12.30")
	d.AsDraft = true
	inv, _, err := s.store.Create(ctx, s.actor, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Status != InDraft || inv.SentAt != nil || inv.Version != 1 || s.store.Link(&inv) != "" || inv.Model("x", true).Link != nil {
		t.Fatalf("draft = %+v, want a draft at version 1, unsent, with no link", inv)
	}
	if _, err := s.store.ByPayToken(ctx, payToken(t, s.store, inv.ID)); !errors.Is(err, ErrNotFound) {
		t.Errorf("the draft's token reads %v, want ErrNotFound", err)
	}
	_, err = s.store.Send(ctx, s.actor, inv.ID)
	wantKind(t, err, rule.Conflict)
	_, err = s.store.Cancel(ctx, s.actor, inv.ID)
	wantKind(t, err, rule.Conflict)
	_, _, err = s.store.RecordPayment(ctx, s.actor, inv.ID, RecordedPayment{Amount: d.Amount, Method: MethodCash}, nil)
	wantKind(t, err, rule.Conflict)

	open, err := s.store.Finalize(ctx, s.actor, inv.ID, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if open.Status != Open || open.SentVia == nil || s.store.Link(&open) == "" || open.Version != 1 {
		t.Errorf("finalized = %+v, want open and sent", open)
	}
	if _, err := s.store.ByPayToken(ctx, payToken(t, s.store, inv.ID)); err != nil {
		t.Errorf("the finalized invoice's link: %v", err)
	}
	if types := s.eventTypes(t, inv.ID); !slices.Equal(types, []string{"invoice.created", "invoice.finalized", "invoice.sent"}) {
		t.Errorf("events = %v", types)
	}
	_, err = s.store.Finalize(ctx, s.actor, inv.ID, nil, nil)
	wantKind(t, err, rule.Conflict)
	wantKind(t, s.store.Delete(ctx, s.actor, inv.ID), rule.Conflict)
}

// Finalizing takes send and sendAt as creation does: send false sends
// nothing, sendAt schedules, both together are refused; a draft is never
// made with send true or a sendAt.
func TestFinalizeSendChoices(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	newDraft := func(number string) Invoice {
		d := s.draft(number, "5.00")
		d.AsDraft = true
		inv, _, err := s.store.Create(ctx, s.actor, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	quiet, err := s.store.Finalize(ctx, s.actor, newDraft("Q").ID, ptr(false), nil)
	if err != nil || quiet.Status != Open || quiet.SentAt != nil {
		t.Errorf("send false: %+v %v", quiet, err)
	}
	at := s.now.Add(48 * time.Hour)
	later, err := s.store.Finalize(ctx, s.actor, newDraft("L").ID, nil, &at)
	if err != nil || later.SentAt != nil || later.ScheduledSendAt == nil || !later.ScheduledSendAt.Equal(at) {
		t.Errorf("sendAt: %+v %v", later, err)
	}
	stillDraft := newDraft("B")
	_, err = s.store.Finalize(ctx, s.actor, stillDraft.ID, ptr(false), &at)
	wantField(t, err, "sendAt")
	past := s.now.Add(-time.Hour)
	_, err = s.store.Finalize(ctx, s.actor, stillDraft.ID, nil, &past)
	wantField(t, err, "sendAt")
	if got, _ := s.store.Get(ctx, s.actor.OrganizationID, stillDraft.ID); got.Status != InDraft {
		t.Errorf("refused finalize left %s", got.Status)
	}

	d := s.draft("X", "5.00")
	d.AsDraft, d.Send = true, ptr(true)
	_, _, err = s.store.Create(ctx, s.actor, d, nil)
	wantField(t, err, "send")
	d.Send, d.SendAt = nil, &at
	_, _, err = s.store.Create(ctx, s.actor, d, nil)
	wantField(t, err, "sendAt")
}

// Deleting a draft removes it and frees its idempotency key.
func TestDeleteDraft(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	d := s.draft("INV-DEL", "5.00")
	d.AsDraft = true
	key := "draft-key"
	inv, _, err := s.store.Create(ctx, s.actor, d, &key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.Delete(ctx, s.actor, inv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Get(ctx, s.actor.OrganizationID, inv.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted draft reads %v", err)
	}
	wantKind(t, s.store.Delete(ctx, s.actor, inv.ID), rule.NotFound)
	if types := s.eventTypes(t, inv.ID); !slices.Equal(types, []string{"invoice.created", "invoice.deleted"}) {
		t.Errorf("events = %v", types)
	}
	again, replayed, err := s.store.Create(ctx, s.actor, d, &key)
	if err != nil || replayed || again.ID == inv.ID {
		t.Errorf("the key after the delete: %v replayed %v", err, replayed)
	}
}

// A change replaces what it gives, clears what it gives as nil, keeps the
// rest, counts the version and obeys the rules of creation.
func TestUpdate(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	draft := s.draft("INV-U", "12.30")
	draft.PONumber, draft.CustomerName = ptr("PO-1"), ptr("Pat")
	inv, _, err := s.store.Create(ctx, s.actor, draft, nil)
	if err != nil {
		t.Fatal(err)
	}
	link := s.store.Link(&inv)
	lines := []Line{{Description: "Cakes", Quantity: d("3"), UnitCost: d("2.005")}, {Description: "Discount", Quantity: d("1"), UnitCost: d("-1")}}
	got, err := s.store.Update(ctx, s.actor, inv.ID, Change{To: Draft{Lines: lines, PONumber: nil, Memo: ptr("Thanks")},
		Given: map[string]bool{"lines": true, "poNumber": true, "memo": true}, IfMatch: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	// 3 × 2.005 = 6.015 → 6.02, less 1.00: the amount is the lines' total.
	wantMoney(t, "amount", got.Amount, "5.02")
	if got.Version != 2 || got.PONumber != nil || got.Memo == nil || *got.Memo != "Thanks" || got.CustomerName == nil ||
		len(got.Lines) != 2 || got.LineCount != 2 || s.store.Link(&got) != link {
		t.Errorf("changed = %+v", got)
	}
	if types := s.eventTypes(t, inv.ID); !slices.Equal(types, []string{"invoice.created", "invoice.sent", "invoice.updated"}) {
		t.Errorf("events = %v", types)
	}

	// Another version: nothing changes.
	_, err = s.store.Update(ctx, s.actor, inv.ID, Change{To: Draft{Memo: nil}, Given: map[string]bool{"memo": true}, IfMatch: []int{1}})
	wantKind(t, err, rule.Changed)
	// The rules of creation: amount and lines must agree, email required.
	_, err = s.store.Update(ctx, s.actor, inv.ID, Change{To: Draft{Amount: d("9.00")}, Given: map[string]bool{"amount": true}})
	wantField(t, err, "lines")
	_, err = s.store.Update(ctx, s.actor, inv.ID, Change{Given: map[string]bool{"customerEmail": true}})
	wantField(t, err, "customerEmail")
	_, err = s.store.Update(ctx, s.actor, inv.ID, Change{To: Draft{MerchantAccountID: uuid.New()}, Given: map[string]bool{"merchantAccountId": true}})
	wantKind(t, err, rule.Unprocessable)
	if _, _, err := s.store.Create(ctx, s.actor, s.draft("INV-OTHER", "1.00"), nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.store.Update(ctx, s.actor, inv.ID, Change{To: Draft{InvoiceNumber: "INV-OTHER"}, Given: map[string]bool{"invoiceNumber": true}})
	wantKind(t, err, rule.Unprocessable)
	// Without lines the amount is free.
	got, err = s.store.Update(ctx, s.actor, inv.ID, Change{To: Draft{Amount: d("9.00")}, Given: map[string]bool{"lines": true, "amount": true}})
	if err != nil || got.Version != 3 || got.LineCount != 0 {
		t.Fatalf("no lines: %+v %v", got, err)
	}
	wantMoney(t, "amount", got.Amount, "9.00")
	// Nothing given, nothing changed.
	same, err := s.store.Update(ctx, s.actor, inv.ID, Change{})
	if err != nil || same.Version != 3 {
		t.Errorf("empty change: version %d, %v", same.Version, err)
	}
	_, err = s.store.Update(ctx, Actor{OrganizationID: uuid.New(), Name: "x"}, inv.ID, Change{})
	wantKind(t, err, rule.NotFound)
}

// Once anything is paid or recorded, or a charge is under way, or the
// invoice is final, it cannot be changed.
func TestUpdateRefusedWithPayments(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	memo := Change{To: Draft{Memo: ptr("x")}, Given: map[string]bool{"memo": true}}

	recorded, _, err := s.store.Create(ctx, s.actor, s.draft("R", "10.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.store.RecordPayment(ctx, s.actor, recorded.ID, RecordedPayment{Amount: d("1.00"), Method: MethodCash}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.store.Update(ctx, s.actor, recorded.ID, memo)
	wantKind(t, err, rule.Conflict)
	if rule.As(err).Message != "An invoice with payments cannot be changed; cancel it and make a new one." {
		t.Errorf("message %q", rule.As(err).Message)
	}

	cancelled, _, err := s.store.Create(ctx, s.actor, s.draft("C", "10.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Cancel(ctx, s.actor, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.store.Update(ctx, s.actor, cancelled.ID, memo)
	wantKind(t, err, rule.Conflict)

	charging, _, err := s.store.Create(ctx, s.actor, s.draft("P", "10.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.store.Cards = chargeUnderWay{}
	_, err = s.store.Update(ctx, s.actor, charging.ID, memo)
	wantKind(t, err, rule.Conflict)
	if got, _ := s.store.Get(ctx, s.actor.OrganizationID, charging.ID); got.Version != 1 || got.Memo != nil {
		t.Errorf("refused change wrote %+v", got)
	}
}

// Two changes sent at once for the same version: one is made, the other
// refused, and the version grew by one.
func TestConcurrentUpdatesOfOneVersion(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	inv, _, err := s.store.Create(ctx, s.actor, s.draft("INV-C", "10.00"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.store.Update(ctx, s.actor, inv.ID, Change{To: Draft{Memo: ptr(uuid.NewString())},
					Given: map[string]bool{"memo": true}, IfMatch: []int{round + 1}})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !rule.Is(err, rule.Changed):
				t.Fatal(err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d changes made, want 1 (%v)", round, won, errs)
		}
	}
	if got, _ := s.store.Get(ctx, s.actor.OrganizationID, inv.ID); got.Version != 11 {
		t.Errorf("version %d, want 11", got.Version)
	}
}

// A send scheduled before a change sends the invoice as changed.
func TestScheduledSendAfterUpdate(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	draft := s.draft("INV-S", "10.00")
	draft.SendAt = ptr(s.now.Add(time.Hour))
	inv, _, err := s.store.Create(ctx, s.actor, draft, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Update(ctx, s.actor, inv.ID, Change{To: Draft{Amount: d("25.00")}, Given: map[string]bool{"amount": true, "lines": true}}); err != nil {
		t.Fatal(err)
	}
	s.now = s.now.Add(2 * time.Hour)
	if n, err := s.store.SendScheduled(ctx); err != nil || n != 1 {
		t.Fatalf("SendScheduled: %d %v", n, err)
	}
	bill, err := s.store.Bill(ctx, s.actor.OrganizationID, inv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bill.Amount != "$25.00" {
		t.Errorf("the message bills %s, want the changed $25.00", bill.Amount)
	}
}

// chargeUnderWay is payment's side of an invoice with a charge at the
// processor right now.
type chargeUnderWay struct{ noCards }

func (chargeUnderWay) ChargesUnderWay(context.Context, sqlx.QueryerContext, uuid.UUID) (bool, error) {
	return true, nil
}

// payToken is the token of the invoice's pay link.
func payToken(t *testing.T, s *Store, id uuid.UUID) string {
	t.Helper()
	var b strings.Builder
	s.PayLinks.writeToken(&b, id)
	return b.String()
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	e := rule.As(err)
	if e == nil || e.Kind != rule.Invalid || e.Fields[field] == nil {
		t.Fatalf("err = %v, want a refusal of %s", err, field)
	}
}
