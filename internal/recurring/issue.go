package recurring

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/postgres"
)

// Issued counts what IssueDue did.
type Issued struct{ Issued, Skipped int }

// IssueDue handles every due occurrence of every active series, each in a
// transaction of its own: issued through invoice.Store.CreateIn, or
// skipped when more than Late past due. A series whose invoice is refused
// (its MID's location suspended, its number taken) is left due, logged by
// the caller, and tried again on the next call; the others go on.
func (s *Store) IssueDue(ctx context.Context) (Issued, []error) {
	var (
		done    Issued
		errs    []error
		refused = []uuid.UUID{} // not nil: NULL would match no series
	)
	for ctx.Err() == nil {
		id, handled, err := s.issueNext(ctx, refused)
		switch {
		case err != nil && id != uuid.Nil:
			refused = append(refused, id)
			errs = append(errs, fmt.Errorf("recurring invoice %s: %w", id, err))
			continue
		case err != nil:
			return done, append(errs, err)
		case handled == "":
			return done, errs
		case handled == "skipped":
			done.Skipped++
		case handled == "issued":
			done.Issued++
		}
	}
	return done, errs
}

// issueNext handles the next occurrence due of a series not in passed
// over, in one transaction: the series locked (another instance takes
// another series), the occurrence claimed (the primary key of
// recurring_occurrences: one invoice per occurrence, whatever runs
// twice), the invoice made, the series advanced, their events written.
// handled is "issued", "skipped", "ended" (no occurrence left), "passed"
// (claimed before), or ""
// when nothing is due; id is the series, set with an error of its own.
func (s *Store) issueNext(ctx context.Context, passedOver []uuid.UUID) (id uuid.UUID, handled string, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		var r row
		err := tx.GetContext(ctx, &r, `SELECT `+columns+` FROM recurring_invoices
			WHERE status = 'active' AND next_due_at <= $1 AND NOT (id = ANY($2::uuid[]))
			ORDER BY next_due_at LIMIT 1 FOR UPDATE SKIP LOCKED`, now, pq.Array(passedOver))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("recurring: unable to find due series: %w", err)
		}
		id = r.ID
		sr, err := r.series()
		if err != nil {
			return err
		}
		loc, err := zone(ctx, tx, sr.OrganizationID, sr.MerchantAccountID)
		if err != nil {
			return err
		}
		day, ok := sr.NextOn()
		if !ok {
			handled = "ended"
			return s.advance(ctx, tx, &sr, loc, now, day, nil)
		}
		n := sr.Next
		res, err := tx.ExecContext(ctx, `INSERT INTO recurring_occurrences (recurring_invoice_id, n, issue_on, skipped, handled_at)
			VALUES ($1, $2, $3::date, $4, $5) ON CONFLICT DO NOTHING`, sr.ID, n, day, now.Sub(DueAt(day, loc)) > Late, now)
		if err != nil {
			return fmt.Errorf("recurring: unable to claim occurrence %d of %s: %w", n, sr.ID, err)
		}
		claimed, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if claimed == 0 {
			// Handled already (the series row says otherwise only if it
			// was written apart from its occurrence): move past it.
			sr.Next++
			handled = "passed"
			return s.save(ctx, tx, &sr, loc)
		}
		if now.Sub(DueAt(day, loc)) > Late {
			handled = "skipped"
			sr.SkippedCount++
			return s.advance(ctx, tx, &sr, loc, now, day, nil)
		}
		number := fmt.Sprintf("%s-%04d", sr.Prefix, sr.IssuedCount+1)
		actor := invoice.Actor{OrganizationID: sr.OrganizationID, Name: "Recurring invoice " + sr.Prefix}
		inv, err := s.Invoices.CreateIn(ctx, tx, actor, draft(sr.Terms, number, day), now)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE recurring_occurrences SET invoice_id = $3
			WHERE recurring_invoice_id = $1 AND n = $2`, sr.ID, n, inv.ID); err != nil {
			return fmt.Errorf("recurring: unable to record occurrence %d of %s: %w", n, sr.ID, err)
		}
		if sr.AutoPay != nil {
			err := payment.ScheduleAutoCharge(ctx, tx, sr.OrganizationID, inv.ID, *sr.AutoPay, occurrenceID(sr.ID, n), now)
			if err != nil {
				return err
			}
		}
		handled = "issued"
		sr.IssuedCount++
		sr.LastInvoiceID = &inv.ID
		return s.advance(ctx, tx, &sr, loc, now, day, &inv.ID)
	})
	if err != nil {
		return id, "", err
	}
	return id, handled, nil
}

// occurrenceID is occurrence n's id: its automatic charge's order id, the
// same whichever instance issues it.
func occurrenceID(series uuid.UUID, n int) uuid.UUID {
	return uuid.NewSHA1(series, []byte(fmt.Sprintf("occurrence %d", n)))
}

// advance moves sr past its occurrence on day (issued as invoiceID, or
// skipped: nil) and writes its events: the occurrence's, and
// recurring_invoice.ended when none is left.
func (s *Store) advance(ctx context.Context, tx *sqlx.Tx, sr *Series, loc *time.Location, now, day time.Time, invoiceID *uuid.UUID) error {
	had := !day.IsZero()
	if had {
		sr.Next++
	}
	sr.UpdatedAt = now
	if err := s.save(ctx, tx, sr, loc); err != nil {
		return err
	}
	if had {
		data := models.RecurringInvoiceOccurrence{RecurringInvoice: sr.Model(), IssueOn: date(day), InvoiceId: invoiceID,
			Skipped: invoiceID == nil}
		typ := event.RecurringInvoiceIssued
		if invoiceID == nil {
			typ = event.RecurringInvoiceSkipped
		}
		if _, err := event.Append(ctx, tx, sr.OrganizationID, typ, data, now); err != nil {
			return err
		}
	}
	if sr.Status == Ended {
		_, err := event.Append(ctx, tx, sr.OrganizationID, event.RecurringInvoiceEnded, sr.Model(), now)
		return err
	}
	return nil
}

// Run issues the due occurrences every interval until ctx ends.
func (s *Store) Run(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, errs := s.IssueDue(ctx)
		for _, err := range errs {
			if ctx.Err() == nil {
				log.Error("recurring: issuing", "error", err.Error())
			}
		}
		if done.Issued > 0 || done.Skipped > 0 {
			log.Info("recurring: occurrences handled", "issued", done.Issued, "skipped", done.Skipped)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// EndAutoPay ends, inside tx (the removal's: payment.Store.CardRemoved),
// the automatic payment of every series of the organization charging the
// saved card: autoPay set null, recurring_invoice.updated, and an email to
// the Owners.
func (s *Store) EndAutoPay(ctx context.Context, tx *sqlx.Tx, org, cardID uuid.UUID, at time.Time) error {
	var ids []uuid.UUID
	err := tx.SelectContext(ctx, &ids, `UPDATE recurring_invoices SET auto_pay_saved_card_id = NULL, updated_at = $3
		WHERE organization_id = $1 AND auto_pay_saved_card_id = $2 RETURNING id`, org, cardID, at)
	if err != nil {
		return fmt.Errorf("recurring: unable to end automatic payment: %w", err)
	}
	for _, id := range ids {
		sr, err := s.read(ctx, tx, org, id, "")
		if err != nil {
			return err
		}
		if _, err := event.Append(ctx, tx, org, event.RecurringInvoiceUpdated, sr.Model(), at); err != nil {
			return err
		}
		if s.Members == nil {
			continue
		}
		err = s.Members.Notify(ctx, tx, org, people.Notification{Choice: people.ToOwners,
			Subject: "Automatic payment ended for recurring invoice " + sr.Prefix,
			Text: "The saved card that paid the invoices of recurring invoice " + sr.Prefix + " automatically was removed, " +
				"so its next invoices are not charged: the customer pays them from their pay link.\n\n" +
				"To charge a card again, choose another saved card of the customer's with consent to future charges: " +
				s.Invoices.PublicURL + "/portal/recurring/" + sr.ID.String()}, at)
		if err != nil {
			return err
		}
	}
	return nil
}

// IssuedBySeries reports whether the invoice was issued by a series.
func (s *Store) IssuedBySeries(ctx context.Context, invoiceID uuid.UUID) (bool, error) {
	var issued bool
	err := s.DB.GetContext(ctx, &issued, `SELECT EXISTS (SELECT 1 FROM recurring_occurrences WHERE invoice_id = $1)`, invoiceID)
	if err != nil {
		return false, fmt.Errorf("recurring: unable to read whether invoice %s is recurring: %w", invoiceID, err)
	}
	return issued, nil
}
