package payment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

// RefundRequest is a refund as a merchant asks for it.
type RefundRequest struct {
	Actor  invoice.Actor // the organization and the key's name
	SaleID uuid.UUID
	Amount *apd.Decimal // nil: all that is left of the sale
	Reason *string
	// Key is the request's idempotency key, or nil.
	Key *string
}

// MaxReason is the longest reason a refund keeps, in characters.
const MaxReason = 500

// ErrNotRefundable: only an approved sale can be refunded.
var ErrNotRefundable = rule.New(rule.Unprocessable, "", "Not refundable",
	"Only an approved sale can be refunded; this card payment is a declined sale or a refund.")

// exceeds refuses a refund of more than is left of the sale: refundable.
func exceeds(refundable apd.Decimal) *rule.Error {
	e := rule.Newf(rule.Unprocessable, "amount", "Refund exceeds refundable amount",
		"At most %s of this sale can still be refunded.", refundable.Text('f'))
	e.Suggest = refundable.Text('f')
	return e
}

// check refuses what no refund may ask for, and gives the amount in cents,
// so that 10, "10" and "10.00" are one request.
func (r *RefundRequest) check() error {
	fields := map[string][]string{}
	if r.Amount != nil {
		if msg := invoice.AmountProblem(*r.Amount); msg != "" {
			fields["amount"] = []string{msg}
		} else {
			var c apd.Decimal
			if _, err := apd.BaseContext.WithPrecision(34).Quantize(&c, r.Amount, -2); err != nil {
				return err
			}
			r.Amount = &c
		}
	}
	if r.Reason != nil && (!utf8.ValidString(*r.Reason) || utf8.RuneCountInString(*r.Reason) > MaxReason) {
		fields["reason"] = []string{fmt.Sprintf("must be text of at most %d characters", MaxReason)}
	}
	if e := rule.InvalidFields(fields); e != nil {
		return e
	}
	return nil
}

// pendingRefundAge is when a pending refund may be settled without racing
// its own request: none is recorded later than PayTimeout after it.
const pendingRefundAge = PayTimeout + 2*time.Minute

// Refund gives money of an approved sale back to its card, in three steps
// so that no transaction is open, and no connection held, while the
// processor is asked, as Pay does:
//
//  1. reserve: a request with an idempotency key made already replays its
//     refund (replayed; idempotency.ErrReused for another request); then,
//     under the invoice's and the sale's row locks, the amount must be at
//     most what is left of the sale less the refunds under way, and a
//     pending refund is written, which holds that amount until the
//     answer is recorded. So refunds asked at once never add up to more
//     than the sale.
//  2. the processor is asked.
//  3. record, under the row locks again: the refund (approved or
//     declined) with what it does to the sale and the invoice, and the
//     pending refund deleted.
//
// A request with the key of a refund under way waits for it, then replays
// it. A processor failure records nothing (processor.ErrUnavailable). A
// refund whose answer was lost stays pending and is settled by asking the
// processor: later (SettlePendingRefunds), or first thing when its request
// is retried with the same key. The key is claimed in step 1 and given
// back when the processor made no refund, so that a retry may make one.
func (s *Store) Refund(ctx context.Context, r RefundRequest) (refund CardPayment, replayed bool, err error) {
	if err := r.check(); err != nil {
		return CardPayment{}, false, err
	}
	k, err := idempotency.OptionalKey(r.Key, r.SaleID, struct {
		Amount *apd.Decimal
		Reason *string
	}{r.Amount, r.Reason})
	if err != nil {
		return CardPayment{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, PayTimeout)
	defer cancel()
	org := r.Actor.OrganizationID
	h, err := s.reserveRefund(ctx, r, k)
	for err == nil && (h.wait || h.lost != nil) {
		if h.lost != nil {
			err = s.settleRefund(ctx, h.lost)
		} else if err = pause(ctx); err != nil {
			err = fmt.Errorf("payment: waiting for the refund under way with the idempotency key: %w", err)
		}
		if err == nil {
			h, err = s.reserveRefund(ctx, r, k)
		}
	}
	switch {
	case err != nil:
		return CardPayment{}, false, err
	case h.earlier != uuid.Nil:
		refund, err = s.CardPayment(ctx, org, h.earlier)
		return refund, true, err
	}
	p := h.pending
	res, err := s.Processor.Refund(ctx, p.ask(h.sale))
	if err == nil {
		err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error { return s.recordRefund(ctx, tx, p, res) })
	} else {
		err = fmt.Errorf("payment: refund of sale %s: %w", h.sale.ID, err)
	}
	switch {
	case err != nil && (res.Approved || errors.Is(err, processor.ErrUnsettled)):
		// The processor may have refunded: settle by asking it, at once.
		s.settlePendingRefundNow(ctx, p.RefundID, err)
		return CardPayment{}, false, err
	case err != nil:
		s.forgetPendingRefund(ctx, p) // the processor made no refund
		return CardPayment{}, false, err
	}
	refund, err = s.CardPayment(ctx, org, p.RefundID)
	return refund, false, err
}

