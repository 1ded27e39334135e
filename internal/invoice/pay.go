package invoice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/postgres"
)

// ByPayToken reads the invoice behind a pay link's token, with its lines
// and payments, and who bills (with whether its organization is
// suspended), in one snapshot.
func (s *Store) ByPayToken(ctx context.Context, token string) (inv Invoice, err error) {
	err = postgres.InSnapshot(ctx, s.DB, func(tx *sqlx.Tx) error {
		var id, org uuid.UUID
		// A draft has no pay link: its token is nothing.
		err := tx.QueryRowContext(ctx, `SELECT id, organization_id FROM invoices
			WHERE (id = ANY($1::uuid[]) OR legacy_pay_token_digest = $2) AND status <> 'draft'`,
			pq.Array(s.PayLinks.ids(token)), legacyDigest(token)).Scan(&id, &org)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("invoice: unable to read invoice: %w", err)
		}
		inv, err = s.document(ctx, tx, org, id)
		return err
	})
	// The pay page never shows the customer's saved cards.
	inv.SavedCards = nil
	return inv, err
}

// Document reads an invoice of the organization as its PDF shows it: in
// full, with who bills (invoicepdf), in one snapshot. beside, unless nil,
// reads in that snapshot, through q, what its caller shows with the
// invoice (the portal's invoice page: its refunds and events).
func (s *Store) Document(ctx context.Context, org, id uuid.UUID, beside func(q sqlx.QueryerContext) error) (inv Invoice, err error) {
	err = postgres.InSnapshot(ctx, s.DB, func(tx *sqlx.Tx) error {
		if inv, err = s.document(ctx, tx, org, id); err != nil || beside == nil {
			return err
		}
		return beside(tx)
	})
	return inv, err
}

func (s *Store) document(ctx context.Context, q sqlx.QueryerContext, org, id uuid.UUID) (Invoice, error) {
	inv, err := s.read(ctx, q, org, id)
	if err != nil {
		return Invoice{}, err
	}
	inv.Biller, err = directory.BillerOf(ctx, q, org, inv.MerchantAccountID)
	return inv, err
}

// LineTotal is a line's amount: round-half-up(quantity × unitCost, 2).
func LineTotal(l Line) apd.Decimal { return lineTotal(l.Quantity, l.UnitCost) }

// RecordPayment applies an approved payment of amount at `at` to the
// invoice (see ApplyPayment); level3 marks the invoice level3Sent too. The
// payment's row is the payment package's (card_payments).
func (l *Locked) RecordPayment(amount apd.Decimal, at time.Time, level3 bool) error {
	if err := ApplyPayment(&l.Invoice, amount, at); err != nil {
		return err
	}
	if level3 {
		l.Level3Sent = true
	}
	return nil
}

// RecordRefund adds an approved refund of one of the invoice's sales to
// amountRefunded. A refund changes nothing else: status, amountPaid and
// the balance describe what was collected.
func (l *Locked) RecordRefund(amount apd.Decimal) {
	l.AmountRefunded = cents(add(l.AmountRefunded, amount))
}

// RecordDecline counts a declined payment attempt.
func (l *Locked) RecordDecline() { l.FailedAttempts++ }

// SetPreference records how the invoice's customer wants later invoices
// (email or text), kept on the customer (package customer); it wins over
// an invoice's delivery on every later send. changed is false when the
// customer had stated it already.
func (l *Locked) SetPreference(prefers string, at time.Time) (changed bool, err error) {
	if prefers != Email && prefers != Text {
		return false, fmt.Errorf("invoice: preference %q is neither email nor text", prefers)
	}
	return customer.SetPrefers(l.ctx, l.tx, l.OrganizationID, l.CustomerID, prefers, at)
}

// Bill is the invoice as a message (a pay link, a reminder, a receipt)
// shows it (delivery.Invoices).
func (s *Store) Bill(ctx context.Context, org, id uuid.UUID) (delivery.Bill, error) {
	var inv Invoice
	err := postgres.InSnapshot(ctx, s.DB, func(tx *sqlx.Tx) (err error) {
		inv, err = s.document(ctx, tx, org, id)
		return err
	})
	if err != nil {
		return delivery.Bill{}, err
	}
	lines := make([]delivery.BillLine, len(inv.Lines))
	for i, l := range inv.Lines {
		lines[i] = delivery.BillLine{Description: l.Description, Quantity: l.Quantity.Text('f'),
			UnitCost: Money(l.UnitCost), Amount: Money(LineTotal(l))}
		if l.TaxRate != nil && !l.TaxRate.IsZero() {
			lines[i].TaxRate = Percent(*l.TaxRate)
		}
	}
	bill := delivery.Bill{
		Cancelled: inv.Status == Cancelled, Payable: inv.Status.Payable(), InvoiceNumber: inv.InvoiceNumber,
		Amount: Money(inv.Amount), Balance: Money(inv.Balance()), DueDate: inv.DueDate,
		CustomerName: optional.Value(inv.CustomerName), Lines: lines, Biller: inv.Biller, PayLink: s.Link(&inv),
	}
	if !inv.TaxAmount.IsZero() {
		subtotal := inv.Subtotal()
		bill.Subtotal, bill.Tax = Money(subtotal), Money(inv.TaxAmount)
	}
	return bill, nil
}

// SendFailed records, inside the transaction that fails the invoice's
// latest message, why it could not be delivered (delivery.Invoices), and
// its event, with the invoice as it then stands.
func (s *Store) SendFailed(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, problem string) error {
	_, err := tx.ExecContext(ctx, `UPDATE invoices SET send_problem = $3 WHERE id = $1 AND organization_id = $2`, id, org, problem)
	if err != nil {
		return fmt.Errorf("invoice: unable to record a send problem: %w", err)
	}
	_, err = s.AppendEvent(ctx, tx, org, id, event.InvoiceSendFailed, s.Now())
	return err
}
