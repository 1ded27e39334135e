package invoice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// RecordedPayment is a payment made outside the card processor, as the
// merchant records it toward an invoice.
type RecordedPayment struct {
	Amount    apd.Decimal
	Method    string  // MethodCash, MethodCheck, MethodBankTransfer or MethodOther
	Reference *string // at most MaxReference characters, or nil
	// ReceivedAt is when the money came, not in the future; nil: now.
	ReceivedAt *time.Time
}

// MaxReference is the longest reference a recorded payment keeps, in characters.
const MaxReference = 100

// recordedMethods are the methods of payments recorded outside the card.
var recordedMethods = []string{MethodCash, MethodCheck, MethodBankTransfer, MethodOther}

// check refuses what no recorded payment may hold, and gives the amount
// in cents (10, "10" and "10.00" are one request) and the time in UTC.
func (p *RecordedPayment) check(now time.Time) error {
	v := fieldErrors{}
	if msg := AmountProblem(p.Amount); msg != "" {
		v.add("amount", "%s", msg)
	} else {
		p.Amount = cents(p.Amount)
	}
	known := false
	for _, m := range recordedMethods {
		known = known || p.Method == m
	}
	if !known {
		v.add("method", "must be one of: bank_transfer, cash, check, other")
	}
	if p.Reference != nil && (!utf8.ValidString(*p.Reference) || utf8.RuneCountInString(*p.Reference) > MaxReference) {
		v.add("reference", "must be text of at most %d characters", MaxReference)
	}
	if p.ReceivedAt != nil {
		if p.ReceivedAt.After(now) {
			v.add("receivedAt", "must not be in the future")
		} else {
			at := p.ReceivedAt.UTC()
			p.ReceivedAt = &at
		}
	}
	if len(v) > 0 {
		return rule.InvalidFields(v)
	}
	return nil
}

// RecordPayment records a payment made outside the card processor toward
// an open or part-paid invoice: the invoice moves as a card payment moves
// it (CheckPayment's rules: at most the balance), and invoice.payment_recorded
// is recorded with invoice.part_paid or invoice.paid. With an idempotency
// key (nil: none) a repeat of the same request answers the invoice as it
// is now (replayed true) and records nothing; the key with another request
// is idempotency.ErrReused; requests at once with one key record one.
func (s *Store) RecordPayment(ctx context.Context, actor Actor, invoiceID uuid.UUID, p RecordedPayment, key *string) (inv Invoice, replayed bool, err error) {
	if err := p.check(s.Now()); err != nil {
		return Invoice{}, false, err
	}
	// What was asked: a payment with no time and one at a time given are
	// different requests, as they record different times.
	k, err := idempotency.OptionalKey(key, invoiceID, p)
	if err != nil {
		return Invoice{}, false, err
	}
	id := uuid.Must(uuid.NewV7())
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		earlier, err := k.Claim(ctx, tx, actor.OrganizationID, idempotency.RecordPayment, id, now)
		if err != nil {
			return err
		}
		if earlier != uuid.Nil {
			replayed = true
			inv, err = s.read(ctx, tx, actor.OrganizationID, invoiceID)
			return err
		}
		l, err := Lock(ctx, tx, actor.OrganizationID, invoiceID)
		if err != nil {
			return err
		}
		received := now
		if p.ReceivedAt != nil {
			received = *p.ReceivedAt
		}
		if err := ApplyPayment(&l.Invoice, p.Amount, received); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO recorded_payments (id, organization_id, invoice_id, amount, method, reference,
				received_at, created_at, created_by_name)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			id, actor.OrganizationID, invoiceID, p.Amount.Text('f'), p.Method, p.Reference, received, now, actor.Name)
		if err != nil {
			return fmt.Errorf("invoice: unable to record payment: %w", err)
		}
		if err := l.Save(); err != nil {
			return err
		}
		if inv, err = s.read(ctx, tx, actor.OrganizationID, invoiceID); err != nil {
			return err
		}
		if err := s.appendPaymentEvent(ctx, tx, event.InvoicePaymentRecorded, inv, id, now); err != nil {
			return err
		}
		paid := event.InvoicePartPaid
		if inv.Status == Paid {
			paid = event.InvoicePaid
		}
		if err := s.appendEvent(ctx, tx, paid, inv, now); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.PaymentRecorded, Money(p.Amount)+" ("+p.Method+") toward "+named(inv), now)
	})
	if err != nil {
		return Invoice{}, false, err
	}
	return inv, replayed, nil
}