// refundHold is what reserving a refund came to: the key's refund made
// already (earlier), a wait for the key's refund under way (wait), the
// key's refund whose answer was lost, to settle first (lost), or a refund
// whose pending refund is committed, so that the processor may be asked.
type refundHold struct {
	earlier uuid.UUID
	wait    bool
	lost    *pendingRefund
	pending *pendingRefund
	sale    CardPayment
}

// reserveRefund is step 1 of Refund, in a transaction of its own.
func (s *Store) reserveRefund(ctx context.Context, r RefundRequest, k *idempotency.Key) (h refundHold, err error) {
	org := r.Actor.OrganizationID
	id := uuid.Must(uuid.NewV7())
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		if k != nil {
			earlier, err := idempotency.Claim(ctx, tx, org, idempotency.RefundCardPayment, *k, id, now)
			if err != nil {
				return err
			}
			if earlier != uuid.Nil {
				h, err = keyedRefund(ctx, tx, org, earlier, now)
				if err != nil || h != (refundHold{}) {
					return err
				}
				// The key's refund came to nothing yet the key was kept:
				// it is this request's now.
				if err := idempotency.Release(ctx, tx, org, idempotency.RefundCardPayment, earlier); err != nil {
					return err
				}
				if _, err := idempotency.Claim(ctx, tx, org, idempotency.RefundCardPayment, *k, id, now); err != nil {
					return err
				}
			}
		}
		sale, _, err := lockSale(ctx, tx, org, r.SaleID)
		if err != nil {
			return err
		}
		refundable, err := refundableOf(ctx, tx, sale)
		if err != nil {
			return err
		}
		amount := refundable
		if r.Amount != nil {
			amount = *r.Amount
		}
		if refundable.Sign() <= 0 || amount.Cmp(&refundable) > 0 {
			return exceeds(refundable)
		}
		p := &pendingRefund{RefundID: id, OrganizationID: org, SaleID: sale.ID, Amount: amount,
			Whole: amount.Cmp(&sale.Amount) == 0, Reason: r.Reason, CreatedByName: r.Actor.Name, CreatedAt: now,
			SettleAfter: now.Add(pendingRefundAge)}
		if a := r.Actor.Audit; a != nil {
			p.AuditPerson, p.AuditActor, p.AuditAddress = a.Person, &a.Name, &a.Address
		}
		h.pending, h.sale = p, sale
		return writePendingRefund(ctx, tx, p)
	})
	return h, err
}

// keyedRefund is what became of refund id, which an earlier request with
// the same idempotency key reserved: under way (wait), its answer lost
// (lost), or made (earlier). The zero refundHold: none of these (the key
// was kept for a refund that came to nothing).
func keyedRefund(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, now time.Time) (refundHold, error) {
	// The pending refund first: recording it deletes it and writes its card
	// payment in one transaction, so it is then found by the read after.
	var p pendingRefund
	err := tx.GetContext(ctx, &p, selectPendingRefund+` WHERE organization_id = $1 AND refund_id = $2`, org, id)
	switch {
	case err == nil && p.LastError == nil && p.CreatedAt.After(now.Add(-PayTimeout)):
		// Its request may still record it.
		return refundHold{wait: true}, nil
	case err == nil:
		return refundHold{lost: &p}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return refundHold{}, fmt.Errorf("payment: unable to read pending refund: %w", err)
	}
	var made bool
	if err := tx.GetContext(ctx, &made, `SELECT EXISTS (SELECT 1 FROM card_payments WHERE id = $1)`, id); err != nil {
		return refundHold{}, fmt.Errorf("payment: unable to read card payment: %w", err)
	}
	if made {
		return refundHold{earlier: id}, nil
	}
	return refundHold{}, nil
}

