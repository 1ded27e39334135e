package terminal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

// A worker holds each pending payment it handles for lease, renewed every
// renewEvery while it waits on the terminal: a payment whose instance
// stopped is taken by another (or the next start) within a lease.
const (
	lease      = 30 * time.Second
	renewEvery = 10 * time.Second
	claimBatch = 20
)

// Words of outcomes that are not the issuer's.
const (
	reasonBusy    = "The terminal is in use by another payment or system."
	reasonOffline = "The terminal is offline."
	reasonVoided  = "The invoice could no longer take this payment (paid or cancelled meanwhile); the charge was voided."
)

// claimed is a pending payment a worker holds, with what asking its
// terminal takes.
type claimed struct {
	Payment
	HSN, MID, InvoiceRef string
}

// Work claims the pending payments no instance holds and handles each,
// and returns once each is handled: asked of its terminal, or resolved at
// the gateway. It returns how many it claimed.
func (s *Store) Work(ctx context.Context, log *slog.Logger) (int, error) {
	var wg sync.WaitGroup
	n, err := s.start(ctx, &wg, log)
	wg.Wait()
	return n, err
}

// RunWorker claims pending payments every poll until ctx ends, each
// handled in a goroutine of its own (one payment per terminal), and waits
// for those under way when it ends: a payment whose terminal was asked
// stays pending, for the next start to resolve at the gateway.
func (s *Store) RunWorker(ctx context.Context, poll time.Duration, log *slog.Logger) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := s.start(ctx, &wg, log); err != nil && ctx.Err() == nil {
			log.Error("terminal: claim terminal payments", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// start claims what is due and starts handling each in wg.
func (s *Store) start(ctx context.Context, wg *sync.WaitGroup, log *slog.Logger) (int, error) {
	if s.Terminals == nil {
		return 0, nil
	}
	due, err := s.claim(ctx)
	if err != nil {
		return 0, err
	}
	for _, c := range due {
		wg.Go(func() { s.handle(ctx, c, log) })
	}
	return len(due), nil
}

// claim takes, for a lease, the pending payments whose lease is over (or
// that none held), once across instances.
func (s *Store) claim(ctx context.Context) ([]claimed, error) {
	now := s.Now()
	var ps []Payment
	err := s.DB.SelectContext(ctx, &ps, `WITH due AS (
			SELECT id FROM terminal_payments WHERE status = 'pending' AND (claimed_until IS NULL OR claimed_until <= $1)
			ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		UPDATE terminal_payments p SET claimed_until = $2 FROM due WHERE p.id = due.id
		RETURNING `+paymentColumns, now, now.Add(lease), claimBatch)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	var terminals, invoices []uuid.UUID
	for _, p := range ps {
		terminals, invoices = append(terminals, p.TerminalID), append(invoices, p.InvoiceID)
	}
	var ts []struct {
		ID                uuid.UUID `db:"id"`
		HSN               string    `db:"hsn"`
		MerchantAccountID uuid.UUID `db:"merchant_account_id"`
	}
	if err := s.DB.SelectContext(ctx, &ts, `SELECT id, hsn, merchant_account_id FROM terminals WHERE id = ANY($1::uuid[])`, pq.Array(terminals)); err != nil {
		return nil, fmt.Errorf("terminal: unable to read terminals: %w", err)
	}
	var accounts []uuid.UUID
	for _, t := range ts {
		accounts = append(accounts, t.MerchantAccountID)
	}
	mids, err := directory.AccountsByID(ctx, s.DB, accounts)
	if err != nil {
		return nil, err
	}
	numbers, err := invoice.Numbers(ctx, s.DB, invoices)
	if err != nil {
		return nil, err
	}
	out := make([]claimed, len(ps))
	for i, p := range ps {
		out[i] = claimed{Payment: p, InvoiceRef: first(numbers[p.InvoiceID], 12)}
		for _, t := range ts {
			if t.ID == p.TerminalID {
				out[i].HSN, out[i].MID = t.HSN, mids[t.MerchantAccountID].MID
			}
		}
	}
	return out, nil
}

// first is s cut to n characters.
func first(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		r = r[:n]
	}
	return string(r)
}

// handle asks the terminal, once: a payment asked before (by an instance
// that stopped, or whose answer was lost) is resolved at the gateway.
func (s *Store) handle(ctx context.Context, c claimed, log *slog.Logger) {
	stop := s.renew(ctx, c.ID)
	defer stop()
	if c.AskedAt != nil {
		s.resolve(ctx, c, log)
		return
	}
	var res sql.Result
	err := postgres.Retry(ctx, func() (err error) {
		res, err = s.DB.ExecContext(ctx, `UPDATE terminal_payments SET asked_at = $2 WHERE id = $1 AND status = 'pending' AND asked_at IS NULL`,
			c.ID, s.Now())
		return err
	})
	if err != nil {
		log.Error("terminal: mark payment asked", "terminal_payment", c.ID.String(), "error", err.Error())
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return // cancelled meanwhile (or asked by a try whose answer was lost: resolved once the lease ends)
	}
	actx, cancel := context.WithDeadline(ctx, c.CreatedAt.Add(s.timeout()))
	answer, err := s.Terminals.AuthCard(actx, processor.TerminalSale{MerchantID: c.MID, HSN: c.HSN, OrderID: c.OrderID,
		InvoiceRef: c.InvoiceRef, Amount: c.Amount.Decimal})
	cancel()
	switch {
	case ctx.Err() != nil:
		// Stopping: the payment stays pending, asked; the next start
		// resolves it at the gateway.
	case err == nil:
		s.outcome(ctx, c, answer, log)
	case errors.Is(err, processor.ErrTerminalCancelled):
		s.finish(ctx, c, Cancelled, "", log)
	case errors.Is(err, processor.ErrTerminalBusy):
		s.finish(ctx, c, Failed, reasonBusy, log)
	case errors.Is(err, processor.ErrTerminalOffline):
		s.finish(ctx, c, Failed, reasonOffline, log)
	default:
		log.Warn("terminal: no answer from the terminal; asking the gateway", "terminal_payment", c.ID.String(), "error", err.Error())
		s.resolve(ctx, c, log)
	}
}

func (s *Store) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

// renew keeps the payment's lease while it is handled, until stop.
func (s *Store) renew(ctx context.Context, id uuid.UUID) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(renewEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = s.DB.ExecContext(ctx, `UPDATE terminal_payments SET claimed_until = $2 WHERE id = $1 AND status = 'pending'`,
					id, s.Now().Add(lease))
			}
		}
	}()
	return func() { cancel(); <-done }
}

