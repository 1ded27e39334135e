package payment

import (
	"context"
	"fmt"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
)

// What payment keeps of an invoice, read through q, for whoever composes
// it with the invoice's own read (invoice.Cards, the portal's pages).

// InvoiceSales are the approved card sales toward the invoice as the
// invoice lists its payments (invoice.Cards).
func (s *Store) InvoiceSales(ctx context.Context, q sqlx.QueryerContext, org, invoiceID uuid.UUID) ([]invoice.Payment, error) {
	rows, err := q.QueryxContext(ctx, `SELECT id, amount::text, ret_ref, card_brand, last_four, payer_name, created_at,
			level3_sent, saved_card, amount_refunded::text
		FROM card_payments
		WHERE organization_id = $1 AND invoice_id = $2 AND kind = 'sale' AND status = 'approved'
		ORDER BY created_at, id`, org, invoiceID)
	if err != nil {
		return nil, fmt.Errorf("payment: unable to read an invoice's card payments: %w", err)
	}
	defer rows.Close()
	var list []invoice.Payment
	for rows.Next() {
		p := invoice.Payment{Method: invoice.MethodCard}
		var amount, refunded string
		if err := rows.Scan(&p.ID, &amount, &p.RetRef, &p.CardBrand, &p.LastFour, &p.PayerName, &p.PaidAt,
			&p.Level3Sent, &p.SavedCard, &refunded); err != nil {
			return nil, fmt.Errorf("payment: unable to read an invoice's card payments: %w", err)
		}
		p.RecordedAt = p.PaidAt
		if err := decimal(&p.Amount, amount); err != nil {
			return nil, err
		}
		if err := decimal(&p.AmountRefunded, refunded); err != nil {
			return nil, err
		}
		list = append(list, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("payment: unable to read an invoice's card payments: %w", err)
	}
	return list, nil
}

// ChargesUnderWay says whether a charge toward the invoice is reserved and
// its outcome not recorded yet: a pending charge, whatever becomes of it
// (invoice.Cards; an invoice is not changed while money may be moving).
func (s *Store) ChargesUnderWay(ctx context.Context, q sqlx.QueryerContext, invoiceID uuid.UUID) (bool, error) {
	var found bool
	err := sqlx.GetContext(ctx, q, &found, `SELECT EXISTS (SELECT 1 FROM pending_charges WHERE invoice_id = $1)`, invoiceID)
	if err != nil {
		return false, fmt.Errorf("payment: unable to read an invoice's charges under way: %w", err)
	}
	return found, nil
}

// SavedCardsOf are the cards saved for the customer, newest first (invoice.Cards).
func (s *Store) SavedCardsOf(ctx context.Context, q sqlx.QueryerContext, org, customerID uuid.UUID) ([]invoice.SavedCard, error) {
	by, err := savedCardsOf(ctx, q, org, []uuid.UUID{customerID})
	return by[customerID], err
}

// CustomerCards are the saved cards of each customer, newest first, in
// one statement (customer.Cards).
func (s *Store) CustomerCards(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, ids []uuid.UUID) (map[uuid.UUID][]models.SavedCard, error) {
	by, err := savedCardsOf(ctx, q, org, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID][]models.SavedCard, len(by))
	for id, cards := range by {
		list := make([]models.SavedCard, len(cards))
		for i, c := range cards {
			list[i] = c.Model()
		}
		out[id] = list
	}
	return out, nil
}

