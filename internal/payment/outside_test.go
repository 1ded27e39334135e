package payment

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/processor"
)

// No transaction is open, and no connection held, while the processor is
// asked: with a pool of one connection, the database answers others while
// a pay, a refund, a saved card's removal or a batch's settlement waits at
// the processor.
func TestNothingHeldWhileTheProcessorIsAsked(t *testing.T) {
	for _, c := range []struct {
		name string
		// prepare makes what op needs; op then waits at the processor.
		prepare func(t *testing.T, f *fixture) func() error
	}{
		{"pay", func(t *testing.T, f *fixture) func() error {
			inv := f.invoice(t, "10.00", "0", invoice.Open)
			return func() error { _, err := f.pay(inv, processor.TestCardApprove, "10.00"); return err }
		}},
		{"refund", func(t *testing.T, f *fixture) func() error {
			sale := f.sale(t, "10.00")
			return func() error { _, _, err := f.refundOf(sale, nil, nil); return err }
		}},
		{"saved card removal", func(t *testing.T, f *fixture) func() error {
			inv := f.invoice(t, "10.00", "0", invoice.Open)
			_, err := f.svc.Pay(context.Background(), inv, Request{AttemptID: uuid.New(), Version: inv.Version, Amount: dec("10.00"), SaveCard: true,
				Card: processor.Card{Number: processor.TestCardApprove, Expiry: "1299", CVV: "123", Name: "Dana Whitfield"}})
			if err != nil {
				t.Fatal(err)
			}
			var card uuid.UUID
			if err := f.db.Get(&card, `SELECT id FROM saved_cards WHERE organization_id = $1`, f.org); err != nil {
				t.Fatal(err)
			}
			return func() error { return f.svc.DeleteSavedCard(context.Background(), f.org, card, nil) }
		}},
		{"settlement", func(t *testing.T, f *fixture) func() error {
			f.sale(t, "10.00")
			return func() error {
				made, err := f.svc.SettleOrganization(context.Background(), f.org, slog.New(slog.DiscardHandler))
				if err == nil && len(made) != 1 {
					t.Errorf("%d deposits made, want 1", len(made))
				}
				return err
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 1)
			op := c.prepare(t, f)
			f.gate.held.Store(true)
			done := make(chan error, 1)
			go func() { done <- op() }()
			f.gate.waitReached(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := f.db.ExecContext(ctx, `SELECT 1`); err != nil {
				t.Errorf("the database while the %s waits at the processor: %v", c.name, err)
			}
			f.gate.release <- struct{}{}
			if err := <-done; err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		})
	}
}
