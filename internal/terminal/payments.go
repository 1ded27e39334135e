package terminal

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// States of a terminal payment.
const (
	Pending   = "pending"
	Approved  = "approved"
	Declined  = "declined"
	Cancelled = "cancelled"
	TimedOut  = "timed_out"
	Failed    = "failed"
)

// Payment is a payment asked of a terminal toward an invoice.
type Payment struct {
	ID               uuid.UUID  `db:"id"`
	OrganizationID   uuid.UUID  `db:"organization_id"`
	TerminalID       uuid.UUID  `db:"terminal_id"`
	InvoiceID        uuid.UUID  `db:"invoice_id"`
	OrderID          string     `db:"order_id"`
	Amount           Decimal    `db:"amount"`
	Status           string     `db:"status"`
	CardPaymentID    *uuid.UUID `db:"card_payment_id"`
	DeclineReason    *string    `db:"decline_reason"`
	EntryMode        *string    `db:"entry_mode"`
	CardBrand        *string    `db:"card_brand"`
	LastFour         *string    `db:"last_four"`
	ApplicationLabel *string    `db:"application_label"`
	AID              *string    `db:"aid"`
	AskedAt          *time.Time `db:"asked_at"`
	CreatedAt        time.Time  `db:"created_at"`
	UpdatedAt        time.Time  `db:"updated_at"`
}

// Decimal reads a NUMERIC column as text into an apd decimal.
type Decimal struct{ apd.Decimal }

// Scan implements sql.Scanner.
func (d *Decimal) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("terminal: amount of type %T", src)
	}
	_, _, err := d.SetString(s)
	return err
}

const paymentColumns = `p.id, p.organization_id, p.terminal_id, p.invoice_id, p.order_id, p.amount, p.status, p.card_payment_id,
	p.decline_reason, p.entry_mode, p.card_brand, p.last_four, p.application_label, p.aid, p.asked_at, p.created_at, p.updated_at`

// ErrPaymentNotFound: no terminal payment of that id in the organization.
var ErrPaymentNotFound = rule.New(rule.NotFound, "", "Terminal payment not found", "No terminal payment with this id exists in your organization.")

// NewPayment is a payment to ask of a terminal.
type NewPayment struct {
	TerminalID uuid.UUID
	InvoiceID  uuid.UUID
	Amount     *apd.Decimal // nil: what is left to pay (payment.LeftToPay)
}

// Refusals of a new payment, keyed by the field as sent.
var (
	errUnknownTerminal = rule.New(rule.Unprocessable, "terminalId", "Unknown terminal",
		"terminalId is not a terminal of this organization.")
	errUnknownInvoice = rule.New(rule.Unprocessable, "invoiceId", "Unknown invoice",
		"invoiceId is not an invoice of this organization.")
	errOtherMID = rule.New(rule.Unprocessable, "terminalId", "Terminal on another MID",
		"terminalId names a terminal on another MID than the invoice's; use a terminal of the invoice's MID.")
	errOffline = rule.New(rule.Unprocessable, "terminalId", "Terminal offline",
		"terminalId names a terminal that has not answered for a minute or more; check that it is on and connected, then try again.")
	errTerminalBusy = rule.New(rule.Busy, "terminalId", "Terminal busy",
		"terminalId names a terminal another payment is waiting on; cancel that payment or wait for its outcome.")
)

