package payment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

// Automatic charges: an invoice issued by a recurring series with
// automatic payment is charged its balance at once with the saved card the
// customer consented to future charges of, as a merchant-initiated
// stored-credential payment, through the pay page's reserve, ask, record.
// A decline leaves the invoice open and sends its pay link; the charge is
// tried again RetryAfter later, then no more.

// ChargeConsentWords are the words of the pay page's consent to future
// charges, kept with the card saved with them.
func ChargeConsentWords(business string) string {
	return "Let " + business + " charge this card for future invoices"
}

// RetryAfter are the waits, from the first try, of the tries after a
// decline: 1 and 3 days.
var RetryAfter = []time.Duration{24 * time.Hour, 72 * time.Hour}

// CheckAutoPayCard refuses (422, keyed by field) a saved card that is not
// the organization's, not the customer's, or saved without consent to
// future charges.
func CheckAutoPayCard(ctx context.Context, q sqlx.QueryerContext, org, customerID, cardID uuid.UUID, field string) error {
	var card struct {
		CustomerID *uuid.UUID `db:"customer_id"`
		Consented  bool       `db:"consented"`
	}
	err := sqlx.GetContext(ctx, q, &card, `SELECT customer_id, charge_consent_at IS NOT NULL AS consented
		FROM saved_cards WHERE id = $1 AND organization_id = $2`, cardID, org)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return rule.New(rule.Unprocessable, field, "Unknown saved card", "The saved card is not a saved card of your organization.")
	case err != nil:
		return fmt.Errorf("payment: unable to read saved card: %w", err)
	case card.CustomerID == nil || *card.CustomerID != customerID:
		return rule.New(rule.Unprocessable, field, "Saved card of another customer",
			"The saved card belongs to another customer; choose one of this customer's cards.")
	case !card.Consented:
		return rule.New(rule.Unprocessable, field, "No consent to future charges",
			"The customer did not consent to future charges of this card when saving it; ask them to save it again from a pay page, ticking the consent.")
	}
	return nil
}

