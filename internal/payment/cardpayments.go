package payment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/rule"
)

// Kinds and statuses of card payments.
const (
	Sale     = "sale"
	Refund   = "refund"
	Approved = "approved"
	Declined = "declined"
)

// CardPayment is one attempt to move money on a card: a sale made on a pay
// page (approved or declined) or a refund of an approved sale. Amounts are
// always positive.
type CardPayment struct {
	ID                uuid.UUID
	OrganizationID    uuid.UUID
	Kind              string
	Status            string
	Amount            apd.Decimal
	InvoiceID         uuid.UUID
	InvoiceNumber     string
	MerchantAccountID uuid.UUID
	MID               string
	CardBrand         *string
	LastFour          *string
	PayerName         *string
	RetRef            *string
	DeclineReason     *string
	Level3Sent        bool
	SavedCard         bool
	RefundOf          *uuid.UUID
	AmountRefunded    apd.Decimal // a sale's approved refunds; 0 otherwise
	Reason            *string     // a refund's
	DepositID         *uuid.UUID  // the deposit that settled it
	CreatedAt         time.Time
	CreatedByName     *string // a refund: the key's name; a sale: nil
	// A sale made at a card terminal: how the card was entered, and which
	// terminal; nil for the pay page and refunds.
	EntryMode  *string
	TerminalID *uuid.UUID
	// FeeAmount is the processor's fee of it, known once it is in a
	// deposit whose processor gives fees per payment; nil otherwise.
	FeeAmount *apd.Decimal
}

// ErrNotFound: no card payment of that id in the organization.
var ErrNotFound = rule.New(rule.NotFound, "", "Card payment not found", "No card payment with this id exists in your organization.")

// insertCardPayment writes a card payment, in the transaction that records
// what it did to its invoice, and returns it as stored (as GET
// /card-payments/{id} shows it): its event's data.
func insertCardPayment(ctx context.Context, tx *sqlx.Tx, p CardPayment) (CardPayment, error) {
	stored, err := scanCardPayment(tx.QueryRowxContext(ctx, `
		WITH c AS (
			INSERT INTO card_payments (id, organization_id, kind, status, amount, invoice_id, merchant_account_id,
				card_brand, last_four, payer_name, ret_ref, decline_reason, level3_sent, saved_card, refund_of, reason,
				created_at, created_by_name, entry_mode, terminal_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
			RETURNING *
		)
		SELECT `+cardPaymentColumns+` FROM c`,
		p.ID, p.OrganizationID, p.Kind, p.Status, p.Amount.Text('f'), p.InvoiceID, p.MerchantAccountID,
		p.CardBrand, p.LastFour, p.PayerName, p.RetRef, p.DeclineReason, p.Level3Sent, p.SavedCard, p.RefundOf, p.Reason,
		p.CreatedAt, p.CreatedByName, p.EntryMode, p.TerminalID))
	if err != nil {
		return CardPayment{}, fmt.Errorf("payment: unable to record card payment: %w", err)
	}
	return stored, withNames(ctx, tx, &stored)
}

// cardPaymentColumns are what every read of card payments (c) selects;
// scanCardPayment reads them, and withNames adds the invoice number and
// the MID.
const cardPaymentColumns = `c.id, c.organization_id, c.kind, c.status, c.amount::text, c.invoice_id,
		c.merchant_account_id, c.card_brand, c.last_four, c.payer_name, c.ret_ref, c.decline_reason,
		c.level3_sent, c.saved_card, c.refund_of, c.amount_refunded::text, c.reason, c.deposit_id, c.created_at, c.created_by_name,
		c.entry_mode, c.terminal_id, c.fee_amount::text`

const selectCardPayment = `
	SELECT ` + cardPaymentColumns + `
	FROM card_payments c`

type scanner interface{ Scan(dest ...any) error }