// savedCardsOf are the saved cards of each of the customers, newest first.
func savedCardsOf(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, customers []uuid.UUID) (map[uuid.UUID][]invoice.SavedCard, error) {
	rows, err := q.QueryxContext(ctx, `SELECT customer_id, id, card_brand, last_four, expiry, saved_at, saved_by_name, charge_consent_at
		FROM saved_cards
		WHERE organization_id = $1 AND customer_id = ANY($2::uuid[])
		ORDER BY saved_at DESC, id`, org, pq.Array(customers))
	if err != nil {
		return nil, fmt.Errorf("payment: unable to read customers' saved cards: %w", err)
	}
	defer rows.Close()
	by := map[uuid.UUID][]invoice.SavedCard{}
	for rows.Next() {
		var (
			customer uuid.UUID
			c        invoice.SavedCard
		)
		if err := rows.Scan(&customer, &c.ID, &c.CardBrand, &c.LastFour, &c.Expiry, &c.SavedAt, &c.SavedByName, &c.ChargeConsentAt); err != nil {
			return nil, fmt.Errorf("payment: unable to read customers' saved cards: %w", err)
		}
		by[customer] = append(by[customer], c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("payment: unable to read customers' saved cards: %w", err)
	}
	return by, nil
}

// InvoiceRefunds are the newest refunds, at most limit, of the invoice's
// card sales, newest first, with the fields the portal's invoice page
// shows: id, time, amount, status, decline reason, reason and who refunded.
func (s *Store) InvoiceRefunds(ctx context.Context, q sqlx.QueryerContext, org, invoiceID uuid.UUID, limit int) ([]CardPayment, error) {
	rows, err := q.QueryxContext(ctx, `SELECT id, created_at, amount::text, status, decline_reason, reason, created_by_name
		FROM card_payments
		WHERE organization_id = $1 AND invoice_id = $2 AND kind = 'refund'
		ORDER BY created_at DESC, id DESC
		LIMIT $3`, org, invoiceID, limit)
	if err != nil {
		return nil, fmt.Errorf("payment: unable to read an invoice's refunds: %w", err)
	}
	defer rows.Close()
	var list []CardPayment
	for rows.Next() {
		p := CardPayment{Kind: Refund, InvoiceID: invoiceID}
		var amount string
		if err := rows.Scan(&p.ID, &p.CreatedAt, &amount, &p.Status, &p.DeclineReason, &p.Reason, &p.CreatedByName); err != nil {
			return nil, fmt.Errorf("payment: unable to read an invoice's refunds: %w", err)
		}
		if err := decimal(&p.Amount, amount); err != nil {
			return nil, err
		}
		list = append(list, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("payment: unable to read an invoice's refunds: %w", err)
	}
	return list, nil
}

// SalesThisWeek are the organization's approved card sales since Monday
// 00:00 in the time zone of each sale's location, as of now: what the
// portal's home adds to the payments recorded this week
// (invoice.Summary). Refunds are not taken off (they change no invoice's
// amount paid).
func (s *Store) SalesThisWeek(ctx context.Context, org uuid.UUID) (invoice.Tally, error) {
	var t invoice.Tally
	var sum string
	accounts, err := directory.AccountsOf(ctx, s.DB, &org)
	if err != nil {
		return invoice.Tally{}, err
	}
	ids, zones := directory.Zones(accounts)
	// The bound of 8 days lets the index by time find the week's sales;
	// the week's start in each location's zone does the rest.
	err = s.DB.QueryRowContext(ctx, `
		SELECT count(*), coalesce(sum(c.amount), 0)::text
		FROM card_payments c
		JOIN unnest($3::uuid[], $4::text[]) AS z(merchant_account_id, time_zone) ON z.merchant_account_id = c.merchant_account_id
		WHERE c.organization_id = $1 AND c.kind = 'sale' AND c.status = 'approved'
		  AND c.created_at >= $2::timestamptz - interval '8 days'
		  AND c.created_at >= date_trunc('week', $2::timestamptz AT TIME ZONE z.time_zone) AT TIME ZONE z.time_zone`,
		org, s.Now(), ids, zones).Scan(&t.Count, &sum)
	if err != nil {
		return invoice.Tally{}, fmt.Errorf("payment: unable to sum the week's card sales: %w", err)
	}
	return t, decimal(&t.Sum, sum)
}

// decimal sets d to the numeric text of a column.
func decimal(d *apd.Decimal, text string) error {
	if _, _, err := d.SetString(text); err != nil {
		return fmt.Errorf("payment: amount %q: %w", text, err)
	}
	return nil
}