// ScheduleAutoCharge, inside the transaction that issues the invoice,
// has it charged with the saved card as soon as ChargeDue runs. occurrence
// is the occurrence's id: the first try's order id, the others' derived
// from it.
func ScheduleAutoCharge(ctx context.Context, tx *sqlx.Tx, org, invoiceID, cardID, occurrence uuid.UUID, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO auto_charges (invoice_id, organization_id, saved_card_id, order_base, first_at, next_at)
		VALUES ($1, $2, $3, $4, $5, $5)`, invoiceID, org, cardID, occurrence, now)
	if err != nil {
		return fmt.Errorf("payment: unable to schedule the automatic charge of invoice %s: %w", invoiceID, err)
	}
	return nil
}

// autoCharge is an auto_charges row.
type autoCharge struct {
	InvoiceID      uuid.UUID `db:"invoice_id"`
	OrganizationID uuid.UUID `db:"organization_id"`
	SavedCardID    uuid.UUID `db:"saved_card_id"`
	OrderBase      uuid.UUID `db:"order_base"`
	Tries          int       `db:"tries"`
	Declines       int       `db:"declines"`
	Open           bool      `db:"open"`
	FirstAt        time.Time `db:"first_at"`
}

// order is the order id of try n (from 1): the occurrence's id for the
// first, one derived from it for the others.
func (a autoCharge) order(n int) uuid.UUID {
	if n == 1 {
		return a.OrderBase
	}
	return uuid.NewSHA1(a.OrderBase, []byte("try "+strconv.Itoa(n)))
}

// ChargeDue makes the automatic charges that are due, one after the other,
// until none is; it returns how many were asked of the processor. Several
// instances may run it at once: each charge is one instance's at a time,
// and each try's pending charge is claimed before the processor is asked.
func (s *Store) ChargeDue(ctx context.Context) (int, []error) {
	var (
		asked int
		errs  []error
	)
	for ctx.Err() == nil {
		found, tried, err := s.chargeNext(ctx)
		if tried {
			asked++
		}
		if err != nil {
			errs = append(errs, err)
		}
		if !found || (err != nil && !tried) {
			return asked, errs
		}
	}
	return asked, errs
}

// chargeNext takes the next due automatic charge (found) and, in a
// transaction under the invoice's row lock, settles its last try by what
// became of it, or reserves a new one (tried): then the processor is
// asked, with no transaction open, and its answer recorded as the pay
// page's. The charge is then due at once, so that the next call settles
// the try.
//
// A try's outcome is read from what it left: its pending charge still
// there (under way, or to be voided by SettlePending: looked at again once
// the void is due), its card payment (approved: done; declined: the pay
// link sent, and tried again per RetryAfter), or neither (nothing charged,
// or voided: a new try). So a payreq killed mid-charge charges the card
// once: the new try comes only once the first is voided.
func (s *Store) chargeNext(ctx context.Context) (found, tried bool, err error) {
	var (
		inv invoice.Invoice
		h   hold
		r   Request
	)
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		var a autoCharge
		err := tx.GetContext(ctx, &a, `SELECT invoice_id, organization_id, saved_card_id, order_base, tries, declines, open, first_at
			FROM auto_charges WHERE next_at <= $1 ORDER BY next_at LIMIT 1 FOR UPDATE SKIP LOCKED`, now)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("payment: unable to find a due automatic charge: %w", err)
		}
		found = true
		locked, err := invoice.Lock(ctx, tx, a.OrganizationID, a.InvoiceID)
		if err != nil {
			return err
		}
		if a.Open {
			settled, err := s.settleTry(ctx, tx, a, locked, now)
			if err != nil || settled {
				return err
			}
		}
		if !locked.Status.Payable() {
			return endAutoCharge(ctx, tx, a.InvoiceID)
		}
		var card struct {
			ProfileID   string  `db:"profile_id"`
			AccountID   string  `db:"account_id"`
			CardBrand   *string `db:"card_brand"`
			LastFour    *string `db:"last_four"`
			SavedByName string  `db:"saved_by_name"`
		}
		err = tx.GetContext(ctx, &card, `SELECT profile_id, account_id, card_brand, last_four, saved_by_name
			FROM saved_cards WHERE id = $1 AND organization_id = $2`, a.SavedCardID, a.OrganizationID)
		if errors.Is(err, sql.ErrNoRows) {
			return endAutoCharge(ctx, tx, a.InvoiceID) // removed: its series no longer charges it
		}
		if err != nil {
			return fmt.Errorf("payment: unable to read the saved card of an automatic charge: %w", err)
		}
		order := a.order(a.Tries + 1)
		l, err := s.LeftToPay(ctx, tx, &locked.Invoice)
		if err != nil {
			return err
		}
		left := l.Amount
		if left.Sign() <= 0 {
			// A payment on the pay page or at a terminal holds it all: look
			// again once it is over.
			return s.lookAgain(ctx, tx, a.InvoiceID, now.Add(PayTimeout))
		}
		brand := optional.Value(card.CardBrand)
		r = Request{AttemptID: order, Amount: left, Card: processor.Card{Name: card.SavedByName}, Version: locked.Version}
		h = hold{id: order, charge: processor.Charge{MerchantID: locked.MID, OrderID: order.String(), Amount: left,
			Card: r.Card, Items: Level3Items(locked.Lines), TaxAmount: locked.TaxAmount,
			Stored: &processor.StoredCard{ProfileID: card.ProfileID, AccountID: card.AccountID,
				LastFour: optional.Value(card.LastFour), Brand: brand}}}
		if err := writePending(ctx, tx, order, locked.ID, locked.MID, r, now); err != nil {
			return err
		}
		// The try holds the charge until its pending charge may be voided.
		if _, err := tx.ExecContext(ctx, `UPDATE auto_charges SET tries = tries + 1, open = true, next_at = $2 WHERE invoice_id = $1`,
			a.InvoiceID, now.Add(pendingMaxAge)); err != nil {
			return fmt.Errorf("payment: unable to record the try of an automatic charge: %w", err)
		}
		inv, tried = locked.Invoice, true
		return nil
	})
	if err != nil || !tried {
		return found, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, PayTimeout)
	defer cancel()
	if _, err := s.askAndRecord(ctx, inv, h, r); err != nil {
		return found, true, fmt.Errorf("payment: automatic charge of invoice %s: %w", inv.ID, err)
	}
	// Recorded: settled by the next call.
	if _, err := s.DB.ExecContext(ctx, `UPDATE auto_charges SET next_at = $2 WHERE invoice_id = $1`, inv.ID, s.Now()); err != nil {
		return found, true, fmt.Errorf("payment: automatic charge of invoice %s: %w", inv.ID, err)
	}
	return found, true, nil
}

// settleTry settles the last try of a by what it left (chargeNext);
// settled is false when a new try is to be made.
func (s *Store) settleTry(ctx context.Context, tx *sqlx.Tx, a autoCharge, locked *invoice.Locked, now time.Time) (settled bool, err error) {
	var left struct {
		VoidAfter *time.Time `db:"void_after"`
		Status    *string    `db:"status"`
	}
	order := a.order(a.Tries)
	err = tx.GetContext(ctx, &left, `SELECT (SELECT void_after FROM pending_charges WHERE order_id = $1) AS void_after,
		(SELECT status FROM card_payments WHERE id = $1) AS status`, order)
	if err != nil {
		return false, fmt.Errorf("payment: unable to read the try of an automatic charge: %w", err)
	}
	switch {
	case left.VoidAfter != nil:
		return true, s.lookAgain(ctx, tx, a.InvoiceID, later(*left.VoidAfter, now).Add(time.Minute))
	case left.Status == nil:
		return false, nil
	case *left.Status == Approved:
		return true, endAutoCharge(ctx, tx, a.InvoiceID)
	}
	a.Declines++
	if locked.Status.Payable() {
		if err := s.Invoices.SendIn(ctx, tx, a.OrganizationID, a.InvoiceID, now); err != nil {
			return false, err
		}
	}
	if a.Declines > len(RetryAfter) || !locked.Status.Payable() {
		return true, endAutoCharge(ctx, tx, a.InvoiceID)
	}
	_, err = tx.ExecContext(ctx, `UPDATE auto_charges SET declines = $2, open = false, next_at = $3 WHERE invoice_id = $1`,
		a.InvoiceID, a.Declines, a.FirstAt.Add(RetryAfter[a.Declines-1]))
	if err != nil {
		return false, fmt.Errorf("payment: unable to schedule the next try of an automatic charge: %w", err)
	}
	return true, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// lookAgain leaves the automatic charge of the invoice until at.
func (s *Store) lookAgain(ctx context.Context, tx *sqlx.Tx, invoiceID uuid.UUID, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE auto_charges SET next_at = $2 WHERE invoice_id = $1`, invoiceID, at); err != nil {
		return fmt.Errorf("payment: unable to put off an automatic charge: %w", err)
	}
	return nil
}

// endAutoCharge forgets the automatic charge of the invoice: approved,
// given up, no longer payable, or its card removed.
func endAutoCharge(ctx context.Context, tx *sqlx.Tx, invoiceID uuid.UUID) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM auto_charges WHERE invoice_id = $1`, invoiceID); err != nil {
		return fmt.Errorf("payment: unable to end an automatic charge: %w", err)
	}
	return nil
}
