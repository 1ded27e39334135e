package invoice

import (
	"context"
	"fmt"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/directory"
)

// Tally is how many of something there are and their sum.
type Tally struct {
	Count int
	Sum   apd.Decimal
}

// Plus is the tally of both.
func (t Tally) Plus(u Tally) Tally {
	return Tally{Count: t.Count + u.Count, Sum: cents(add(t.Sum, u.Sum))}
}

// Summary is what a merchant's day starts with (the portal's home): what
// is owed, what is late, and what came in this week.
type Summary struct {
	// Open are the invoices open or part paid, summed by balance.
	Open Tally
	// Overdue are those of Open whose due date has passed, in the time
	// zone of their location.
	Overdue Tally
	// RecordedThisWeek is the money received outside the card since
	// Monday 00:00 in the time zone of each payment's location, by the
	// day it was received. (The week's card sales are the payment
	// package's: payment.Store.SalesThisWeek.)
	RecordedThisWeek Tally
}

// Summary sums the organization's invoices and recorded payments as of now.
func (s *Store) Summary(ctx context.Context, org uuid.UUID) (Summary, error) {
	var sum Summary
	var open, overdue, paid string
	accounts, err := directory.AccountsOf(ctx, s.DB, &org)
	if err != nil {
		return Summary{}, err
	}
	ids, zones := directory.Zones(accounts)
	// The bound of 8 days lets the index by time find the week's
	// payments; the week's start in each location's zone does the rest.
	err = s.DB.QueryRowContext(ctx, `
		WITH z AS (
			SELECT * FROM unnest($3::uuid[], $4::text[]) AS z(merchant_account_id, time_zone)
		), unpaid AS (
			SELECT i.amount - i.amount_paid AS balance,
				i.due_date < ($2::timestamptz AT TIME ZONE z.time_zone)::date AS overdue
			FROM invoices i
			JOIN z ON z.merchant_account_id = i.merchant_account_id
			WHERE i.organization_id = $1 AND i.status IN ('open', 'part_paid')
		), received AS (
			SELECT r.amount
			FROM recorded_payments r
			JOIN invoices i ON i.id = r.invoice_id
			JOIN z ON z.merchant_account_id = i.merchant_account_id
			WHERE r.organization_id = $1
			  AND r.received_at >= $2::timestamptz - interval '8 days'
			  AND r.received_at >= date_trunc('week', $2::timestamptz AT TIME ZONE z.time_zone) AT TIME ZONE z.time_zone
		)
		SELECT u.n, u.total, u.late, u.late_total, p.n, p.total
		FROM (SELECT count(*) AS n, coalesce(sum(balance), 0)::text AS total,
				count(*) FILTER (WHERE overdue) AS late, coalesce(sum(balance) FILTER (WHERE overdue), 0)::text AS late_total
			FROM unpaid) u,
			(SELECT count(*) AS n, coalesce(sum(amount), 0)::text AS total FROM received) p`, org, s.Now(), ids, zones).
		Scan(&sum.Open.Count, &open, &sum.Overdue.Count, &overdue, &sum.RecordedThisWeek.Count, &paid)
	if err != nil {
		return Summary{}, fmt.Errorf("invoice: unable to sum invoices: %w", err)
	}
	for _, t := range []struct {
		to   *apd.Decimal
		text string
	}{{&sum.Open.Sum, open}, {&sum.Overdue.Sum, overdue}, {&sum.RecordedThisWeek.Sum, paid}} {
		d, err := parseNumeric(t.text)
		if err != nil {
			return Summary{}, err
		}
		*t.to = cents(d)
	}
	return sum, nil
}
