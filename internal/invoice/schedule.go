package invoice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// ReminderSettings is an organization's reminder schedule: while Enabled
// (or for an invoice made with reminders true), a reminder of the balance
// goes out at ReminderHour in the time zone of the invoice's location on
// each day dueDate + an offset.
type ReminderSettings struct {
	Enabled     bool
	OffsetsDays []int // ascending
}

// DefaultReminderOffsets are the offsets of an organization that never set any.
var DefaultReminderOffsets = []int{-3, 0, 3, 7, 14}

// ReminderHour is the local time of day at which reminders go out.
const ReminderHour = "09:00"

// Bounds of reminder offsets, in days from the due date, and their number.
const (
	MinReminderOffset = -30
	MaxReminderOffset = 90
	MaxReminderCount  = 8
)

// ReminderSettings reads the organization's reminder schedule: the
// default (disabled, DefaultReminderOffsets) when it never set one.
func (s *Store) ReminderSettings(ctx context.Context, org uuid.UUID) (ReminderSettings, error) {
	var enabled bool
	var offsets pq.Int64Array
	err := s.DB.QueryRowContext(ctx, `SELECT enabled, offsets_days FROM reminder_settings WHERE organization_id = $1`, org).
		Scan(&enabled, &offsets)
	if errors.Is(err, sql.ErrNoRows) {
		return ReminderSettings{OffsetsDays: slices.Clone(DefaultReminderOffsets)}, nil
	}
	if err != nil {
		return ReminderSettings{}, fmt.Errorf("invoice: unable to read reminder settings: %w", err)
	}
	rs := ReminderSettings{Enabled: enabled, OffsetsDays: make([]int, len(offsets))}
	for i, o := range offsets {
		rs.OffsetsDays[i] = int(o)
	}
	return rs, nil
}

// SetReminderSettings replaces the organization's reminder schedule and
// returns it as kept (offsets ascending). Offsets outside
// MinReminderOffset…MaxReminderOffset, repeated, or more than
// MaxReminderCount are an Invalid refusal of offsetsDays.
func (s *Store) SetReminderSettings(ctx context.Context, actor Actor, rs ReminderSettings) (ReminderSettings, error) {
	v := fieldErrors{}
	if len(rs.OffsetsDays) > MaxReminderCount {
		v.add("offsetsDays", "must hold at most %d offsets", MaxReminderCount)
	}
	for _, o := range rs.OffsetsDays {
		if o < MinReminderOffset || o > MaxReminderOffset {
			v.add("offsetsDays", "must hold whole days from %d to %d; %d is not", MinReminderOffset, MaxReminderOffset, o)
		}
	}
	sorted := slices.Sorted(slices.Values(rs.OffsetsDays))
	if len(slices.Compact(slices.Clone(sorted))) != len(sorted) {
		v.add("offsetsDays", "must hold each offset once")
	}
	if len(v) > 0 {
		return ReminderSettings{}, rule.InvalidFields(v)
	}
	if sorted == nil {
		sorted = []int{}
	}
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		_, err := tx.ExecContext(ctx, `INSERT INTO reminder_settings (organization_id, enabled, offsets_days, updated_at)
			VALUES ($1, $2, $3, $4)
			ON CONFLICT (organization_id) DO UPDATE
				SET enabled = excluded.enabled, offsets_days = excluded.offsets_days, updated_at = excluded.updated_at`,
			actor.OrganizationID, rs.Enabled, pq.Array(sorted), now)
		if err != nil {
			return err
		}
		detail := "off"
		if rs.Enabled {
			detail = "on"
		}
		days := make([]string, len(sorted))
		for i, o := range sorted {
			days[i] = strconv.Itoa(o)
		}
		return actor.audit(ctx, tx, audit.RemindersChanged, detail+", days "+strings.Join(days, ", "), now)
	})
	if err != nil {
		return ReminderSettings{}, fmt.Errorf("invoice: unable to save reminder settings: %w", err)
	}
	return ReminderSettings{Enabled: rs.Enabled, OffsetsDays: sorted}, nil
}

// SendScheduled sends every pay link whose scheduled time has come and
// returns how many it sent. Each is claimed (FOR UPDATE SKIP LOCKED) in
// the transaction that queues its message, clears scheduledSendAt and
// records invoice.sent: any number of instances may run it at once, and
// each link goes out once; one whose instance died before its commit is
// sent by the next run, anywhere.
func (s *Store) SendScheduled(ctx context.Context) (int, error) {
	return s.each(ctx, func(ctx context.Context, tx *sqlx.Tx, now time.Time) (bool, error) {
		var id, org uuid.UUID
		err := tx.QueryRowContext(ctx, `SELECT id, organization_id FROM invoices
			WHERE scheduled_send_at <= $1 AND status IN ('open', 'part_paid')
			ORDER BY scheduled_send_at LIMIT 1
			FOR UPDATE SKIP LOCKED`, now).Scan(&id, &org)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("invoice: unable to claim a scheduled send: %w", err)
		}
		if err := s.send(ctx, tx, org, id, now); err != nil {
			return false, err
		}
		_, err = s.AppendEvent(ctx, tx, org, id, event.InvoiceSent, now)
		return true, err
	})
}