// resolve settles a payment whose terminal gave no answer: the terminal is
// told to stop, then the gateway is asked for the order. Found, its
// outcome stands; not found, the payment timed out. A gateway that cannot
// be asked leaves it pending, for the next claim.
func (s *Store) resolve(ctx context.Context, c claimed, log *slog.Logger) {
	if err := s.Terminals.CancelTerminal(ctx, c.MID, c.HSN); err != nil && ctx.Err() == nil {
		log.Warn("terminal: cancel at the terminal", "terminal_payment", c.ID.String(), "error", err.Error())
	}
	answer, found, err := s.Terminals.InquireOrder(ctx, c.MID, c.OrderID)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			log.Error("terminal: the gateway cannot tell the outcome yet; asking again later", "terminal_payment", c.ID.String(), "error", err.Error())
		}
	case found:
		s.outcome(ctx, c, answer, log)
	default:
		s.finish(ctx, c, TimedOut, "", log)
	}
}

// errNotTaken: the invoice could not take an approved charge.
var errNotTaken = errors.New("terminal: the invoice cannot take the approved charge")

// outcome records the gateway's answer in one transaction: the card
// payment (through package payment), the payment's outcome and events,
// tried again while the database is unavailable (failing over; the lease
// is renewed meanwhile). An approval that cannot be recorded (the payment
// cancelled or timed out meanwhile, or the invoice paid or cancelled) is
// voided at the gateway; one recorded already (by a try whose commit's
// answer was lost) stands.
func (s *Store) outcome(ctx context.Context, c claimed, answer processor.TerminalResult, log *slog.Logger) {
	cancelled := false
	err := postgres.Retry(ctx, func() error {
		return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
			cur, err := s.payment(ctx, tx, c.OrganizationID, c.ID, " FOR UPDATE")
			if err != nil {
				return err
			}
			if cur.Status != Pending {
				cancelled = cur.CardPaymentID == nil
				return nil
			}
			sale, err := s.CardPayments.RecordTerminalSale(ctx, tx, payment.TerminalSale{OrganizationID: c.OrganizationID,
				InvoiceID: c.InvoiceID, TerminalID: c.TerminalID, Amount: c.Amount.Decimal, Result: answer}, s.Now())
			if rule.As(err) != nil && answer.Approved {
				return fmt.Errorf("%w: %w", errNotTaken, err)
			}
			if err != nil {
				return err
			}
			status := Approved
			o := settled{cardPaymentID: &sale.ID, entryMode: optional.String(answer.EntryMode), cardBrand: sale.CardBrand,
				lastFour: sale.LastFour, label: optional.String(answer.ApplicationLabel), aid: optional.String(answer.AID)}
			if !answer.Approved {
				status, o.declineReason = Declined, sale.DeclineReason
			}
			_, err = s.settle(ctx, tx, cur, status, o)
			return err
		})
	})
	switch {
	case errors.Is(err, errNotTaken):
		if s.void(ctx, c, log) {
			s.finish(ctx, c, Failed, reasonVoided, log)
		}
	case err != nil:
		if ctx.Err() == nil {
			log.Error("terminal: record the outcome; resolving it again later", "terminal_payment", c.ID.String(), "error", err.Error())
		}
	case cancelled && answer.Approved:
		s.void(ctx, c, log)
	}
}

// void voids the order at the gateway, and says whether it did.
func (s *Store) void(ctx context.Context, c claimed, log *slog.Logger) bool {
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.Gateway.Void(vctx, c.MID, c.OrderID); err != nil {
		log.Error("terminal: a charge the invoice could not take is not voided yet; the card may be charged",
			"terminal_payment", c.ID.String(), "order_id", c.OrderID, "error", err.Error())
		return false
	}
	log.Warn("terminal: charge voided", "terminal_payment", c.ID.String(), "order_id", c.OrderID)
	return true
}

// finish records an outcome without a card payment, if the payment is
// still pending, tried again while the database is unavailable.
func (s *Store) finish(ctx context.Context, c claimed, status, reason string, log *slog.Logger) {
	err := postgres.Retry(ctx, func() error {
		return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
			cur, err := s.payment(ctx, tx, c.OrganizationID, c.ID, " FOR UPDATE")
			if err != nil || cur.Status != Pending {
				return err
			}
			_, err = s.settle(ctx, tx, cur, status, settled{declineReason: optional.String(reason)})
			return err
		})
	})
	if err != nil && ctx.Err() == nil {
		log.Error("terminal: record the outcome; resolving it again later", "terminal_payment", c.ID.String(), "status", status, "error", err.Error())
	}
}