// ErrPaymentNotFound: no payment of that id toward the invoice.
var ErrPaymentNotFound = rule.New(rule.NotFound, "", "Payment not found", "The invoice has no payment with this id.")

// RemovePayment removes a payment recorded with RecordPayment and moves
// the invoice back: a paid invoice becomes part_paid, or open when nothing
// is left paid. A card payment is refused (it is refunded instead), and so
// is a payment of a cancelled invoice, which is final.
func (s *Store) RemovePayment(ctx context.Context, actor Actor, invoiceID, paymentID uuid.UUID) (inv Invoice, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		l, err := Lock(ctx, tx, actor.OrganizationID, invoiceID)
		if err != nil {
			return err
		}
		before, err := s.read(ctx, tx, actor.OrganizationID, invoiceID)
		if err != nil {
			return err
		}
		var removed *Payment
		for i := range before.Payments {
			if before.Payments[i].ID == paymentID {
				removed = &before.Payments[i]
			}
		}
		switch {
		case removed == nil:
			return ErrPaymentNotFound
		case removed.Method == MethodCard:
			return rule.New(rule.Unprocessable, "", "Card payments cannot be removed",
				"This payment was made by card; refund it with POST /card-payments/{id}/refund instead.")
		case l.Status == Cancelled:
			return rule.New(rule.Conflict, "", "Payment cannot be removed",
				"The invoice is cancelled, which is final: its payments stay as they are.")
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM recorded_payments WHERE id = $1 AND invoice_id = $2`, paymentID, invoiceID)
		if err != nil {
			return fmt.Errorf("invoice: unable to remove payment: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, errors.New("invoice: the recorded payment went while the invoice was locked"))
		}
		unapplyPayment(&l.Invoice, removed.Amount)
		if err := l.Save(); err != nil {
			return err
		}
		if inv, err = s.read(ctx, tx, actor.OrganizationID, invoiceID); err != nil {
			return err
		}
		now := s.Now()
		_, err = event.Append(ctx, tx, inv.OrganizationID, event.InvoicePaymentRemoved,
			models.RecordedPaymentChange{Payment: removed.Model(), Invoice: inv.Model(s.Link(&inv), true)}, now)
		if err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.PaymentRemoved, paymentID.String()+" from "+named(inv), now)
	})
	if err != nil {
		return Invoice{}, err
	}
	return inv, nil
}

// unapplyPayment takes amount off what was paid: the invoice is part_paid
// while something is left paid, open otherwise, and no longer paid.
func unapplyPayment(inv *Invoice, amount apd.Decimal) {
	inv.AmountPaid = cents(sub(inv.AmountPaid, amount))
	inv.PaidAt = nil
	if inv.AmountPaid.Sign() > 0 {
		inv.Status = PartPaid
	} else {
		inv.Status = Open
	}
}

// appendPaymentEvent appends t with the payment id of inv and inv itself.
func (s *Store) appendPaymentEvent(ctx context.Context, tx *sqlx.Tx, t event.Type[models.RecordedPaymentChange], inv Invoice, paymentID uuid.UUID, at time.Time) error {
	for _, p := range inv.Payments {
		if p.ID == paymentID {
			_, err := event.Append(ctx, tx, inv.OrganizationID, t,
				models.RecordedPaymentChange{Payment: p.Model(), Invoice: inv.Model(s.Link(&inv), true)}, at)
			return err
		}
	}
	return fmt.Errorf("invoice: payment %s not in invoice %s: %w", paymentID, inv.ID, sql.ErrNoRows)
}
