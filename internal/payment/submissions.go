package payment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
)

// A customer is never charged twice for one submission. Each rendered pay
// form carries a one-time attempt id; the answer the processor gave to the
// first POST of it is kept (pay_submissions), written with the payment
// under the invoice's row lock. A later POST of the same form gets that
// answer without reaching the processor; one sent while the first is at
// the processor finds the first's pending charge, waits for its answer and
// gets it. A POST that got no answer (the processor failed, the invoice
// was not payable) leaves nothing, so the form may be sent again.

// SubmissionWindow is how long the answer to a pay form is kept.
const SubmissionWindow = 24 * time.Hour

// submitted is the answer already given to the form with this attempt id
// on this invoice, if any.
func (s *Store) submitted(ctx context.Context, invoiceID, attemptID uuid.UUID) (Outcome, bool, error) {
	return submitted(ctx, s.DB, invoiceID, attemptID)
}

func submitted(ctx context.Context, q sqlx.QueryerContext, invoiceID, attemptID uuid.UUID) (Outcome, bool, error) {
	var row struct {
		PaymentID     *uuid.UUID `db:"payment_id"`
		DeclineReason *string    `db:"decline_reason"`
	}
	err := sqlx.GetContext(ctx, q, &row, `SELECT payment_id, decline_reason FROM pay_submissions
		WHERE attempt_id = $1 AND invoice_id = $2`, attemptID, invoiceID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Outcome{}, false, nil
	case err != nil:
		return Outcome{}, false, fmt.Errorf("payment: unable to read pay submission: %w", err)
	}
	return outcomeOf(row.PaymentID, row.DeclineReason), true, nil
}

// outcomeOf is the answer a submission keeps: the approved payment, or
// the decline's reason.
func outcomeOf(paymentID *uuid.UUID, declineReason *string) Outcome {
	if paymentID != nil {
		return Outcome{Approved: true, Payment: invoice.Payment{ID: *paymentID}}
	}
	return Outcome{DeclineReason: optional.Value(declineReason)}
}

// recordSubmission keeps the processor's answer to a form, inside the
// transaction that records it.
func recordSubmission(ctx context.Context, tx *sqlx.Tx, invoiceID, attemptID uuid.UUID, out Outcome, at time.Time) error {
	var paymentID *uuid.UUID
	var reason *string
	if out.Approved {
		paymentID = &out.Payment.ID
	} else {
		reason = &out.DeclineReason
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO pay_submissions (attempt_id, invoice_id, payment_id, decline_reason, created_at)
		VALUES ($1, $2, $3, $4, $5)`, attemptID, invoiceID, paymentID, reason, at)
	if err != nil {
		return fmt.Errorf("payment: unable to record pay submission: %w", err)
	}
	return nil
}
