// Package webhook records events and pushes them to the endpoints
// organizations register, following the Standard Webhooks specification
// v1: the event recorder every change calls in its transaction, the
// events' reads, the endpoints, and the delivery worker.
//
// It owns the tables events, webhook_endpoints and webhook_deliveries.
package webhook

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/reseller"
)

// Retention is how long events are kept.
const Retention = 30 * 24 * time.Hour

// Recorder writes events and their deliveries; it is the event.Recorder of
// every change.
type Recorder struct {
	Invoices *invoice.Store // for the pay links in invoices' data
	Now      func() time.Time
}

var _ event.Recorder = (*Recorder)(nil)

// Record renders subject as the API shows it now (inside tx), writes the
// event, and queues one delivery to each enabled endpoint of the
// organization subscribed to its type.
func (r *Recorder) Record(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, typ string, subject any) error {
	data, err := r.render(ctx, tx, org, typ, subject)
	if err != nil {
		return fmt.Errorf("webhook: event %s: %w", typ, err)
	}
	_, err = insertEvent(ctx, tx, org, typ, data, r.Now(), nil)
	return err
}

func (r *Recorder) render(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, typ string, subject any) (any, error) {
	id, _ := subject.(uuid.UUID)
	switch typ {
	case event.InvoiceCreated, event.InvoiceSent, event.InvoiceSendFailed, event.InvoicePartPaid, event.InvoicePaid, event.InvoiceCancelled:
		inv, ok := subject.(invoice.Invoice)
		if !ok {
			var err error
			if inv, err = invoice.Read(ctx, tx, org, id); err != nil {
				return nil, err
			}
		}
		return inv.Wire(r.Invoices.Link(&inv), true), nil
	case event.CardPaymentApproved, event.CardPaymentDeclined, event.CardPaymentRefunded:
		p, err := payment.ReadCardPayment(ctx, tx, org, id)
		if err != nil {
			return nil, err
		}
		return p.Wire(), nil
	case event.DepositCreated, event.DepositPaid:
		d, err := payment.ReadDeposit(ctx, tx, org, id)
		if err != nil {
			return nil, err
		}
		return d.Wire(), nil
	case event.SavedCardRemoved:
		c, ok := subject.(invoice.SavedCard)
		if !ok {
			return nil, fmt.Errorf("subject %T is not a saved card", subject)
		}
		return c.Wire(), nil
	case event.ApplicationStage:
		a, err := reseller.Read(ctx, tx, org, id)
		if err != nil {
			return nil, err
		}
		return a.Wire(), nil
	}
	return nil, fmt.Errorf("unknown event type %q", typ)
}

// insertEvent writes an event and its deliveries: to the endpoint `only`
// when given (a ping), else to every enabled endpoint subscribed to typ.
func insertEvent(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, typ string, data any, now time.Time, only *uuid.UUID) (uuid.UUID, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return uuid.Nil, fmt.Errorf("webhook: event %s data: %w", typ, err)
	}
	id := uuid.Must(uuid.NewV7())
	now = now.Truncate(time.Microsecond)
	// One statement, one round trip: the event and its deliveries (the
	// foreign key is checked at the statement's end, the event there).
	_, err = tx.ExecContext(ctx, `
		WITH event AS (
			INSERT INTO events (id, organization_id, type, data, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id
		)
		INSERT INTO webhook_deliveries (event_id, endpoint_id, status, next_attempt_at)
		SELECT event.id, e.id, 'pending', $5 FROM event, webhook_endpoints e
		WHERE e.organization_id = $2 AND e.status = 'enabled'
			AND CASE WHEN $6::uuid IS NULL THEN e.event_types && ARRAY[$3, '*'] ELSE e.id = $6 END`,
		id, org, typ, string(b), now, only)
	if err != nil {
		return uuid.Nil, fmt.Errorf("webhook: unable to record event: %w", err)
	}
	return id, nil
}

// Event is a recorded event. Data is the resource's JSON as it was.
type Event struct {
	ID        uuid.UUID
	Type      string
	CreatedAt time.Time
	Data      json.RawMessage
}

