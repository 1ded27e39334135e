package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/rule"
)

// PayForm is a pay form as the pay page reads it: PayByLink asks for its
// parts in turn, so that each is read only once the checks before it
// passed.
type PayForm interface {
	// Attempt is the form's one-time attempt id, or the page's error when
	// the form cannot be read or was not sent from the page.
	Attempt() (uuid.UUID, error)
	// Version is the invoice's version the form was shown with, read
	// with Attempt.
	Version() int
	// Request is the payment the form asks for, toward the invoice's
	// balance, or the refusal of its fields (rule.Invalid).
	Request(inv invoice.Invoice) (Request, error)
}

// PaidByLink is what a POST of a pay link's form came to: the invoice
// (zero only when the link is unknown), as it is after the attempt unless
// it was approved, and, once the processor answered, its Outcome.
type PaidByLink struct {
	Invoice invoice.Invoice
	Outcome Outcome
}

// The refusals of PayByLink past its limits of attempts.
const (
	tooManyFromNetwork = "There have been too many payment attempts from your network in the last hour."
	tooManyOnLink      = "There have been too many payment attempts on this invoice in the last hour."
)

// PayByLink is a POST of the pay form f on the pay link token, from the
// client's network (an IPv6 address's /64): every POST from a network
// counts, whatever it holds; a form answered before gets its answer again,
// charged once; only a new form from the page counts against the link,
// so that a stranger holding the link cannot lock its customer out with
// garbage; then the invoice must be payable (ErrNotPayable) and at the
// version the form was shown with (ErrChanged), the form valid, and Pay
// charges. Past a limit the refusal is rule.Limited.
// The charge runs past ctx's cancellation (Pay bounds its own time), so
// that a charge under way finishes whatever the customer's connection
// does.
func (s *Store) PayByLink(ctx context.Context, token, network string, f PayForm) (PaidByLink, error) {
	inv, err := s.Invoices.ByPayToken(ctx, token)
	if err != nil {
		return PaidByLink{}, err
	}
	out := PaidByLink{Invoice: inv}
	if wait, err := s.attemptFrom(ctx, network); err != nil || wait > 0 {
		return out, limited(wait, tooManyFromNetwork, err)
	}
	attempt, err := f.Attempt()
	if err != nil {
		return out, err
	}
	if prior, found, err := s.submitted(ctx, inv.ID, attempt); err != nil {
		return out, err
	} else if found {
		out.Outcome = prior
		return s.readAgain(ctx, token, out, nil)
	}
	if wait, err := s.attemptOnLink(ctx, inv.ID); err != nil || wait > 0 {
		return out, limited(wait, tooManyOnLink, err)
	}
	if inv.Biller.Suspended || !inv.Status.Payable() {
		return out, ErrNotPayable
	}
	// Before the form's fields: what they were checked against changed.
	if f.Version() != inv.Version {
		return out, ErrChanged
	}
	r, err := f.Request(inv)
	if err != nil {
		return out, err
	}
	r.AttemptID, r.Version = attempt, f.Version()
	out.Outcome, err = s.Pay(context.WithoutCancel(ctx), inv, r)
	return s.readAgain(ctx, token, out, err)
}

// readAgain is out with its invoice as it is now, unless the payment was
// approved (the receipt reads it): a decline, or the payment's failure
// err, changed it or says why.
func (s *Store) readAgain(ctx context.Context, token string, out PaidByLink, err error) (PaidByLink, error) {
	if err == nil && out.Outcome.Approved {
		return out, nil
	}
	now, readErr := s.Invoices.ByPayToken(ctx, token)
	if readErr != nil {
		return out, errors.Join(err, fmt.Errorf("payment: reading the invoice again after a payment attempt: %w", readErr))
	}
	out.Invoice = now
	return out, err
}

// limited is err, or the refusal why of an attempt past a limit, to try
// again after wait.
func limited(wait time.Duration, why string, err error) error {
	if err != nil {
		return err
	}
	return &rule.Error{Kind: rule.Limited, Title: "Too many attempts", Message: why, RetryAfter: wait}
}
