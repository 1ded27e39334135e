package invoice

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Drafts and edits: a draft is finalized (open, its pay link made and
// sent) or deleted; a draft, or an open invoice nothing was paid toward,
// is changed by Update, which counts its Version.

// Finalize opens a draft: its pay link is made and, unless send is false or
// sendAt schedules it, sent in the same transaction (send and sendAt mean
// what they mean on creation). Any other status is a Conflict.
func (s *Store) Finalize(ctx context.Context, actor Actor, id uuid.UUID, send *bool, sendAt *time.Time) (inv Invoice, err error) {
	v := fieldErrors{}
	checkSend(v, send, sendAt)
	if len(v) > 0 {
		return Invoice{}, rule.InvalidFields(v)
	}
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		l, err := Lock(ctx, tx, actor.OrganizationID, id)
		if err != nil {
			return err
		}
		if l.Status != InDraft {
			return rule.Newf(rule.Conflict, "", "Invoice cannot be finalized",
				"The invoice is %s; only a draft is finalized.", l.Status)
		}
		now := s.Now()
		if err := checkSendAt(sendAt, now); err != nil {
			return err
		}
		// As on creation: the MID's location must still be active.
		if err := checkAccount(ctx, tx, actor.OrganizationID, l.MerchantAccountID); err != nil {
			return err
		}
		l.Status, l.ScheduledSendAt = Open, sendAt
		if err := l.Save(); err != nil {
			return err
		}
		sent := (send == nil || *send) && sendAt == nil
		if sent {
			if err := s.send(ctx, tx, actor.OrganizationID, id, now); err != nil {
				return err
			}
		}
		if inv, err = s.read(ctx, tx, actor.OrganizationID, id); err != nil {
			return err
		}
		if err := s.appendEvent(ctx, tx, event.InvoiceFinalized, inv, now); err != nil {
			return err
		}
		if err := actor.audit(ctx, tx, audit.InvoiceFinalized, named(inv), now); err != nil {
			return err
		}
		if sent {
			return s.appendEvent(ctx, tx, event.InvoiceSent, inv, now)
		}
		return nil
	})
	if err != nil {
		return Invoice{}, err
	}
	return inv, nil
}

// Delete removes a draft, with its lines; its idempotency key, if it was
// made with one, is free again. Any other status is a Conflict: an invoice
// once open is cancelled, never deleted.
func (s *Store) Delete(ctx context.Context, actor Actor, id uuid.UUID) error {
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		l, err := Lock(ctx, tx, actor.OrganizationID, id)
		if err != nil {
			return err
		}
		if l.Status != InDraft {
			return rule.Newf(rule.Conflict, "", "Invoice cannot be deleted",
				"The invoice is %s; only a draft is deleted (an open invoice is cancelled instead).", l.Status)
		}
		// The event carries the draft as it was.
		inv, err := s.read(ctx, tx, actor.OrganizationID, id)
		if err != nil {
			return err
		}
		if err := idempotency.Release(ctx, tx, actor.OrganizationID, idempotency.CreateInvoice, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM invoice_lines WHERE invoice_id = $1`, id); err != nil {
			return fmt.Errorf("invoice: unable to delete a draft's lines: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM invoices WHERE id = $1`, id); err != nil {
			return fmt.Errorf("invoice: unable to delete a draft: %w", err)
		}
		now := s.Now()
		if err := s.appendEvent(ctx, tx, event.InvoiceDeleted, inv, now); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.DraftDeleted, named(inv), now)
	})
}

// Change is a change of an invoice's own fields, as a merge patch makes
// it: Given names the members given, as the request names them (any of
// creation's but send, sendAt and draft: Changeable), and each takes its
// value from To, where nil clears it. Lines given without amount make the
// amount their total.
type Change struct {
	To    Draft
	Given map[string]bool
	// IfMatch, unless nil, lists the versions the change is meant for;
	// the invoice at another is not changed (a rule.Changed refusal).
	IfMatch []int
}

// Changeable are the members a Change may give.
var Changeable = []string{"merchantAccountId", "invoiceNumber", "amount", "poNumber", "customerId", "customerName",
	"customerCompany", "customerEmail", "customerPhone", "delivery", "memo", "dueDate", "lines", "reminders"}

