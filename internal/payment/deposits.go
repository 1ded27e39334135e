package payment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

// Deposit statuses.
const (
	DepositPending = "pending"
	DepositPaid    = "paid"
)

// Deposit is the money the processor sends to the merchant's bank for one
// MID's batch. NetAmount = SalesAmount - RefundsAmount - FeesAmount, and
// may be negative.
type Deposit struct {
	ID                uuid.UUID
	OrganizationID    uuid.UUID
	MerchantAccountID uuid.UUID
	MID               string
	BatchDate         time.Time // a date: the day the batch closed, in the location's time zone
	ExpectedAt        time.Time // a date: the day the money should arrive
	Status            string
	PaidAt            *time.Time
	SalesCount        int
	SalesAmount       apd.Decimal
	RefundsCount      int
	RefundsAmount     apd.Decimal
	FeesAmount        apd.Decimal
	NetAmount         apd.Decimal
	CreatedAt         time.Time
}

// ErrDepositNotFound: no deposit of that id in the organization.
var ErrDepositNotFound = rule.New(rule.NotFound, "", "Deposit not found", "No deposit with this id exists in your organization.")

// ErrUnknownOrganization: settle was asked for an organization that does not exist.
var ErrUnknownOrganization = errors.New("payment: no such organization")

// depositColumns are what every read of deposits (d) selects;
// scanDeposit reads them, and withMIDs adds their MIDs.
const depositColumns = `d.id, d.organization_id, d.merchant_account_id, d.batch_date, d.expected_at, d.status, d.paid_at,
		d.sales_count, d.sales_amount::text, d.refunds_count, d.refunds_amount::text, d.fees_amount::text,
		d.net_amount::text, d.created_at`

const selectDeposit = `
	SELECT ` + depositColumns + `
	FROM deposits d`

func scanDeposit(row scanner) (Deposit, error) {
	var d Deposit
	var sales, refunds, fees, net string
	err := row.Scan(&d.ID, &d.OrganizationID, &d.MerchantAccountID, &d.BatchDate, &d.ExpectedAt, &d.Status,
		&d.PaidAt, &d.SalesCount, &sales, &d.RefundsCount, &refunds, &fees, &net, &d.CreatedAt)
	if err != nil {
		return Deposit{}, err
	}
	for _, a := range []struct {
		to   *apd.Decimal
		text string
	}{{&d.SalesAmount, sales}, {&d.RefundsAmount, refunds}, {&d.FeesAmount, fees}, {&d.NetAmount, net}} {
		if _, _, err := a.to.SetString(a.text); err != nil {
			return Deposit{}, fmt.Errorf("payment: deposit amount %q: %w", a.text, err)
		}
	}
	return d, nil
}

// withMIDs sets the deposits' MIDs, directory's, read through q in one
// statement for them all.
func withMIDs(ctx context.Context, q sqlx.QueryerContext, ds ...*Deposit) error {
	var ids []uuid.UUID
	for _, d := range ds {
		if !slices.Contains(ids, d.MerchantAccountID) {
			ids = append(ids, d.MerchantAccountID)
		}
	}
	accounts, err := directory.AccountsByID(ctx, q, ids)
	if err != nil {
		return err
	}
	for _, d := range ds {
		d.MID = accounts[d.MerchantAccountID].MID
	}
	return nil
}

// Deposit reads one deposit of the organization.
func (s *Store) Deposit(ctx context.Context, org, id uuid.UUID) (Deposit, error) {
	d, err := scanDeposit(s.DB.QueryRowxContext(ctx, selectDeposit+` WHERE d.id = $1 AND d.organization_id = $2`, id, org))
	if errors.Is(err, sql.ErrNoRows) {
		return Deposit{}, ErrDepositNotFound
	}
	if err != nil {
		return Deposit{}, fmt.Errorf("payment: unable to read deposit: %w", err)
	}
	return d, withMIDs(ctx, s.DB, &d)
}

// DepositFilter narrows a list of deposits.
type DepositFilter struct {
	MerchantAccountID *uuid.UUID
	Status            *string
	CreatedFrom       *time.Time
	CreatedTo         *time.Time
}

