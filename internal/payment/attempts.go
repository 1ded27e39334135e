package payment

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/postgres"
)

// The pay page's limits, counted in the database so that they hold across
// every instance: POSTs with a valid form token per pay link (against card
// testing), and POSTs per client address across every pay page (against
// one address trying many links).
const (
	LinkLimit    = 10
	AddressLimit = 60
	LimitWindow  = time.Hour
)

// The pay page's documents (the invoice's and its receipts' PDFs): at most
// PDFLimit in PDFWindow per pay link and client address.
const (
	PDFLimit  = 20
	PDFWindow = time.Minute
)

// PDFRequest counts a document asked of an invoice's pay link from a
// client address; see postgres.Limit.Attempt.
func (s *Store) PDFRequest(ctx context.Context, invoiceID uuid.UUID, address string) (time.Duration, error) {
	l := postgres.Limit{Table: "pay_limits", Max: PDFLimit, Window: PDFWindow}
	return l.Attempt(ctx, s.DB, "pdf:"+invoiceID.String()+":"+address, s.Now())
}

// attemptOnLink counts a pay attempt on an invoice's link; see
// postgres.Limit.Attempt.
func (s *Store) attemptOnLink(ctx context.Context, invoiceID uuid.UUID) (time.Duration, error) {
	l := postgres.Limit{Table: "pay_limits", Max: LinkLimit, Window: LimitWindow}
	return l.Attempt(ctx, s.DB, "link:"+invoiceID.String(), s.Now())
}

// attemptFrom counts a pay page POST from a client address; see
// postgres.Limit.Attempt.
func (s *Store) attemptFrom(ctx context.Context, address string) (time.Duration, error) {
	l := postgres.Limit{Table: "pay_limits", Max: AddressLimit, Window: LimitWindow}
	return l.Attempt(ctx, s.DB, "address:"+address, s.Now())
}

// DeleteOldAttempts forgets attempts that no longer count, and the answers
// of pay forms posted more than a day ago.
func (s *Store) DeleteOldAttempts(ctx context.Context) error {
	if _, err := s.DB.ExecContext(ctx, `DELETE FROM pay_limits WHERE attempted_at < $1`, s.Now().Add(-LimitWindow)); err != nil {
		return fmt.Errorf("payment: unable to delete old pay attempts: %w", err)
	}
	if _, err := s.DB.ExecContext(ctx, `DELETE FROM pay_submissions WHERE created_at < $1`, s.Now().Add(-SubmissionWindow)); err != nil {
		return fmt.Errorf("payment: unable to delete old pay submissions: %w", err)
	}
	return nil
}