// errVersion: the invoice is at version, not the one the change was meant for.
func errVersion(version int) *rule.Error {
	return rule.Newf(rule.Changed, "", "Invoice changed",
		"The invoice is at version %d, not the one this change was meant for; nothing was changed. Read it again, then change it.", version)
}

// NotChangeable is the refusal of a change of an invoice toward which something
// was paid, recorded or is being charged, or which is final.
func NotChangeable(inv *Invoice) *rule.Error {
	if inv.Status == Cancelled {
		return rule.New(rule.Conflict, "", "Invoice cannot be changed", "The invoice is cancelled, so it cannot be changed; make a new one.")
	}
	return rule.New(rule.Conflict, "", "Invoice cannot be changed", "An invoice with payments cannot be changed; cancel it and make a new one.")
}

// Update changes a draft, or an open invoice with nothing paid, recorded
// or being charged (a pay form at the card processor right now: its
// pending charge, read under the invoice's row lock, which the payment's
// reservation takes too, so that either the charge is under way and the
// change refused, or the change is made and the charge, reserved later,
// sees another version and charges nothing). The result is checked by
// every rule of creation (Validate, the MID, the invoice number); the pay
// link stays the same and Version grows by one. A change giving nothing
// changes nothing.
func (s *Store) Update(ctx context.Context, actor Actor, id uuid.UUID, c Change) (inv Invoice, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		l, err := Lock(ctx, tx, actor.OrganizationID, id)
		if err != nil {
			return err
		}
		if c.IfMatch != nil && !slices.Contains(c.IfMatch, l.Version) {
			return errVersion(l.Version)
		}
		switch {
		case l.Status == InDraft:
		case !l.Changeable():
			return NotChangeable(&l.Invoice)
		default:
			underWay, err := s.Cards.ChargesUnderWay(ctx, tx, l.ID)
			if err != nil {
				return err
			}
			atTerminal, err := s.Terminals.PendingFor(ctx, tx, l.ID)
			if err != nil {
				return err
			}
			if underWay || atTerminal {
				return NotChangeable(&l.Invoice)
			}
		}
		current, err := s.read(ctx, tx, actor.OrganizationID, id)
		if err != nil {
			return err
		}
		if len(c.Given) == 0 {
			inv = current
			return nil
		}
		d := c.apply(draftOf(current))
		if c.Given["customerId"] && !c.Given["customerEmail"] {
			d.CustomerEmail = nil // the named customer's
		}
		if err := Validate(d); err != nil {
			return err
		}
		if d.MerchantAccountID != current.MerchantAccountID {
			if err := checkAccount(ctx, tx, actor.OrganizationID, d.MerchantAccountID); err != nil {
				return err
			}
		}
		now := s.Now()
		// The customer: named again, or found (made) by a new email, as on
		// creation; else the one the invoice has.
		var cust customer.Customer
		if c.Given["customerId"] || c.Given["customerEmail"] {
			if cust, err = customerOf(ctx, tx, actor.OrganizationID, &d, now); err != nil {
				return err
			}
		} else if cust, err = customer.ForInvoice(ctx, tx, actor.OrganizationID, current.CustomerID); err != nil {
			return err
		}
		if err := checkExempt(cust, d.Lines); err != nil {
			return err
		}
		if err := s.save(ctx, tx, id, cust.ID, d, c.Given["lines"]); err != nil {
			return err
		}
		if inv, err = s.read(ctx, tx, actor.OrganizationID, id); err != nil {
			return err
		}
		if err := s.appendEvent(ctx, tx, event.InvoiceUpdated, inv, now); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.InvoiceChanged, named(inv)+", "+Money(inv.Amount), now)
	})
	if err != nil {
		return Invoice{}, err
	}
	return inv, nil
}

// Changeable says whether Update may change the invoice, as far as the
// invoice itself tells: a draft, or an open invoice with nothing paid or
// recorded (a charge under way is known only under its lock, in Update).
func (inv *Invoice) Changeable() bool {
	return inv.Status == InDraft || inv.Status == Open && inv.AmountPaid.Sign() == 0
}