// Deposits returns a page of the organization's deposits, newest first, and
// the cursor of the next page ("" on the last).
func (s *Store) Deposits(ctx context.Context, org uuid.UUID, f DepositFilter, limit int, after string) ([]Deposit, string, error) {
	q := keyset.NewQuery(selectDeposit, "d.created_at", "d.id")
	q.Where("d.organization_id = $%d", org)
	if f.MerchantAccountID != nil {
		q.Where("d.merchant_account_id = $%d", *f.MerchantAccountID)
	}
	if f.Status != nil {
		q.Where("d.status = $%d", *f.Status)
	}
	q.Created(f.CreatedFrom, f.CreatedTo)
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	list, next, err := keyset.Fetch(ctx, s.DB, q, limit, func(r *sql.Rows) (Deposit, error) { return scanDeposit(r) },
		func(d Deposit) keyset.Cursor { return keyset.Cursor{At: d.CreatedAt, ID: d.ID} })
	if err != nil {
		return nil, "", fmt.Errorf("payment: unable to list deposits: %w", err)
	}
	page := make([]*Deposit, len(list))
	for i := range list {
		page[i] = &list[i]
	}
	return list, next, withMIDs(ctx, s.DB, page...)
}

// DepositsPending counts the organization's deposits not paid yet and sums
// their net amounts: the money on its way to the bank.
func (s *Store) DepositsPending(ctx context.Context, org uuid.UUID) (count int, net apd.Decimal, err error) {
	var total string
	err = s.DB.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(net_amount), 0)::text FROM deposits
		WHERE organization_id = $1 AND status = 'pending'`, org).Scan(&count, &total)
	if err != nil {
		return 0, apd.Decimal{}, fmt.Errorf("payment: unable to sum pending deposits: %w", err)
	}
	if _, _, err := net.SetString(total); err != nil {
		return 0, apd.Decimal{}, fmt.Errorf("payment: pending deposits' sum %q: %w", total, err)
	}
	return count, net, nil
}

// DayNet is what an organization's deposits of one batch day come to.
type DayNet struct {
	Day   time.Time // a date
	Count int
	Net   apd.Decimal
}

// DailyNet sums the net amounts of the organization's deposits by their
// batch date, for each day from first to last (dates, both included; a
// day without deposits is 0), oldest first.
func (s *Store) DailyNet(ctx context.Context, org uuid.UUID, first, last time.Time) ([]DayNet, error) {
	var rows []struct {
		Day   time.Time `db:"day"`
		Count int       `db:"count"`
		Net   string    `db:"net"`
	}
	// The days' bounds are in the sum's own condition: the prepared
	// statement's generic plan reads the index for those days only, not
	// every deposit the organization ever had.
	err := s.DB.SelectContext(ctx, &rows, `
		SELECT day::date AS day, coalesce(n.count, 0) AS count, coalesce(n.net, 0.00)::text AS net
		FROM generate_series($2::date, $3::date, interval '1 day') AS day
		LEFT JOIN (
			SELECT batch_date, count(*) AS count, sum(net_amount) AS net FROM deposits
			WHERE organization_id = $1 AND batch_date BETWEEN $2::date AND $3::date GROUP BY batch_date
		) n ON n.batch_date = day::date
		ORDER BY day`, org, first.Format(time.DateOnly), last.Format(time.DateOnly))
	if err != nil {
		return nil, fmt.Errorf("payment: unable to sum deposits by day: %w", err)
	}
	out := make([]DayNet, len(rows))
	for i, r := range rows {
		out[i] = DayNet{Day: r.Day, Count: r.Count}
		if _, _, err := out[i].Net.SetString(r.Net); err != nil {
			return nil, fmt.Errorf("payment: daily net %q: %w", r.Net, err)
		}
	}
	return out, nil
}

// batchMID is a merchant account whose batch may close.
type batchMID struct {
	ID             uuid.UUID
	OrganizationID uuid.UUID
	MID            string
	TimeZone       string
	ClosedUntil    *time.Time // nil: its batch never closed
}

// batchMIDs are the merchant accounts of org (every organization's when
// nil), by MID, each with the end of its last closed batch.
func (s *Store) batchMIDs(ctx context.Context, org *uuid.UUID) ([]batchMID, error) {
	accounts, err := directory.AccountsOf(ctx, s.DB, org)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(accounts))
	for i, a := range accounts {
		ids[i] = a.ID
	}
	var closings []struct {
		ID    uuid.UUID `db:"merchant_account_id"`
		Until time.Time `db:"closed_until"`
	}
	if err := s.DB.SelectContext(ctx, &closings, `SELECT merchant_account_id, closed_until FROM batch_closings
		WHERE merchant_account_id = ANY($1::uuid[])`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("payment: unable to list merchant accounts to settle: %w", err)
	}
	closed := make(map[uuid.UUID]time.Time, len(closings))
	for _, c := range closings {
		closed[c.ID] = c.Until
	}
	mids := make([]batchMID, len(accounts))
	for i, a := range accounts {
		mids[i] = batchMID{ID: a.ID, OrganizationID: a.OrganizationID, MID: a.MID, TimeZone: a.TimeZone}
		if until, ok := closed[a.ID]; ok {
			mids[i].ClosedUntil = &until
		}
	}
	return mids, nil
}

// lastCutoff is the latest cutoff (local time of day) at or before now in
// loc, and the day it falls on.
func lastCutoff(now time.Time, loc *time.Location, cutoff time.Duration) (at, day time.Time) {
	h, m := int(cutoff/time.Hour), int(cutoff%time.Hour/time.Minute)
	local := now.In(loc)
	at = time.Date(local.Year(), local.Month(), local.Day(), h, m, 0, 0, loc)
	if at.After(now) {
		at = time.Date(local.Year(), local.Month(), local.Day()-1, h, m, 0, 0, loc)
	}
	return at, time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
}

// CloseDueBatches closes the batch of every MID whose daily cutoff
// (SettlementCutoff, local time of its location) has passed since its
// batch last closed, and returns the deposits made. Several instances may
// run it at once: each batch closes once. A batch that cannot close (the
// processor unreachable) is logged and tried again at the next run.
func (s *Store) CloseDueBatches(ctx context.Context, log *slog.Logger) ([]Deposit, error) {
	mids, err := s.batchMIDs(ctx, nil)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	var made []Deposit
	for _, m := range mids {
		loc, err := time.LoadLocation(m.TimeZone)
		if err != nil {
			log.Error("payment: batch not closed: unknown time zone", "mid", m.MID, "time_zone", m.TimeZone)
			continue
		}
		until, day := lastCutoff(now, loc, s.SettlementCutoff)
		if m.ClosedUntil != nil && !m.ClosedUntil.Before(until) {
			continue
		}
		deposits, err := s.closeBatch(ctx, m, until, day, true, log)
		if err != nil {
			// Tried again at the next run; the other MIDs close meanwhile.
			if ctx.Err() != nil {
				return made, err
			}
			log.Error("payment: batch not closed yet", "mid", m.MID, "error", err.Error())
			continue
		}
		made = append(made, deposits...)
	}
	return made, nil
}

// SettleOrganization closes every open batch of the organization now
// (batches dated today in each location's time zone), then marks the
// deposits whose day has come paid. It returns the deposits made.
func (s *Store) SettleOrganization(ctx context.Context, org uuid.UUID, log *slog.Logger) ([]Deposit, error) {
	exists, err := directory.OrganizationExists(ctx, s.DB, org)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, ErrUnknownOrganization
	}
	mids, err := s.batchMIDs(ctx, &org)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	var made []Deposit
	for _, m := range mids {
		loc, err := time.LoadLocation(m.TimeZone)
		if err != nil {
			return made, fmt.Errorf("payment: MID %s: time zone %q: %w", m.MID, m.TimeZone, err)
		}
		local := now.In(loc)
		deposits, err := s.closeBatch(ctx, m, now, time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC), false, log)
		if err != nil {
			return made, err
		}
		made = append(made, deposits...)
	}
	if _, err := s.MarkDepositsPaid(ctx); err != nil {
		return made, err
	}
	for i := range made {
		d, err := s.Deposit(ctx, org, made[i].ID)
		if err != nil {
			return made, err
		}
		made[i] = d
	}
	return made, nil
}

type openPayment struct {
	ID     uuid.UUID `db:"id"`
	Kind   string    `db:"kind"`
	Amount string    `db:"amount"`
	RetRef string    `db:"ret_ref"`
}

// closeBatch closes the MID's batch at until: the approved payments made
// up to it and in no deposit yet go to the processor's fundings, one
// deposit each. The processor is asked with no transaction open, about the
// payments open then; the deposits are written in one transaction under
// the MID's batch_closings row lock, once the batch is found to be still
// what the processor was asked about (else the closing starts again, at
// most batchTries times). An empty batch makes nothing; so does a cutoff's
// batch (atCutoff) already closed at until by another instance.
func (s *Store) closeBatch(ctx context.Context, m batchMID, until, day time.Time, atCutoff bool, log *slog.Logger) ([]Deposit, error) {
	for try := 1; ; try++ {
		made, err := s.closeBatchOnce(ctx, m, until, day, atCutoff, log)
		if errors.Is(err, errBatchChanged) && try < batchTries {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("payment: unable to close the batch of MID %s: %w", m.MID, err)
		}
		return made, nil
	}
}

// batchTries bounds the closings of a batch that changed while the
// processor was asked (a payment recorded meanwhile, or another closing).
const batchTries = 3

var errBatchChanged = errors.New("payment: the batch changed while the processor was asked")

const selectOpenPayments = `SELECT id, kind, amount::text AS amount, coalesce(ret_ref, '') AS ret_ref
	FROM card_payments
	WHERE merchant_account_id = $1 AND status = 'approved' AND deposit_id IS NULL AND created_at <= $2
	ORDER BY created_at, id`

func (s *Store) closeBatchOnce(ctx context.Context, m batchMID, until, day time.Time, atCutoff bool, log *slog.Logger) ([]Deposit, error) {
	var asked []openPayment
	if err := s.DB.SelectContext(ctx, &asked, selectOpenPayments, m.ID, until); err != nil {
		return nil, err
	}
	batch, err := batchOf(m, day, asked)
	if err != nil {
		return nil, err
	}
	var fundings []processor.Funding
	if len(asked) > 0 {
		if fundings, err = s.Processor.Settle(ctx, batch); err != nil {
			return nil, fmt.Errorf("payment: settle MID %s: %w", m.MID, err)
		}
	}
	var made []Deposit
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO batch_closings (merchant_account_id, closed_until) VALUES ($1, 'epoch')
			ON CONFLICT DO NOTHING`, m.ID); err != nil {
			return err
		}
		var closed bool
		if err := tx.GetContext(ctx, &closed, `SELECT closed_until >= $2 FROM batch_closings WHERE merchant_account_id = $1 FOR UPDATE`,
			m.ID, until); err != nil {
			return err
		}
		if closed && atCutoff {
			return nil // another instance closed it meanwhile
		}
		var open []openPayment
		if err := tx.SelectContext(ctx, &open, selectOpenPayments+` FOR UPDATE`, m.ID, until); err != nil {
			return err
		}
		if !slices.Equal(open, asked) {
			return errBatchChanged
		}
		if len(open) > 0 {
			var err error
			if made, err = s.fund(ctx, tx, m, day, open, batch, fundings, log); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE batch_closings SET closed_until = greatest(closed_until, $2) WHERE merchant_account_id = $1`, m.ID, until)
		return err
	})
	if err != nil {
		return nil, err
	}
	return made, nil
}

// batchOf is the batch of the open payments, as the processor is asked
// about it.
func batchOf(m batchMID, day time.Time, open []openPayment) (processor.Batch, error) {
	batch := processor.Batch{MerchantID: m.MID, Date: day}
	for _, p := range open {
		bp := processor.BatchPayment{RetRef: p.RetRef, Refund: p.Kind == Refund}
		if _, _, err := bp.Amount.SetString(p.Amount); err != nil {
			return processor.Batch{}, fmt.Errorf("payment: card payment %s amount %q: %w", p.ID, p.Amount, err)
		}
		batch.Payments = append(batch.Payments, bp)
	}
	return batch, nil
}

// fund writes a deposit for each of the processor's fundings of the open
// payments (batch) that holds any of them.
func (s *Store) fund(ctx context.Context, tx *sqlx.Tx, m batchMID, day time.Time, open []openPayment, batch processor.Batch,
	fundings []processor.Funding, log *slog.Logger) ([]Deposit, error) {
	byRetRef := map[string][]int{}
	for i, p := range open {
		byRetRef[p.RetRef] = append(byRetRef[p.RetRef], i)
	}
	decimals := apd.BaseContext.WithPrecision(34)
	var made []Deposit
	var err error
	for _, f := range fundings {
		d := Deposit{ID: uuid.New(), OrganizationID: m.OrganizationID, MerchantAccountID: m.ID, MID: m.MID,
			BatchDate: day, ExpectedAt: f.ExpectedAt, Status: DepositPending, FeesAmount: f.Fees, CreatedAt: s.Now()}
		var ids []string
		var fees []*string // each payment's, when the processor says
		for _, ref := range f.RetRefs {
			for _, i := range byRetRef[ref] {
				p := batch.Payments[i]
				if fee, ok := f.PaymentFees[ref]; ok {
					fees = append(fees, optional.String(fee.Text('f')))
				} else {
					fees = append(fees, nil)
				}
				if p.Refund {
					d.RefundsCount++
					_, err = decimals.Add(&d.RefundsAmount, &d.RefundsAmount, &p.Amount)
				} else {
					d.SalesCount++
					_, err = decimals.Add(&d.SalesAmount, &d.SalesAmount, &p.Amount)
				}
				if err != nil {
					return nil, fmt.Errorf("payment: deposit sums: %w", err)
				}
				ids = append(ids, open[i].ID.String())
			}
			delete(byRetRef, ref) // a payment goes to one funding
		}
		if len(ids) == 0 {
			log.Warn("payment: funding holds none of the open payments; no deposit made", "mid", m.MID, "funding", f.Ref)
			continue
		}
		if _, err := decimals.Sub(&d.NetAmount, &d.SalesAmount, &d.RefundsAmount); err != nil {
			return nil, fmt.Errorf("payment: deposit sums: %w", err)
		}
		if _, err := decimals.Sub(&d.NetAmount, &d.NetAmount, &d.FeesAmount); err != nil {
			return nil, fmt.Errorf("payment: deposit sums: %w", err)
		}
		var ref *string
		if f.Ref != "" {
			ref = &f.Ref
		}
		// The deposit as stored (as GET /deposits/{id} shows it): its
		// event's data and what settle prints.
		stored, err := scanDeposit(tx.QueryRowxContext(ctx, `
			WITH d AS (
				INSERT INTO deposits (id, organization_id, merchant_account_id, processor_ref, batch_date,
					expected_at, status, sales_count, sales_amount, refunds_count, refunds_amount, fees_amount, net_amount, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
				ON CONFLICT (merchant_account_id, processor_ref) DO NOTHING
				RETURNING *
			)
			SELECT `+depositColumns+` FROM d`,
			d.ID, d.OrganizationID, d.MerchantAccountID, ref, d.BatchDate.Format(time.DateOnly), d.ExpectedAt.Format(time.DateOnly),
			d.Status, d.SalesCount, d.SalesAmount.Text('f'), d.RefundsCount, d.RefundsAmount.Text('f'), d.FeesAmount.Text('f'),
			d.NetAmount.Text('f'), d.CreatedAt))
		if errors.Is(err, sql.ErrNoRows) {
			log.Warn("payment: funding already recorded as a deposit", "mid", m.MID, "funding", f.Ref)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("payment: unable to record deposit: %w", err)
		}
		stored.MID = m.MID
		if _, err := tx.ExecContext(ctx, `UPDATE card_payments c SET deposit_id = $1, fee_amount = f.fee
			FROM unnest($2::uuid[], $3::numeric[]) AS f (id, fee) WHERE c.id = f.id`,
			d.ID, pq.Array(ids), pq.Array(fees)); err != nil {
			return nil, fmt.Errorf("payment: unable to record deposit: %w", err)
		}
		if _, err := event.Append(ctx, tx, d.OrganizationID, event.DepositCreated, stored.Model(), d.CreatedAt); err != nil {
			return nil, err
		}
		made = append(made, stored)
	}
	return made, nil
}

// MarkDepositsPaid marks paid every pending deposit whose expected day has
// come in its location's time zone, and returns how many.
func (s *Store) MarkDepositsPaid(ctx context.Context) (int, error) {
	var paid []Deposit
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		accounts, err := directory.AccountsOf(ctx, tx, nil)
		if err != nil {
			return err
		}
		ids, zones := directory.Zones(accounts)
		now := s.Now()
		rows, err := tx.QueryxContext(ctx, `UPDATE deposits d SET status = 'paid', paid_at = $1
			FROM unnest($2::uuid[], $3::text[]) AS z(merchant_account_id, time_zone)
			WHERE z.merchant_account_id = d.merchant_account_id AND d.status = 'pending'
				AND d.expected_at <= ($1::timestamptz AT TIME ZONE z.time_zone)::date
			RETURNING `+depositColumns, now, ids, zones)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDeposit(rows)
			if err != nil {
				return err
			}
			paid = append(paid, d)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		page := make([]*Deposit, len(paid))
		for i := range paid {
			page[i] = &paid[i]
		}
		if err := withMIDs(ctx, tx, page...); err != nil {
			return err
		}
		// Each as it now stands: its event's data.
		for _, d := range paid {
			if _, err := event.Append(ctx, tx, d.OrganizationID, event.DepositPaid, d.Model(), now); err != nil {
				return err
			}
			if err := s.notifyDeposit(ctx, tx, d, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("payment: unable to mark deposits paid: %w", err)
	}
	return len(paid), nil
}

// RunDeposits closes due batches and marks arrived deposits paid every
// interval until ctx ends.
func (s *Store) RunDeposits(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		made, err := s.CloseDueBatches(ctx, log)
		if err != nil && ctx.Err() == nil {
			log.Error("payment: close batches", "error", err.Error())
		}
		for _, d := range made {
			log.Info("payment: deposit made", "deposit_id", d.ID.String(), "mid", d.MID, "net_amount", d.NetAmount.Text('f'))
		}
		if _, err := s.MarkDepositsPaid(ctx); err != nil && ctx.Err() == nil {
			log.Error("payment: mark deposits paid", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