// JSON is the event as delivered and as GET /events shows it.
func (e Event) JSON() []byte {
	b, _ := json.Marshal(struct {
		ID        uuid.UUID       `json:"id"`
		Type      string          `json:"type"`
		CreatedAt time.Time       `json:"createdAt"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.CreatedAt.UTC(), e.Data})
	return b
}

// Delivery is where an event stands at one endpoint.
type Delivery struct {
	EndpointID     uuid.UUID  `db:"endpoint_id"`
	Status         string     `db:"status"`
	Attempts       int        `db:"attempts"`
	LastStatusCode *int       `db:"last_status_code"`
	LastError      *string    `db:"last_error"`
	LastAttemptAt  *time.Time `db:"last_attempt_at"`
	DeliveredAt    *time.Time `db:"delivered_at"`
}

// ErrEventNotFound: no event of that id in the organization.
var ErrEventNotFound = errors.New("webhook: event not found")

// ErrInvalidCursor: the cursor was not made by this service.
var ErrInvalidCursor = keyset.ErrInvalid

// Store reads events and manages endpoints.
type Store struct {
	DB  *sqlx.DB
	Now func() time.Time
	// Seal and Open keep endpoints' secrets encrypted at rest.
	Seal func(plaintext, aad string) ([]byte, string, error)
	Open func(sealed []byte, keyID, aad string) (string, error)
	// AllowPrivate lets endpoints be plain http or private addresses
	// (development and tests).
	AllowPrivate bool
	Resolver     Resolver
}

type eventRow struct {
	ID        uuid.UUID `db:"id"`
	Type      string    `db:"type"`
	CreatedAt time.Time `db:"created_at"`
	Data      string    `db:"data"`
}

func (r eventRow) event() Event {
	return Event{ID: r.ID, Type: r.Type, CreatedAt: r.CreatedAt, Data: json.RawMessage(r.Data)}
}

// EventFilter narrows a list of events.
type EventFilter struct {
	Type        *string
	CreatedFrom *time.Time
	CreatedTo   *time.Time
}

// Events returns a page of the organization's events that a key holding
// permissions may read, newest first. A filter naming a type it may not
// read is a *PermissionError.
func (s *Store) Events(ctx context.Context, org uuid.UUID, permissions []string, f EventFilter, limit int, after string) ([]Event, string, error) {
	q := keyset.NewQuery(`SELECT e.id, e.type, e.created_at, e.data::text AS data FROM events e`, "e.created_at", "e.id")
	q.Where("e.organization_id = $%d", org)
	if f.Type != nil {
		if p := event.Permission(*f.Type); p != "" && !slices.Contains(permissions, p) {
			return nil, "", &PermissionError{Permission: p, Type: *f.Type}
		}
		q.Where("e.type = $%d", *f.Type)
	} else {
		q.Where("e.type = ANY($%d)", pq.Array(event.Readable(permissions)))
	}
	if f.CreatedFrom != nil {
		q.Where("e.created_at >= $%d", *f.CreatedFrom)
	}
	if f.CreatedTo != nil {
		q.Where("e.created_at < $%d", *f.CreatedTo)
	}
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	query, args := q.SQL(limit)
	var rows []eventRow
	if err := s.DB.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, "", fmt.Errorf("webhook: unable to list events: %w", err)
	}
	list := make([]Event, len(rows))
	for i, r := range rows {
		list[i] = r.event()
	}
	list, next := keyset.Page(list, limit, func(e Event) keyset.Cursor { return keyset.Cursor{At: e.CreatedAt, ID: e.ID} })
	return list, next, nil
}

// Event reads one event of the organization with its deliveries, oldest
// endpoint first. One a key holding permissions may not read is not found.
func (s *Store) Event(ctx context.Context, org uuid.UUID, permissions []string, id uuid.UUID) (Event, []Delivery, error) {
	var r eventRow
	err := s.DB.GetContext(ctx, &r, `SELECT id, type, created_at, data::text AS data FROM events
		WHERE id = $1 AND organization_id = $2 AND type = ANY($3)`, id, org, pq.Array(event.Readable(permissions)))
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, nil, ErrEventNotFound
	}
	if err != nil {
		return Event{}, nil, fmt.Errorf("webhook: unable to read event: %w", err)
	}
	deliveries := []Delivery{}
	err = s.DB.SelectContext(ctx, &deliveries, `
		SELECT d.endpoint_id, d.status, d.attempts, d.last_status_code, d.last_error, d.last_attempt_at, d.delivered_at
		FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE d.event_id = $1 ORDER BY e.created_at, e.id`, id)
	if err != nil {
		return Event{}, nil, fmt.Errorf("webhook: unable to read deliveries: %w", err)
	}
	return r.event(), deliveries, nil
}

// Redeliver sends the event again, from a first attempt, to every enabled
// endpoint of the organization subscribed to its type or already sent it;
// each counts it as one of its MaxRequestedSends a minute. One a key
// holding permissions may not read is not found.
func (s *Store) Redeliver(ctx context.Context, org uuid.UUID, permissions []string, id uuid.UUID) error {
	now := s.Now()
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var exists bool
		if err := tx.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM events WHERE id = $1 AND organization_id = $2 AND type = ANY($3))`,
			id, org, pq.Array(event.Readable(permissions))); err != nil {
			return err
		}
		if !exists {
			return ErrEventNotFound
		}
		// Locked, so that their sends are counted exactly.
		var endpoints []uuid.UUID
		err := tx.SelectContext(ctx, &endpoints, `
			SELECT e.id FROM events ev JOIN webhook_endpoints e ON e.organization_id = ev.organization_id
			WHERE ev.id = $1 AND e.status = 'enabled'
				AND (e.event_types && ARRAY[ev.type, '*']
					OR EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = ev.id AND d.endpoint_id = e.id))
			ORDER BY e.id FOR NO KEY UPDATE OF e`, id)
		if err != nil {
			return err
		}
		if err := countSends(ctx, tx, endpoints, now); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO webhook_deliveries (event_id, endpoint_id, status, next_attempt_at)
			SELECT $1, endpoint_id, 'pending', $3 FROM unnest($2::uuid[]) AS endpoint_id
			ON CONFLICT (event_id, endpoint_id) DO UPDATE SET status = 'pending', attempts = 0, next_attempt_at = $3,
				delivered_at = NULL`, id, pq.Array(endpoints), now)
		return err
	})
	var tooMany *TooManySendsError
	if errors.Is(err, ErrEventNotFound) || errors.As(err, &tooMany) {
		return err
	}
	if err != nil {
		return fmt.Errorf("webhook: unable to redeliver: %w", err)
	}
	return nil
}

// DeleteOldEvents deletes events past the retention, with their deliveries.
func (s *Store) DeleteOldEvents(ctx context.Context) error {
	_, err := s.DB.ExecContext(ctx, `DELETE FROM events WHERE created_at < $1`, s.Now().Add(-Retention))
	if err != nil {
		return fmt.Errorf("webhook: unable to delete old events: %w", err)
	}
	return nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