// lockSale locks the invoice of an approved sale of the organization, then
// the sale. Sales are locked FOR NO KEY UPDATE: enough to keep their
// amountRefunded, and rows that reference them (pending refunds, refunds)
// may still be written by others meanwhile.
func lockSale(ctx context.Context, tx *sqlx.Tx, org, saleID uuid.UUID) (CardPayment, *invoice.Locked, error) {
	var invoiceID uuid.UUID
	err := tx.GetContext(ctx, &invoiceID, `SELECT invoice_id FROM card_payments WHERE id = $1 AND organization_id = $2`, saleID, org)
	if errors.Is(err, sql.ErrNoRows) {
		return CardPayment{}, nil, ErrNotFound
	}
	if err != nil {
		return CardPayment{}, nil, fmt.Errorf("payment: unable to read card payment: %w", err)
	}
	locked, err := invoice.Lock(ctx, tx, org, invoiceID)
	if err != nil {
		return CardPayment{}, nil, err
	}
	sale, err := scanCardPayment(tx.QueryRowContext(ctx, selectCardPayment+` WHERE c.id = $1 FOR NO KEY UPDATE OF c`, saleID))
	if err != nil {
		return CardPayment{}, nil, fmt.Errorf("payment: unable to lock card payment: %w", err)
	}
	if sale.Kind != Sale || sale.Status != Approved {
		return CardPayment{}, nil, ErrNotRefundable
	}
	return sale, locked, withNames(ctx, tx, &sale)
}

// refundableOf is what is left of a locked sale: its amount less its
// approved refunds and the refunds still pending on it.
func refundableOf(ctx context.Context, tx *sqlx.Tx, sale CardPayment) (apd.Decimal, error) {
	var pending string
	err := tx.GetContext(ctx, &pending, `SELECT coalesce(sum(amount), 0)::text FROM pending_refunds WHERE sale_id = $1`, sale.ID)
	if err != nil {
		return apd.Decimal{}, fmt.Errorf("payment: unable to read pending refunds: %w", err)
	}
	var left, held apd.Decimal
	if _, _, err := held.SetString(pending); err != nil {
		return apd.Decimal{}, err
	}
	if _, err := apd.BaseContext.WithPrecision(34).Sub(&left, &sale.Amount, &sale.AmountRefunded); err != nil {
		return apd.Decimal{}, err
	}
	if _, err := apd.BaseContext.WithPrecision(34).Sub(&left, &left, &held); err != nil {
		return apd.Decimal{}, err
	}
	return left, nil
}