func scanCardPayment(row scanner) (CardPayment, error) {
	var p CardPayment
	var amount, refunded string
	var fee *string
	err := row.Scan(&p.ID, &p.OrganizationID, &p.Kind, &p.Status, &amount, &p.InvoiceID,
		&p.MerchantAccountID, &p.CardBrand, &p.LastFour, &p.PayerName, &p.RetRef, &p.DeclineReason,
		&p.Level3Sent, &p.SavedCard, &p.RefundOf, &refunded, &p.Reason, &p.DepositID, &p.CreatedAt, &p.CreatedByName,
		&p.EntryMode, &p.TerminalID, &fee)
	if err != nil {
		return CardPayment{}, err
	}
	if fee != nil {
		p.FeeAmount = new(apd.Decimal)
		if _, _, err := p.FeeAmount.SetString(*fee); err != nil {
			return CardPayment{}, fmt.Errorf("payment: fee %q: %w", *fee, err)
		}
	}
	if _, _, err := p.Amount.SetString(amount); err != nil {
		return CardPayment{}, fmt.Errorf("payment: amount %q: %w", amount, err)
	}
	if _, _, err := p.AmountRefunded.SetString(refunded); err != nil {
		return CardPayment{}, fmt.Errorf("payment: amount refunded %q: %w", refunded, err)
	}
	return p, nil
}

// withNames sets the payments' invoice numbers (invoice's) and MIDs
// (directory's), read through q: one statement each for them all.
func withNames(ctx context.Context, q sqlx.QueryerContext, ps ...*CardPayment) error {
	var invoices, accounts []uuid.UUID
	for _, p := range ps {
		if !slices.Contains(invoices, p.InvoiceID) {
			invoices = append(invoices, p.InvoiceID)
		}
		if !slices.Contains(accounts, p.MerchantAccountID) {
			accounts = append(accounts, p.MerchantAccountID)
		}
	}
	numbers, err := invoice.Numbers(ctx, q, invoices)
	if err != nil {
		return err
	}
	mids, err := directory.AccountsByID(ctx, q, accounts)
	if err != nil {
		return err
	}
	for _, p := range ps {
		p.InvoiceNumber, p.MID = numbers[p.InvoiceID], mids[p.MerchantAccountID].MID
	}
	return nil
}

// CardPayment reads one card payment of the organization.
func (s *Store) CardPayment(ctx context.Context, org, id uuid.UUID) (CardPayment, error) {
	p, err := scanCardPayment(s.DB.QueryRowxContext(ctx, selectCardPayment+` WHERE c.id = $1 AND c.organization_id = $2`, id, org))
	if errors.Is(err, sql.ErrNoRows) {
		return CardPayment{}, ErrNotFound
	}
	if err != nil {
		return CardPayment{}, fmt.Errorf("payment: unable to read card payment: %w", err)
	}
	return p, withNames(ctx, s.DB, &p)
}

// Filter narrows a list of card payments.
type Filter struct {
	Kind              *string
	Status            *string
	MerchantAccountID *uuid.UUID
	InvoiceID         *uuid.UUID
	DepositID         *uuid.UUID
	CreatedFrom       *time.Time
	CreatedTo         *time.Time
	// RefundOf narrows the list to the refunds of a sale (the portal's
	// page of a sale; the API has no such filter).
	RefundOf *uuid.UUID
}

// CardPayments returns a page of the organization's card payments, newest
// first, and the cursor of the next page ("" on the last).
func (s *Store) CardPayments(ctx context.Context, org uuid.UUID, f Filter, limit int, after string) ([]CardPayment, string, error) {
	q := keyset.NewQuery(selectCardPayment, "c.created_at", "c.id")
	q.Where("c.organization_id = $%d", org)
	if f.Kind != nil {
		q.Where("c.kind = $%d", *f.Kind)
	}
	if f.Status != nil {
		q.Where("c.status = $%d", *f.Status)
	}
	if f.MerchantAccountID != nil {
		q.Where("c.merchant_account_id = $%d", *f.MerchantAccountID)
	}
	if f.InvoiceID != nil {
		q.Where("c.invoice_id = $%d", *f.InvoiceID)
	}
	if f.DepositID != nil {
		q.Where("c.deposit_id = $%d", *f.DepositID)
	}
	if f.RefundOf != nil {
		q.Where("c.refund_of = $%d", *f.RefundOf)
	}
	q.Created(f.CreatedFrom, f.CreatedTo)
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	list, next, err := keyset.Fetch(ctx, s.DB, q, limit, func(r *sql.Rows) (CardPayment, error) { return scanCardPayment(r) },
		func(p CardPayment) keyset.Cursor { return keyset.Cursor{At: p.CreatedAt, ID: p.ID} })
	if err != nil {
		return nil, "", fmt.Errorf("payment: unable to list card payments: %w", err)
	}
	page := make([]*CardPayment, len(list))
	for i := range list {
		page[i] = &list[i]
	}
	return list, next, withNames(ctx, s.DB, page...)
}