// Create asks for a payment at a terminal: written pending, for the
// worker to ask the terminal. With an idempotency key (nil: none) a repeat
// of the same request answers the payment as it is now (replayed true);
// the key with another request is idempotency.ErrReused.
func (s *Store) Create(ctx context.Context, org uuid.UUID, n NewPayment, key *string) (p Payment, replayed bool, err error) {
	asked := "" // the amount in cents, so that 10 and "10.00" are one request
	if n.Amount != nil {
		var reduced, cents apd.Decimal
		reduced.Reduce(n.Amount)
		if n.Amount.Sign() <= 0 || reduced.Exponent < -2 {
			return Payment{}, false, rule.InvalidField("amount", "must be more than 0, with at most two decimals")
		}
		if _, err := apd.BaseContext.WithPrecision(34).Quantize(&cents, n.Amount, -2); err != nil {
			return Payment{}, false, rule.InvalidField("amount", "must be more than 0, with at most two decimals")
		}
		asked = cents.Text('f')
	}
	k, err := idempotency.OptionalKey(key, n.TerminalID, n.InvoiceID, asked)
	if err != nil {
		return Payment{}, false, err
	}
	id := uuid.Must(uuid.NewV7())
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		earlier, err := k.Claim(ctx, tx, org, idempotency.CreateTerminalPayment, id, now)
		if err != nil {
			return err
		}
		if earlier != uuid.Nil {
			replayed = true
			p, err = s.payment(ctx, tx, org, earlier, "")
			return err
		}
		t, err := s.get(ctx, tx, org, n.TerminalID, " FOR UPDATE OF t")
		if errors.Is(err, ErrNotFound) {
			return errUnknownTerminal
		}
		if err != nil {
			return err
		}
		inv, err := invoice.Lock(ctx, tx, org, n.InvoiceID)
		if errors.Is(err, invoice.ErrNotFound) {
			return errUnknownInvoice
		}
		if err != nil {
			return err
		}
		switch {
		case t.MerchantAccountID != inv.MerchantAccountID:
			return errOtherMID
		case !inv.Status.Payable():
			return rule.Newf(rule.Conflict, "invoiceId", "Invoice cannot be paid",
				"invoiceId names an invoice that is %s; only open or part-paid invoices take payments.", inv.Status)
		case t.Status == Busy:
			return errTerminalBusy
		case t.Status == Offline:
			return errOffline
		}
		// What is left to pay, under the invoice's row lock: the pay
		// page's charges and the other terminals' payments under way hold
		// their part of the balance.
		left, err := s.CardPayments.LeftToPay(ctx, tx, &inv.Invoice)
		if err != nil {
			return err
		}
		amount, err := left.Take(n.Amount)
		if err != nil {
			return err
		}
		orderID, err := newOrderID()
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO terminal_payments (id, organization_id, terminal_id, invoice_id, order_id, amount,
				status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7)`, id, org, t.ID, inv.ID, orderID, amount.Text('f'), now)
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "23505" && pqErr.Constraint == "terminal_payments_one_per_terminal" {
			return errTerminalBusy
		}
		if err != nil {
			return fmt.Errorf("terminal: unable to record terminal payment: %w", err)
		}
		p, err = s.payment(ctx, tx, org, id, "")
		return err
	})
	return p, replayed, err
}

// PendingAmount is what the invoice's pending terminal payments hold of
// its balance (payment.Terminals, for payment.LeftToPay), read through q.
func (s *Store) PendingAmount(ctx context.Context, q sqlx.QueryerContext, invoiceID uuid.UUID) (apd.Decimal, error) {
	var text string
	err := sqlx.GetContext(ctx, q, &text, `SELECT coalesce(sum(amount), 0)::numeric(11, 2)::text FROM terminal_payments
		WHERE invoice_id = $1 AND status = 'pending'`, invoiceID)
	if err != nil {
		return apd.Decimal{}, fmt.Errorf("terminal: unable to read pending payments: %w", err)
	}
	var held apd.Decimal
	if _, _, err := held.SetString(text); err != nil {
		return apd.Decimal{}, fmt.Errorf("terminal: pending payments %q: %w", text, err)
	}
	return held, nil
}

// orderAlphabet: CardPointe's order ids are alphanumeric.
const orderAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// newOrderID is a payment's own short id at the gateway: 19 random
// characters (some 98 bits).
func newOrderID() (string, error) {
	b := make([]byte, 19)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("terminal: unable to make an order id: %w", err)
	}
	for i := range b {
		b[i] = orderAlphabet[int(b[i])%len(orderAlphabet)]
	}
	return string(b), nil
}

// payment reads one terminal payment of the organization through q.
func (s *Store) payment(ctx context.Context, q sqlx.QueryerContext, org, id uuid.UUID, lock string) (Payment, error) {
	var p Payment
	err := sqlx.GetContext(ctx, q, &p, `SELECT `+paymentColumns+` FROM terminal_payments p WHERE p.id = $1 AND p.organization_id = $2`+lock, id, org)
	if errors.Is(err, sql.ErrNoRows) {
		return Payment{}, ErrPaymentNotFound
	}
	if err != nil {
		return Payment{}, fmt.Errorf("terminal: unable to read terminal payment: %w", err)
	}
	return p, nil
}

// Payment reads one terminal payment of the organization.
func (s *Store) Payment(ctx context.Context, org, id uuid.UUID) (Payment, error) {
	return s.payment(ctx, s.DB, org, id, "")
}

// Filter narrows a list of terminal payments.
type Filter struct {
	TerminalID *uuid.UUID
	InvoiceID  *uuid.UUID
	Status     *string
}

// Payments is a page of the organization's terminal payments, newest
// first, and the cursor of the next page ("" on the last).
func (s *Store) Payments(ctx context.Context, org uuid.UUID, f Filter, limit int, after string) ([]Payment, string, error) {
	q := keyset.NewQuery(`SELECT `+paymentColumns+` FROM terminal_payments p`, "p.created_at", "p.id")
	q.Where("p.organization_id = $%d", org)
	if f.TerminalID != nil {
		q.Where("p.terminal_id = $%d", *f.TerminalID)
	}
	if f.InvoiceID != nil {
		q.Where("p.invoice_id = $%d", *f.InvoiceID)
	}
	if f.Status != nil {
		q.Where("p.status = $%d", *f.Status)
	}
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	list, next, err := keyset.Fetch(ctx, s.DB, q, limit, func(r *sql.Rows) (Payment, error) {
		var p Payment
		err := r.Scan(&p.ID, &p.OrganizationID, &p.TerminalID, &p.InvoiceID, &p.OrderID, &p.Amount, &p.Status, &p.CardPaymentID,
			&p.DeclineReason, &p.EntryMode, &p.CardBrand, &p.LastFour, &p.ApplicationLabel, &p.AID, &p.AskedAt, &p.CreatedAt, &p.UpdatedAt)
		return p, err
	}, func(p Payment) keyset.Cursor { return keyset.Cursor{At: p.CreatedAt, ID: p.ID} })
	if err != nil {
		return nil, "", fmt.Errorf("terminal: unable to list terminal payments: %w", err)
	}
	return list, next, nil
}

// Cancel cancels a pending payment, then tells its terminal to stop
// waiting for a card. A card the terminal took meanwhile is voided when
// its answer comes (outcome). Any other status is refused.
func (s *Store) Cancel(ctx context.Context, org, id uuid.UUID) (Payment, error) {
	var p Payment
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		cur, err := s.payment(ctx, tx, org, id, " FOR UPDATE")
		if err != nil {
			return err
		}
		if cur.Status != Pending {
			return rule.Newf(rule.Conflict, "", "Terminal payment not pending",
				"The terminal payment is %s; only a pending one can be cancelled.", cur.Status)
		}
		p, err = s.settle(ctx, tx, cur, Cancelled, settled{})
		return err
	})
	if err != nil {
		return Payment{}, err
	}
	if s.Terminals != nil && p.AskedAt != nil {
		t, err := s.Get(ctx, org, p.TerminalID)
		if err == nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = s.Terminals.CancelTerminal(cctx, t.MID, t.HSN) // the worker's answer comes either way
			cancel()
		}
	}
	return p, nil
}

// settled is what an outcome adds to a terminal payment.
type settled struct {
	cardPaymentID                                             *uuid.UUID
	declineReason, entryMode, cardBrand, lastFour, label, aid *string
}

// eventOf is each outcome's event.
var eventOf = map[string]event.Type[models.TerminalPayment]{
	Approved: event.TerminalPaymentApproved, Declined: event.TerminalPaymentDeclined, Cancelled: event.TerminalPaymentCancelled,
	TimedOut: event.TerminalPaymentTimedOut, Failed: event.TerminalPaymentFailed,
}

// settle moves a pending payment (locked in tx) to its outcome and writes
// its event, in tx.
func (s *Store) settle(ctx context.Context, tx *sqlx.Tx, p Payment, status string, o settled) (Payment, error) {
	now := s.Now()
	err := tx.GetContext(ctx, &p, `UPDATE terminal_payments p SET status = $2, card_payment_id = $3, decline_reason = $4,
			entry_mode = $5, card_brand = $6, last_four = $7, application_label = $8, aid = $9, updated_at = $10, claimed_until = NULL
		WHERE p.id = $1 RETURNING `+paymentColumns,
		p.ID, status, o.cardPaymentID, o.declineReason, o.entryMode, o.cardBrand, o.lastFour, o.label, o.aid, now)
	if err != nil {
		return Payment{}, fmt.Errorf("terminal: unable to record the outcome of terminal payment %s: %w", p.ID, err)
	}
	if _, err = event.Append(ctx, tx, p.OrganizationID, eventOf[status], p.Model(), now); err != nil {
		return Payment{}, err
	}
	if status != Failed && status != TimedOut {
		return p, nil
	}
	return p, s.notifyFailed(ctx, tx, p, now)
}

// notifyFailed tells the members who chose to hear of it that the terminal
// payment p failed or timed out, in the transaction that records it.
func (s *Store) notifyFailed(ctx context.Context, tx *sqlx.Tx, p Payment, at time.Time) error {
	members := s.CardPayments.Members
	if members == nil {
		return nil
	}
	why := "no outcome came from the terminal or the gateway in time"
	if p.Status == Failed {
		why = "it could not be taken"
		if r := optional.Value(p.DeclineReason); r != "" {
			why += ": " + clip.Marked(strings.Join(strings.Fields(r), " "), 200)
		}
	}
	amount := invoice.Money(p.Amount.Decimal)
	return members.Notify(ctx, tx, p.OrganizationID, people.Notification{
		Choice: people.NotifyTerminalFailed, Permission: event.Permission(event.TerminalPaymentFailed.Name),
		Subject: "A terminal payment of " + amount + " failed",
		Text: "A payment of " + amount + " at a card terminal failed (" + why + "); nothing was charged.\n\n" +
			s.CardPayments.Invoices.PublicURL + "/portal/invoices/" + p.InvoiceID.String(),
	}, at)
}

// PendingFor says whether a terminal is taking a payment toward the invoice
// (invoice.TerminalPayments: an invoice being paid at a terminal cannot be
// changed). Read under the invoice's row lock, which Create holds.
func (s *Store) PendingFor(ctx context.Context, q sqlx.QueryerContext, invoiceID uuid.UUID) (bool, error) {
	var pending bool
	err := sqlx.GetContext(ctx, q, &pending, `SELECT EXISTS (SELECT 1 FROM terminal_payments WHERE invoice_id = $1 AND status = 'pending')`, invoiceID)
	if err != nil {
		return false, fmt.Errorf("terminal: unable to read pending payments: %w", err)
	}
	return pending, nil
}