// recordRefund writes the processor's answer to a pending refund, inside
// tx, under the sale's and its invoice's row locks: the refund's card
// payment, and when approved, what it adds to the sale's and the invoice's
// amountRefunded. It is recorded once: a second call for the same refund
// changes nothing.
func (s *Store) recordRefund(ctx context.Context, tx *sqlx.Tx, p *pendingRefund, res processor.RefundResult) error {
	sale, locked, err := lockSale(ctx, tx, p.OrganizationID, p.SaleID)
	if err != nil {
		return err
	}
	refund := CardPayment{
		ID: p.RefundID, OrganizationID: p.OrganizationID, Kind: Refund, Status: Approved, Amount: p.Amount,
		InvoiceID: sale.InvoiceID, MerchantAccountID: sale.MerchantAccountID, CardBrand: sale.CardBrand,
		LastFour: sale.LastFour, PayerName: sale.PayerName, RetRef: optional.String(res.RetRef), RefundOf: &sale.ID,
		Reason: p.Reason, CreatedAt: p.CreatedAt, CreatedByName: &p.CreatedByName,
	}
	if !res.Approved {
		reason := strings.TrimSpace(res.DeclineReason)
		if reason == "" {
			reason = "The refund was declined."
		}
		refund.Status, refund.DeclineReason, refund.RetRef = Declined, &reason, nil
	}
	stored, inserted, err := insertRefundOnce(ctx, tx, refund)
	if err != nil || !inserted {
		return errors.Join(err, deletePendingRefund(ctx, tx, p.RefundID))
	}
	if res.Approved {
		if _, err := tx.ExecContext(ctx, `UPDATE card_payments SET amount_refunded = amount_refunded + $2 WHERE id = $1`,
			sale.ID, p.Amount.Text('f')); err != nil {
			return fmt.Errorf("payment: unable to record the refund on its sale: %w", err)
		}
		locked.RecordRefund(p.Amount)
		if err := locked.Save(); err != nil {
			return err
		}
	}
	if err := deletePendingRefund(ctx, tx, p.RefundID); err != nil {
		return err
	}
	typ := event.CardPaymentRefunded
	if !res.Approved {
		typ = event.CardPaymentDeclined
	}
	now := s.Now()
	if _, err = event.Append(ctx, tx, p.OrganizationID, typ, stored.Model(), now); err != nil {
		return err
	}
	if res.Approved {
		err = queueReceipt(ctx, tx, locked, stored.ID, now)
	} else {
		err = s.notifyDeclined(ctx, tx, locked, stored, now)
	}
	if err != nil {
		return err
	}
	if p.AuditActor == nil {
		return nil
	}
	return audit.Append(ctx, tx, audit.Entry{Organization: &p.OrganizationID,
		Actor:  audit.Actor{Person: p.AuditPerson, Name: *p.AuditActor, Address: optional.Value(p.AuditAddress)},
		Action: audit.Refunded, At: now,
		Detail: stored.ID.String() + " of sale " + sale.ID.String() + " (" + sale.InvoiceNumber + "): " + invoice.Money(stored.Amount) + ", " + stored.Status})
}

// insertRefundOnce writes a refund's card payment unless it is there, and
// returns it as stored.
func insertRefundOnce(ctx context.Context, tx *sqlx.Tx, refund CardPayment) (CardPayment, bool, error) {
	var exists bool
	if err := tx.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM card_payments WHERE id = $1)`, refund.ID); err != nil {
		return CardPayment{}, false, fmt.Errorf("payment: unable to read card payment: %w", err)
	}
	if exists {
		return CardPayment{}, false, nil
	}
	stored, err := insertCardPayment(ctx, tx, refund)
	return stored, err == nil, err
}

// pendingRefund is a refund under way (table pending_refunds).
type pendingRefund struct {
	RefundID       uuid.UUID   `db:"refund_id"`
	OrganizationID uuid.UUID   `db:"organization_id"`
	SaleID         uuid.UUID   `db:"sale_id"`
	Amount         apd.Decimal `db:"-"`
	AmountText     string      `db:"amount"`
	Whole          bool        `db:"whole"`
	Reason         *string     `db:"reason"`
	CreatedByName  string      `db:"created_by_name"`
	CreatedAt      time.Time   `db:"created_at"`
	SettleAfter    time.Time   `db:"settle_after"`
	Attempts       int         `db:"attempts"`
	LastError      *string     `db:"last_error"`
	// Who asked, when a person did: audited where the refund is recorded.
	AuditPerson  *uuid.UUID `db:"audit_person_id"`
	AuditActor   *string    `db:"audit_actor"`
	AuditAddress *string    `db:"audit_address"`
}

// ask is what the processor is asked for the refund of sale.
func (p *pendingRefund) ask(sale CardPayment) processor.Refund {
	return processor.Refund{MerchantID: sale.MID, OrderID: p.RefundID.String(), SaleRetRef: optional.Value(sale.RetRef),
		SaleOrder: sale.ID.String(), LastFour: optional.Value(sale.LastFour), Amount: p.Amount, Whole: p.Whole}
}

// writePendingRefund commits, with the reservation, the trace of a refund
// under way.
func writePendingRefund(ctx context.Context, tx *sqlx.Tx, p *pendingRefund) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO pending_refunds (refund_id, organization_id, sale_id, amount, whole, reason,
			created_by_name, created_at, settle_after, audit_person_id, audit_actor, audit_address)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		p.RefundID, p.OrganizationID, p.SaleID, p.Amount.Text('f'), p.Whole, p.Reason, p.CreatedByName,
		p.CreatedAt, p.SettleAfter, p.AuditPerson, p.AuditActor, p.AuditAddress)
	if err != nil {
		return fmt.Errorf("payment: unable to record pending refund: %w", err)
	}
	return nil
}

func deletePendingRefund(ctx context.Context, tx *sqlx.Tx, id uuid.UUID) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM pending_refunds WHERE refund_id = $1`, id); err != nil {
		return fmt.Errorf("payment: unable to settle pending refund: %w", err)
	}
	return nil
}

