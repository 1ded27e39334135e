package invoice

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/postgres"
)

// IdempotencyWindow is how long an Idempotency-Key is remembered.
const IdempotencyWindow = 24 * time.Hour

// Store keeps invoices. Every method is scoped by organization.
type Store struct {
	DB        *sqlx.DB
	Now       func() time.Time
	PublicURL string
}

// Actor is who acts: the caller's organization and the API key's name.
type Actor struct {
	OrganizationID uuid.UUID
	Name           string
}

// Idempotency is a create request's Idempotency-Key and the hash of its
// normalised body.
type Idempotency struct {
	Key  string
	Hash []byte
}

// Link is the invoice's pay link.
func (s *Store) Link(inv *Invoice) string { return s.PublicURL + "/pay/" + inv.PayToken }

const selectInvoice = `
	SELECT i.id, i.organization_id, i.merchant_account_id, ma.mid, l.name, i.invoice_number, i.po_number,
		i.amount::text, i.amount_paid::text, i.customer_name, i.customer_company, i.customer_email,
		i.customer_phone, i.delivery, i.sent_via, i.sent_at, i.send_problem, i.memo, i.due_date, i.line_count,
		i.status, i.failed_attempts, i.problem, i.paid_at, i.level3_sent, i.created_at, i.created_by_name,
		i.cancelled_at, i.cancelled_by_name, i.pay_token, cp.prefers
	FROM invoices i
	JOIN merchant_accounts ma ON ma.id = i.merchant_account_id
	JOIN locations l ON l.id = ma.location_id
	LEFT JOIN customer_preferences cp ON cp.organization_id = i.organization_id AND cp.customer_email = lower(i.customer_email)`

type scanner interface{ Scan(dest ...any) error }

func scanInvoice(row scanner) (Invoice, error) {
	var inv Invoice
	var amount, paid, status string
	var locationName sql.NullString
	err := row.Scan(&inv.ID, &inv.OrganizationID, &inv.MerchantAccountID, &inv.MID, &locationName, &inv.InvoiceNumber,
		&inv.PONumber, &amount, &paid, &inv.CustomerName, &inv.CustomerCompany, &inv.CustomerEmail, &inv.CustomerPhone,
		&inv.Delivery, &inv.SentVia, &inv.SentAt, &inv.SendProblem, &inv.Memo, &inv.DueDate, &inv.LineCount, &status,
		&inv.FailedAttempts, &inv.Problem, &inv.PaidAt, &inv.Level3Sent, &inv.CreatedAt, &inv.CreatedByName,
		&inv.CancelledAt, &inv.CancelledByName, &inv.PayToken, &inv.CustomerPrefers)
	if err != nil {
		return Invoice{}, err
	}
	if locationName.Valid {
		inv.LocationName = &locationName.String
	}
	inv.Status = Status(status)
	if inv.Amount, err = parseNumeric(amount); err != nil {
		return Invoice{}, err
	}
	if inv.AmountPaid, err = parseNumeric(paid); err != nil {
		return Invoice{}, err
	}
	return inv, nil
}

func newPayToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("invoice: crypto/rand failed: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Create makes an invoice from a validated draft and, unless Send is false,
// queues its pay link in the same transaction. With an Idempotency-Key, a
// repeat of the same request answers the invoice already made (replayed
// true); concurrent repeats wait on a database lock for the first one.
func (s *Store) Create(ctx context.Context, actor Actor, d Draft, idem *Idempotency) (inv Invoice, replayed bool, err error) {
	var id uuid.UUID
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		if idem != nil {
			found, err := s.claimIdempotencyKey(ctx, tx, actor.OrganizationID, *idem, now)
			if err != nil || found != uuid.Nil {
				id, replayed = found, found != uuid.Nil
				return err
			}
		}
		var account struct {
			LocationStatus string `db:"status"`
		}
		err := tx.GetContext(ctx, &account, `
			SELECT l.status FROM merchant_accounts ma JOIN locations l ON l.id = ma.location_id
			WHERE ma.id = $1 AND ma.organization_id = $2`, d.MerchantAccountID, actor.OrganizationID)
		if errors.Is(err, sql.ErrNoRows) {
			return unprocessable("Unknown merchant account",
				"merchantAccountId is not a MID of your organization; list yours with GET /accounts.")
		}
		if err != nil {
			return fmt.Errorf("invoice: unable to read merchant account: %w", err)
		}
		if account.LocationStatus != "active" {
			return unprocessable("Merchant account unavailable",
				"The location of this MID is not active, so it cannot take invoices.")
		}

		delivery := Email
		if d.Delivery != nil {
			delivery = *d.Delivery
		}
		id = uuid.Must(uuid.NewV7())
		_, err = tx.ExecContext(ctx, `
			INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, po_number, amount,
				customer_name, customer_company, customer_email, customer_phone, delivery, memo, due_date,
				line_count, status, created_at, created_by_name, pay_token)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'open', $15, $16, $17)`,
			id, actor.OrganizationID, d.MerchantAccountID, d.InvoiceNumber, d.PONumber, d.Amount.Text('f'),
			d.CustomerName, d.CustomerCompany, *d.CustomerEmail, d.CustomerPhone, delivery, d.Memo, d.DueDate,
			len(d.Lines), now, actor.Name, newPayToken())
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "23505" && pqErr.Constraint == "invoices_organization_id_invoice_number_key" {
			return unprocessable("Invoice number already used",
				fmt.Sprintf("Your organization already has an invoice numbered %q; invoice numbers are unique.", d.InvoiceNumber))
		}
		if err != nil {
			return fmt.Errorf("invoice: unable to create invoice: %w", err)
		}
		if err := insertLines(ctx, tx, id, d.Lines); err != nil {
			return err
		}
		if d.Send == nil || *d.Send {
			if err := s.send(ctx, tx, actor.OrganizationID, id, now); err != nil {
				return err
			}
		}
		if idem != nil {
			_, err = tx.ExecContext(ctx, `
				INSERT INTO idempotency_keys (organization_id, key, request_hash, invoice_id, created_at)
				VALUES ($1, $2, $3, $4, $5)`, actor.OrganizationID, idem.Key, idem.Hash, id, now)
			if err != nil {
				return fmt.Errorf("invoice: unable to remember idempotency key: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return Invoice{}, false, err
	}
	inv, err = s.Get(ctx, actor.OrganizationID, id)
	return inv, replayed, err
}

// claimIdempotencyKey takes the key's lock for this transaction and returns
// the invoice an earlier request with it made, if any within the window.
// A different body under the same key is a RuleError.
func (s *Store) claimIdempotencyKey(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, idem Idempotency, now time.Time) (uuid.UUID, error) {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, org.String()+"/"+idem.Key); err != nil {
		return uuid.Nil, fmt.Errorf("invoice: unable to lock idempotency key: %w", err)
	}
	var row struct {
		Hash      []byte    `db:"request_hash"`
		InvoiceID uuid.UUID `db:"invoice_id"`
		CreatedAt time.Time `db:"created_at"`
	}
	err := tx.GetContext(ctx, &row, `SELECT request_hash, invoice_id, created_at FROM idempotency_keys
		WHERE organization_id = $1 AND key = $2`, org, idem.Key)
	if errors.Is(err, sql.ErrNoRows) {
		return uuid.Nil, nil
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("invoice: unable to read idempotency key: %w", err)
	}
	if now.Sub(row.CreatedAt) >= IdempotencyWindow {
		_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE organization_id = $1 AND key = $2`, org, idem.Key)
		if err != nil {
			return uuid.Nil, fmt.Errorf("invoice: unable to forget idempotency key: %w", err)
		}
		return uuid.Nil, nil
	}
	if subtle.ConstantTimeCompare(row.Hash, idem.Hash) != 1 {
		return uuid.Nil, &RuleError{Kind: "idempotency-key-reused", Title: "Idempotency key reused",
			Detail: "This Idempotency-Key was used in the last 24 hours with a different request body; use a new key for a new invoice."}
	}
	return row.InvoiceID, nil
}

// DeleteExpiredIdempotencyKeys forgets keys older than the window.
func (s *Store) DeleteExpiredIdempotencyKeys(ctx context.Context) error {
	_, err := s.DB.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE created_at < $1`, s.Now().Add(-IdempotencyWindow))
	if err != nil {
		return fmt.Errorf("invoice: unable to delete expired idempotency keys: %w", err)
	}
	return nil
}

func insertLines(ctx context.Context, tx *sqlx.Tx, id uuid.UUID, lines []Line) error {
	if len(lines) == 0 {
		return nil
	}
	n := len(lines)
	desc, qty, cost := make([]string, n), make([]string, n), make([]string, n)
	uom, code, upc := make([]sql.NullString, n), make([]sql.NullString, n), make([]sql.NullString, n)
	opt := func(s *string) sql.NullString {
		if s == nil {
			return sql.NullString{}
		}
		return sql.NullString{String: *s, Valid: true}
	}
	for i, l := range lines {
		desc[i], qty[i], cost[i] = l.Description, l.Quantity.Text('f'), l.UnitCost.Text('f')
		uom[i], code[i], upc[i] = opt(l.UOM), opt(l.CommodityCode), opt(l.UPC)
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_cost, uom, commodity_code, upc)
		SELECT $1, t.ord - 1, t.d, t.q::numeric, t.c::numeric, t.u, t.cc, t.upc
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
			WITH ORDINALITY AS t(d, q, c, u, cc, upc, ord)`,
		id, pq.Array(desc), pq.Array(qty), pq.Array(cost), pq.Array(uom), pq.Array(code), pq.Array(upc))
	if err != nil {
		return fmt.Errorf("invoice: unable to add lines: %w", err)
	}
	return nil
}

// Get reads an invoice with its lines, payments, and the customer's saved
// cards and preference.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (Invoice, error) {
	inv, err := scanInvoice(s.DB.QueryRowxContext(ctx, selectInvoice+` WHERE i.id = $1 AND i.organization_id = $2`, id, org))
	if errors.Is(err, sql.ErrNoRows) {
		return Invoice{}, ErrNotFound
	}
	if err != nil {
		return Invoice{}, fmt.Errorf("invoice: unable to read invoice: %w", err)
	}
	if inv.Lines, err = s.lines(ctx, id); err != nil {
		return Invoice{}, err
	}
	if inv.Payments, err = s.payments(ctx, id); err != nil {
		return Invoice{}, err
	}
	if inv.SavedCards, err = s.savedCards(ctx, org, inv.CustomerEmail); err != nil {
		return Invoice{}, err
	}
	return inv, nil
}

func (s *Store) lines(ctx context.Context, id uuid.UUID) ([]Line, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT description, quantity::text, unit_cost::text, uom, commodity_code, upc
		FROM invoice_lines WHERE invoice_id = $1 ORDER BY position`, id)
	if err != nil {
		return nil, fmt.Errorf("invoice: unable to read lines: %w", err)
	}
	defer rows.Close()
	lines := []Line{}
	for rows.Next() {
		var l Line
		var q, c string
		if err := rows.Scan(&l.Description, &q, &c, &l.UOM, &l.CommodityCode, &l.UPC); err != nil {
			return nil, fmt.Errorf("invoice: unable to read lines: %w", err)
		}
		if l.Quantity, err = parseNumeric(q); err != nil {
			return nil, err
		}
		if l.UnitCost, err = parseNumeric(c); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, rows.Err()
}

func (s *Store) payments(ctx context.Context, id uuid.UUID) ([]Payment, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT id, amount::text, ret_ref, card_brand, last_four, payer_name, paid_at,
		level3_sent, saved_card FROM payments WHERE invoice_id = $1 ORDER BY paid_at, id`, id)
	if err != nil {
		return nil, fmt.Errorf("invoice: unable to read payments: %w", err)
	}
	defer rows.Close()
	payments := []Payment{}
	for rows.Next() {
		var p Payment
		var amount string
		if err := rows.Scan(&p.ID, &amount, &p.RetRef, &p.CardBrand, &p.LastFour, &p.PayerName, &p.PaidAt, &p.Level3Sent, &p.SavedCard); err != nil {
			return nil, fmt.Errorf("invoice: unable to read payments: %w", err)
		}
		if p.Amount, err = parseNumeric(amount); err != nil {
			return nil, err
		}
		payments = append(payments, p)
	}
	return payments, rows.Err()
}

func (s *Store) savedCards(ctx context.Context, org uuid.UUID, email string) ([]SavedCard, error) {
	cards := []SavedCard{}
	rows, err := s.DB.QueryContext(ctx, `SELECT id, card_brand, last_four, expiry, saved_at, saved_by_name
		FROM saved_cards WHERE organization_id = $1 AND customer_email = lower($2) ORDER BY saved_at DESC, id`, org, email)
	if err != nil {
		return nil, fmt.Errorf("invoice: unable to read saved cards: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c SavedCard
		if err := rows.Scan(&c.ID, &c.CardBrand, &c.LastFour, &c.Expiry, &c.SavedAt, &c.SavedByName); err != nil {
			return nil, fmt.Errorf("invoice: unable to read saved cards: %w", err)
		}
		cards = append(cards, c)
	}
	return cards, rows.Err()
}

// Update runs fn on the invoice under a row lock and saves what fn changed
// of its state, all in one transaction: the one way an invoice's state moves.
func (s *Store) Update(ctx context.Context, org, id uuid.UUID, fn func(tx *sqlx.Tx, inv *Invoice) error) error {
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		return s.update(ctx, tx, org, id, fn)
	})
}

func (s *Store) update(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, fn func(tx *sqlx.Tx, inv *Invoice) error) error {
	inv, err := scanInvoice(tx.QueryRowxContext(ctx, selectInvoice+` WHERE i.id = $1 AND i.organization_id = $2 FOR UPDATE OF i`, id, org))
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("invoice: unable to lock invoice: %w", err)
	}
	if err := fn(tx, &inv); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `
		UPDATE invoices SET amount_paid = $2, sent_via = $3, sent_at = $4, send_problem = $5, status = $6,
			failed_attempts = $7, problem = $8, paid_at = $9, level3_sent = $10, cancelled_at = $11,
			cancelled_by_name = $12
		WHERE id = $1`,
		id, inv.AmountPaid.Text('f'), inv.SentVia, inv.SentAt, inv.SendProblem, string(inv.Status),
		inv.FailedAttempts, inv.Problem, inv.PaidAt, inv.Level3Sent, inv.CancelledAt, inv.CancelledByName)
	if err != nil {
		return fmt.Errorf("invoice: unable to save invoice: %w", err)
	}
	return nil
}

// send queues the pay link and records the send, inside tx.
func (s *Store) send(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, now time.Time) error {
	return s.update(ctx, tx, org, id, func(tx *sqlx.Tx, inv *Invoice) error {
		if !inv.Status.Payable() {
			return unprocessable("Invoice cannot be sent",
				fmt.Sprintf("The invoice is %s; only open and part_paid invoices can be sent.", inv.Status))
		}
		ch, recipient := channel(inv)
		markSent(inv, ch, now)
		return delivery.Enqueue(ctx, tx, delivery.Message{
			ID: uuid.Must(uuid.NewV7()), OrganizationID: org, InvoiceID: id, Channel: ch, Recipient: recipient, At: now,
		})
	})
}

// Send sends, or sends again, the pay link of an open or part-paid invoice.
func (s *Store) Send(ctx context.Context, org, id uuid.UUID) (Invoice, error) {
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		return s.send(ctx, tx, org, id, s.Now())
	})
	if err != nil {
		return Invoice{}, err
	}
	return s.Get(ctx, org, id)
}

// Cancel cancels an open or part-paid invoice and any message of it not yet sent.
func (s *Store) Cancel(ctx context.Context, actor Actor, id uuid.UUID) (Invoice, error) {
	err := s.Update(ctx, actor.OrganizationID, id, func(tx *sqlx.Tx, inv *Invoice) error {
		now := s.Now()
		if err := cancel(inv, actor.Name, now); err != nil {
			return err
		}
		return delivery.CancelPending(ctx, tx, id, now)
	})
	if err != nil {
		return Invoice{}, err
	}
	return s.Get(ctx, actor.OrganizationID, id)
}

// Filter narrows a list.
type Filter struct {
	Status            *string
	MerchantAccountID *uuid.UUID
	LocationID        *uuid.UUID
	InvoiceNumber     *string
	CustomerEmail     *string
	CreatedFrom       *time.Time
	CreatedTo         *time.Time
}

// ErrInvalidCursor: the cursor was not made by this service.
var ErrInvalidCursor = errors.New("invalid cursor")

type cursor struct {
	CreatedAt time.Time `json:"t"`
	ID        uuid.UUID `json:"i"`
}

func encodeCursor(inv Invoice) string {
	b, _ := json.Marshal(cursor{CreatedAt: inv.CreatedAt, ID: inv.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c cursor
	if err != nil || json.Unmarshal(b, &c) != nil || c.ID == uuid.Nil || c.CreatedAt.IsZero() {
		return cursor{}, ErrInvalidCursor
	}
	return c, nil
}

// List returns a page of invoices, newest first, and the cursor of the next
// page ("" on the last). Pages are keyset pages on (createdAt, id), so
// inserts while a client pages neither repeat nor skip an invoice.
func (s *Store) List(ctx context.Context, org uuid.UUID, f Filter, limit int, after string) ([]Invoice, string, error) {
	var afterAt *time.Time
	var afterID *uuid.UUID
	if after != "" {
		c, err := decodeCursor(after)
		if err != nil {
			return nil, "", err
		}
		afterAt, afterID = &c.CreatedAt, &c.ID
	}
	rows, err := s.DB.QueryxContext(ctx, selectInvoice+`
		WHERE i.organization_id = $1
			AND ($2::text IS NULL OR i.status = $2)
			AND ($3::uuid IS NULL OR i.merchant_account_id = $3)
			AND ($4::uuid IS NULL OR ma.location_id = $4)
			AND ($5::text IS NULL OR i.invoice_number = $5)
			AND ($6::text IS NULL OR lower(i.customer_email) = lower($6))
			AND ($7::timestamptz IS NULL OR i.created_at >= $7)
			AND ($8::timestamptz IS NULL OR i.created_at < $8)
			AND ($9::timestamptz IS NULL OR (i.created_at, i.id) < ($9, $10::uuid))
		ORDER BY i.created_at DESC, i.id DESC
		LIMIT $11`,
		org, f.Status, f.MerchantAccountID, f.LocationID, f.InvoiceNumber, f.CustomerEmail, f.CreatedFrom, f.CreatedTo,
		afterAt, afterID, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("invoice: unable to list invoices: %w", err)
	}
	defer rows.Close()
	list := []Invoice{}
	for rows.Next() {
		inv, err := scanInvoice(rows)
		if err != nil {
			return nil, "", fmt.Errorf("invoice: unable to list invoices: %w", err)
		}
		list = append(list, inv)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("invoice: unable to list invoices: %w", err)
	}
	next := ""
	if len(list) > limit {
		list = list[:limit]
		next = encodeCursor(list[limit-1])
	}
	return list, next, nil
}