// dueReminder claims an invoice whose reminder is due at now: open or
// part-paid, with a due date and no scheduled send, reminded (its own
// choice, else its organization's setting), today in its location's time
// zone being its due date plus one of the offsets, the hour having come
// there, and no reminder yet today there. $1 bounds the due dates by the
// offsets' range (a day either side for the time zones), so that the
// partial index invoices_remindable finds the candidates. $7 and $8 are
// the MIDs' time zones (directory.Zones).
const dueReminder = `
	SELECT i.id, i.organization_id
	FROM invoices i
	JOIN unnest($7::uuid[], $8::text[]) AS z(merchant_account_id, time_zone) ON z.merchant_account_id = i.merchant_account_id
	LEFT JOIN reminder_settings rs ON rs.organization_id = i.organization_id
	WHERE i.due_date IS NOT NULL AND i.status IN ('open', 'part_paid')
	  AND i.due_date BETWEEN $1::date - $5::integer - 1 AND $1::date - $4::integer + 1
	  AND i.scheduled_send_at IS NULL
	  AND coalesce(i.reminders, rs.enabled, false)
	  AND (($2::timestamptz AT TIME ZONE z.time_zone)::date - i.due_date) = ANY (coalesce(rs.offsets_days, $3::integer[]))
	  AND ($2::timestamptz AT TIME ZONE z.time_zone)::time >= $6::time
	  AND (i.last_reminded_at IS NULL
	       OR (i.last_reminded_at AT TIME ZONE z.time_zone)::date < ($2::timestamptz AT TIME ZONE z.time_zone)::date)
	ORDER BY i.due_date, i.id
	LIMIT 1
	FOR UPDATE OF i SKIP LOCKED`

// SendReminders sends every reminder due now and returns how many. Each is
// claimed (FOR UPDATE SKIP LOCKED) in the transaction that queues its
// message (the customer's stated choice of channel, else the invoice's
// delivery), counts it, sets lastRemindedAt and records
// invoice.reminder_sent: any number of instances may run it at once, an
// invoice gets at most one reminder a day, and a reminder whose hour came
// while no instance ran goes out later that day. A reminder queued for an
// invoice paid or cancelled before its delivery is not sent (package
// delivery).
func (s *Store) SendReminders(ctx context.Context) (int, error) {
	accounts, err := directory.AccountsOf(ctx, s.DB, nil)
	if err != nil {
		return 0, err
	}
	mids, zones := directory.Zones(accounts)
	return s.each(ctx, func(ctx context.Context, tx *sqlx.Tx, now time.Time) (bool, error) {
		var id, org uuid.UUID
		err := tx.QueryRowContext(ctx, dueReminder, now.UTC().Format(time.DateOnly), now, pq.Array(DefaultReminderOffsets),
			MinReminderOffset, MaxReminderOffset, ReminderHour, mids, zones).Scan(&id, &org)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("invoice: unable to claim a due reminder: %w", err)
		}
		l, err := Lock(ctx, tx, org, id)
		if err != nil {
			return false, err
		}
		ch, recipient := channel(&l.Invoice)
		err = delivery.Enqueue(ctx, tx, delivery.Message{
			ID: uuid.Must(uuid.NewV7()), Kind: delivery.KindReminder, OrganizationID: org, InvoiceID: id,
			Channel: ch, Recipient: recipient, At: now,
		})
		if err != nil {
			return false, err
		}
		l.RemindersSent++
		l.LastRemindedAt = &now
		if err := l.Save(); err != nil {
			return false, err
		}
		_, err = s.AppendEvent(ctx, tx, org, id, event.InvoiceReminderSent, now)
		return true, err
	})
}

// each runs claim, in a transaction of its own each time, until it claims
// nothing, and counts the claims.
func (s *Store) each(ctx context.Context, claim func(context.Context, *sqlx.Tx, time.Time) (bool, error)) (int, error) {
	for n := 0; ; n++ {
		claimed := false
		err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
			var err error
			claimed, err = claim(ctx, tx, s.Now())
			return err
		})
		if err != nil || !claimed {
			return n, err
		}
	}
}

// RunSchedule sends the scheduled pay links and the due reminders every
// interval until ctx ends.
func (s *Store) RunSchedule(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.SendScheduled(ctx); err != nil && ctx.Err() == nil {
			log.Error("invoice: scheduled sends", "error", err.Error())
		} else if n > 0 {
			log.Info("invoice: scheduled pay links sent", "count", n)
		}
		if n, err := s.SendReminders(ctx); err != nil && ctx.Err() == nil {
			log.Error("invoice: reminders", "error", err.Error())
		} else if n > 0 {
			log.Info("invoice: reminders sent", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