// dropPendingRefund forgets, inside tx, a pending refund the processor did
// not make, and gives its idempotency key back: a retry may make it.
func dropPendingRefund(ctx context.Context, tx *sqlx.Tx, p *pendingRefund) error {
	if err := deletePendingRefund(ctx, tx, p.RefundID); err != nil {
		return err
	}
	return idempotency.Release(ctx, tx, p.OrganizationID, idempotency.RefundCardPayment, p.RefundID)
}

// forgetPendingRefund is dropPendingRefund for a refund whose request just
// failed. Should that fail, the row is settled later by asking the
// processor: harmless.
func (s *Store) forgetPendingRefund(ctx context.Context, p *pendingRefund) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error { return dropPendingRefund(ctx, tx, p) })
}

// settlePendingRefundNow makes a pending refund due at once: its request
// is over, so nothing else will record it.
func (s *Store) settlePendingRefundNow(ctx context.Context, id uuid.UUID, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.DB.ExecContext(ctx, `UPDATE pending_refunds SET settle_after = $2, last_error = $3 WHERE refund_id = $1`,
		id, s.Now(), clip.To(cause.Error(), 1000))
}

const selectPendingRefund = `SELECT refund_id, organization_id, sale_id, amount::text AS amount, whole, reason,
	created_by_name, created_at, settle_after, attempts, last_error, audit_person_id, audit_actor, audit_address FROM pending_refunds`

// settleRefund asks the processor what became of a pending refund and
// records it (approved or declined), or forgets it when the processor made
// none.
func (s *Store) settleRefund(ctx context.Context, p *pendingRefund) error {
	if _, _, err := p.Amount.SetString(p.AmountText); err != nil {
		return fmt.Errorf("payment: pending refund %s: amount %q: %w", p.RefundID, p.AmountText, err)
	}
	sale, err := s.CardPayment(ctx, p.OrganizationID, p.SaleID)
	if err != nil {
		return err
	}
	res, found, err := s.Processor.InquireRefund(ctx, p.ask(sale))
	if err != nil {
		return fmt.Errorf("payment: inquire refund %s: %w", p.RefundID, err)
	}
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if !found {
			return dropPendingRefund(ctx, tx, p)
		}
		return s.recordRefund(ctx, tx, p, res)
	})
}

// SettlePendingRefunds settles the due pending refunds: refunds whose
// answer was lost. One that cannot be settled yet (the processor does not
// answer) is tried again after a growing wait; each failure is logged.
// Several instances may run it at once.
func (s *Store) SettlePendingRefunds(ctx context.Context, log *slog.Logger) error {
	now := s.Now()
	var due []pendingRefund
	err := s.claimDue(ctx, &due, "pending_refunds", "refund_id", "settle_after", `p.refund_id, p.organization_id, p.sale_id,
		p.amount::text AS amount, p.whole, p.reason, p.created_by_name, p.created_at, p.settle_after, p.attempts, p.last_error,
		p.audit_person_id, p.audit_actor, p.audit_address`, now)
	if err != nil {
		return fmt.Errorf("payment: unable to claim pending refunds: %w", err)
	}
	for i := range due {
		p := &due[i]
		if err := s.settleRefund(ctx, p); err != nil {
			log.Error("payment: pending refund not settled yet", "refund_id", p.RefundID.String(), "attempt", p.Attempts, "error", err.Error())
			_, _ = s.DB.ExecContext(ctx, `UPDATE pending_refunds SET last_error = $2 WHERE refund_id = $1`, p.RefundID, clip.To(err.Error(), 1000))
			continue
		}
		log.Warn("payment: pending refund settled", "refund_id", p.RefundID.String(), "attempt", p.Attempts)
	}
	return nil
}