// draftOf is the invoice as the draft that would make it.
func draftOf(inv Invoice) Draft {
	email, delivery := inv.CustomerEmail, inv.Delivery
	lines := inv.Lines
	if len(lines) == 0 {
		lines = nil // none, as a draft says it
	}
	return Draft{
		MerchantAccountID: inv.MerchantAccountID, InvoiceNumber: inv.InvoiceNumber, Amount: inv.Amount,
		PONumber: inv.PONumber, CustomerName: inv.CustomerName, CustomerCompany: inv.CustomerCompany,
		CustomerEmail: &email, CustomerPhone: inv.CustomerPhone, Delivery: &delivery, Memo: inv.Memo,
		DueDate: inv.DueDate, Lines: lines, Reminders: inv.Reminders, AsDraft: inv.Status == InDraft,
	}
}

// apply is d with the change's members given.
func (c Change) apply(d Draft) Draft {
	to := c.To
	for name := range c.Given {
		switch name {
		case "merchantAccountId":
			d.MerchantAccountID = to.MerchantAccountID
		case "invoiceNumber":
			d.InvoiceNumber = to.InvoiceNumber
		case "amount":
			d.Amount = to.Amount
		case "poNumber":
			d.PONumber = to.PONumber
		case "customerId":
			d.CustomerID = to.CustomerID
		case "customerName":
			d.CustomerName = to.CustomerName
		case "customerCompany":
			d.CustomerCompany = to.CustomerCompany
		case "customerEmail":
			d.CustomerEmail = to.CustomerEmail
		case "customerPhone":
			d.CustomerPhone = to.CustomerPhone
		case "delivery":
			d.Delivery = to.Delivery
		case "memo":
			d.Memo = to.Memo
		case "dueDate":
			d.DueDate = to.DueDate
		case "lines":
			d.Lines = to.Lines
		case "reminders":
			d.Reminders = to.Reminders
		}
	}
	if c.Given["lines"] && !c.Given["amount"] && d.Lines != nil {
		d.Amount = LinesTotal(d.Lines)
	}
	return d
}

// LinesTotal is the amount lines add up to, as Validate adds them: each
// line's quantity × unitCost rounded half up to cents, plus its tax.
func LinesTotal(lines []Line) apd.Decimal {
	subtotal, tax := Totals(lines)
	return cents(add(subtotal, tax))
}

// save writes d over the invoice's own fields, its lines too when
// withLines, and counts the version.
func (s *Store) save(ctx context.Context, tx *sqlx.Tx, id, customerID uuid.UUID, d Draft, withLines bool) error {
	delivery := Email
	if d.Delivery != nil {
		delivery = *d.Delivery
	}
	_, err := tx.ExecContext(ctx, `
		UPDATE invoices SET merchant_account_id = $2, invoice_number = $3, po_number = $4, amount = $5::numeric,
			customer_name = $6, customer_company = $7, customer_email = $8, customer_phone = $9, delivery = $10,
			memo = $11, due_date = $12::date, line_count = $13, reminders = $14, customer_id = $15, version = version + 1
		WHERE id = $1`,
		id, d.MerchantAccountID, d.InvoiceNumber, d.PONumber, d.Amount.Text('f'), d.CustomerName, d.CustomerCompany,
		*d.CustomerEmail, d.CustomerPhone, delivery, d.Memo, d.DueDate, len(d.Lines), d.Reminders, customerID)
	if err := numberTaken(err, d.InvoiceNumber); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("invoice: unable to change invoice: %w", err)
	}
	if !withLines {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM invoice_lines WHERE invoice_id = $1`, id); err != nil {
		return fmt.Errorf("invoice: unable to change an invoice's lines: %w", err)
	}
	_, tax := Totals(d.Lines)
	if _, err := tx.ExecContext(ctx, `UPDATE invoices SET tax_amount = $2::numeric WHERE id = $1`, id, tax.Text('f')); err != nil {
		return fmt.Errorf("invoice: unable to change an invoice's tax: %w", err)
	}
	lines := lineArrays(d.Lines)
	_, err = tx.ExecContext(ctx, `
		INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_cost, uom, commodity_code, upc, tax_rate)
		SELECT $1::uuid, t.ord - 1, t.d, t.q::numeric, t.c::numeric, t.u, t.cc, t.upc, t.tr::numeric
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
			WITH ORDINALITY AS t(d, q, c, u, cc, upc, tr, ord)`,
		id, pq.Array(lines.desc), pq.Array(lines.qty), pq.Array(lines.cost), pq.Array(lines.uom), pq.Array(lines.code), pq.Array(lines.upc),
		pq.Array(lines.rate))
	if err != nil {
		return fmt.Errorf("invoice: unable to change an invoice's lines: %w", err)
	}
	return nil
}
