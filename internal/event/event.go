// Package event keeps the events payreq records: the one way a change
// records its event, Append, called by the package that owns the change
// inside the change's own transaction with the data it holds, so that a
// change never commits without its event nor an event without its change;
// the events' reads (GET /events, GET /events/{id}) filtered by the
// permission that protects their data; the fan-out's claim of events not
// yet dispatched (Claim, called by package webhook) and the read of the
// events it delivers (ByID); and their retention.
//
// It owns the tables events and events_to_fan_out (the events not yet
// fanned out).
package event

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

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/rule"
)

// Data is what an event may carry: a resource as the API shows it.
type Data interface {
	models.Invoice | models.RecordedPaymentChange | models.CardPayment | models.Deposit | models.SavedCard | models.Application |
		models.WebhookPing | models.TerminalPayment | models.Customer | models.RecurringInvoice | models.RecurringInvoiceOccurrence
}

// Type is a type of event whose data is a D, so that the compiler checks
// that an invoice's event carries an invoice.
type Type[D Data] struct{ Name string }

// Types of events (a closed list; openapi.yaml documents each).
var (
	InvoiceCreated    = declare[models.Invoice]("invoice.created")
	InvoiceSent       = declare[models.Invoice]("invoice.sent")
	InvoiceSendFailed = declare[models.Invoice]("invoice.send_failed")
	InvoicePartPaid   = declare[models.Invoice]("invoice.part_paid")
	InvoicePaid       = declare[models.Invoice]("invoice.paid")
	InvoiceCancelled  = declare[models.Invoice]("invoice.cancelled")
	InvoiceFinalized  = declare[models.Invoice]("invoice.finalized")
	InvoiceUpdated    = declare[models.Invoice]("invoice.updated")
	// A draft deleted: the invoice as it was.
	InvoiceDeleted = declare[models.Invoice]("invoice.deleted")
	// A payment made outside the card recorded, or removed: the payment
	// and the invoice as the change left it.
	InvoicePaymentRecorded   = declare[models.RecordedPaymentChange]("invoice.payment_recorded")
	InvoicePaymentRemoved    = declare[models.RecordedPaymentChange]("invoice.payment_removed")
	InvoiceReminderSent      = declare[models.Invoice]("invoice.reminder_sent")
	CardPaymentApproved      = declare[models.CardPayment]("card_payment.approved")
	CardPaymentDeclined      = declare[models.CardPayment]("card_payment.declined")
	CardPaymentRefunded      = declare[models.CardPayment]("card_payment.refunded")
	TerminalPaymentApproved  = declare[models.TerminalPayment]("terminal_payment.approved")
	TerminalPaymentDeclined  = declare[models.TerminalPayment]("terminal_payment.declined")
	TerminalPaymentCancelled = declare[models.TerminalPayment]("terminal_payment.cancelled")
	TerminalPaymentTimedOut  = declare[models.TerminalPayment]("terminal_payment.timed_out")
	TerminalPaymentFailed    = declare[models.TerminalPayment]("terminal_payment.failed")
	SavedCardRemoved         = declare[models.SavedCard]("saved_card.removed")
	CustomerCreated          = declare[models.Customer]("customer.created")
	CustomerUpdated          = declare[models.Customer]("customer.updated")
	CustomerDeleted          = declare[models.Customer]("customer.deleted")
	DepositCreated           = declare[models.Deposit]("deposit.created")
	DepositPaid              = declare[models.Deposit]("deposit.paid")
	// A recurring invoice's life, and each occurrence issued or skipped.
	RecurringInvoiceCreated = declare[models.RecurringInvoice]("recurring_invoice.created")
	RecurringInvoiceUpdated = declare[models.RecurringInvoice]("recurring_invoice.updated")
	RecurringInvoiceIssued  = declare[models.RecurringInvoiceOccurrence]("recurring_invoice.issued")
	RecurringInvoiceSkipped = declare[models.RecurringInvoiceOccurrence]("recurring_invoice.skipped")
	RecurringInvoiceEnded   = declare[models.RecurringInvoice]("recurring_invoice.ended")
	ApplicationSubmitted    = declare[models.Application]("application.submitted")
	ApplicationStage        = declare[models.Application]("application.stage_changed")
	WebhookPing             = declare[models.WebhookPing]("webhook.ping")
)

// Types lists the name of every type, in the order declared above.
var Types []string

// declare makes the type of events named name and adds it to Types.
func declare[D Data](name string) Type[D] {
	Types = append(Types, name)
	return Type[D]{name}
}

// Permission is the permission protecting the data of events of type t: a
// key needs it beside events.view to read them, and beside webhooks.manage
// to subscribe to them or send them again. "" for webhook.ping, whose data
// is the endpoint's own.
func Permission(t string) string {
	switch t {
	case WebhookPing.Name:
		return ""
	case ApplicationSubmitted.Name, ApplicationStage.Name:
		return auth.ApplicationsView
	default: // invoice.*, card_payment.*, terminal_payment.*, saved_card.*, customer.*, deposit.*, recurring_invoice.*
		return auth.PaymentsView
	}
}

// Readable lists the types whose data permissions allow reading.
func Readable(permissions []string) []string {
	var out []string
	for _, t := range Types {
		if p := Permission(t); p == "" || slices.Contains(permissions, p) {
			out = append(out, t)
		}
	}
	return out
}

// ReceivedBy lists the types an organization of kind receives, what a
// subscription to "*" stands for.
func ReceivedBy(kind string) []string {
	if kind == auth.KindReseller {
		return []string{ApplicationSubmitted.Name, ApplicationStage.Name, WebhookPing.Name}
	}
	return slices.DeleteFunc(slices.Clone(Types), func(t string) bool {
		return t == ApplicationSubmitted.Name || t == ApplicationStage.Name
	})
}

// NeedsPermission refuses what events of type t ("*" for a subscription
// to every type) need permission for, to one who lacks it.
func NeedsPermission(permission, t string) *rule.Error {
	what := "Events of type " + t
	if t == "*" {
		what = "Events of every type (*)"
	}
	e := rule.Newf(rule.Forbidden, "", "Permission required", "%s need the %s permission.", what, permission)
	e.Permission = permission
	return e
}

// Append records an event of the organization at `at`, inside tx, the
// transaction of the change it records; data is the resource as the change
// left it. The webhook worker fans it out to the endpoints subscribed to
// its type once tx has committed (Claim).
func Append[D Data](ctx context.Context, tx *sqlx.Tx, org uuid.UUID, t Type[D], data D, at time.Time) (uuid.UUID, error) {
	return insert(ctx, tx, org, t.Name, data, at, false)
}

// AppendDispatched is Append for an event whose one delivery its caller
// writes in tx itself (a ping, to the endpoint pinged): it is never fanned
// out.
func AppendDispatched[D Data](ctx context.Context, tx *sqlx.Tx, org uuid.UUID, t Type[D], data D, at time.Time) (uuid.UUID, error) {
	return insert(ctx, tx, org, t.Name, data, at, true)
}

func insert(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, typ string, data any, at time.Time, dispatched bool) (uuid.UUID, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return uuid.Nil, fmt.Errorf("event: %s data: %w", typ, err)
	}
	id := uuid.Must(uuid.NewV7())
	at = at.Truncate(time.Microsecond) // as stored
	// One statement writes the event and, unless its caller dispatches
	// it, its row in events_to_fan_out.
	_, err = tx.ExecContext(ctx, `
		WITH e AS (
			INSERT INTO events (id, organization_id, type, data, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id
		)
		INSERT INTO events_to_fan_out (event_id) SELECT id FROM e WHERE NOT $6::boolean`, id, org, typ, string(b), at, dispatched)
	if err != nil {
		return uuid.Nil, fmt.Errorf("event: unable to append %s: %w", typ, err)
	}
	return id, nil
}

// Dispatch is an event claimed for its fan-out.
type Dispatch struct {
	ID             uuid.UUID `db:"id"`
	OrganizationID uuid.UUID `db:"organization_id"`
	Type           string    `db:"type"`
	CreatedAt      time.Time `db:"created_at"`
}

// Claim takes up to limit events not yet dispatched off the list of those
// to fan out, oldest first, inside tx, and returns them: the caller
// writes their deliveries in tx, so that an event is fanned out once or,
// when tx rolls back, not at all. Events another transaction has claimed
// are skipped, so any number of instances claim side by side, each its
// own. An event already deleted (past the retention before it was fanned
// out) is dropped. The claimed rows are deleted by their row addresses
// (ctid; locked, they cannot move), whatever the plan: a join could scan
// the whole table, dead rows of a busy run included.
func Claim(ctx context.Context, tx *sqlx.Tx, limit int) ([]Dispatch, error) {
	var claimed []Dispatch
	err := tx.SelectContext(ctx, &claimed, `
		WITH claimed AS (
			DELETE FROM events_to_fan_out
			WHERE ctid = ANY (ARRAY(SELECT ctid FROM events_to_fan_out ORDER BY event_id LIMIT $1 FOR UPDATE SKIP LOCKED))
			RETURNING event_id
		)
		SELECT e.id, e.organization_id, e.type, e.created_at FROM claimed c JOIN events e ON e.id = c.event_id
		ORDER BY e.id`, limit)
	if err != nil {
		return nil, fmt.Errorf("event: unable to claim events to dispatch: %w", err)
	}
	return claimed, nil
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

// ErrNotFound: no event of that id in the organization (or none the key
// may read: the same answer).
var ErrNotFound = rule.New(rule.NotFound, "", "Event not found", "No event with this id exists in your organization.")

// Retention is how long events are kept.
const Retention = 30 * 24 * time.Hour

// Store reads events and forgets them past the retention.
type Store struct {
	DB  *sqlx.DB
	Now func() time.Time
}

type row struct {
	ID        uuid.UUID `db:"id"`
	Type      string    `db:"type"`
	CreatedAt time.Time `db:"created_at"`
	Data      string    `db:"data"`
}

func (r row) event() Event {
	return Event{ID: r.ID, Type: r.Type, CreatedAt: r.CreatedAt, Data: json.RawMessage(r.Data)}
}

// Filter narrows a list of events.
type Filter struct {
	Type        *string
	CreatedFrom *time.Time
	CreatedTo   *time.Time
}

// List returns a page of the organization's events that a key holding
// permissions may read, newest first. A filter naming a type it may not
// read is refused (NeedsPermission).
func (s *Store) List(ctx context.Context, org uuid.UUID, permissions []string, f Filter, limit int, after string) ([]Event, string, error) {
	q := keyset.NewQuery(`SELECT e.id, e.type, e.created_at, e.data::text AS data FROM events e`, "e.created_at", "e.id")
	q.Where("e.organization_id = $%d", org)
	if f.Type != nil {
		if p := Permission(*f.Type); p != "" && !slices.Contains(permissions, p) {
			return nil, "", NeedsPermission(p, *f.Type)
		}
		q.Where("e.type = $%d", *f.Type)
	} else {
		q.Where("e.type = ANY($%d)", pq.Array(Readable(permissions)))
	}
	q.Created(f.CreatedFrom, f.CreatedTo)
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	query, args := q.SQL(limit)
	var rows []row
	if err := s.DB.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, "", fmt.Errorf("event: unable to list events: %w", err)
	}
	list := make([]Event, len(rows))
	for i, r := range rows {
		list[i] = r.event()
	}
	list, next := keyset.Page(list, limit, func(e Event) keyset.Cursor { return keyset.Cursor{At: e.CreatedAt, ID: e.ID} })
	return list, next, nil
}

// Get reads one event of the organization that a key holding permissions
// may read; another is ErrNotFound, as an unknown id.
func (s *Store) Get(ctx context.Context, org uuid.UUID, permissions []string, id uuid.UUID) (Event, error) {
	return Read(ctx, s.DB, org, permissions, id)
}

// Read is Get through q (a transaction).
func Read(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, permissions []string, id uuid.UUID) (Event, error) {
	var r row
	err := sqlx.GetContext(ctx, q, &r, `SELECT id, type, created_at, data::text AS data FROM events
		WHERE id = $1 AND organization_id = $2 AND type = ANY($3)`, id, org, pq.Array(Readable(permissions)))
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, ErrNotFound
	}
	if err != nil {
		return Event{}, fmt.Errorf("event: unable to read event: %w", err)
	}
	return r.event(), nil
}

// ByID reads the events with these ids, whoever's, through q in one
// statement, by id: what package webhook delivers (an event past its
// retention is missing).
func ByID(ctx context.Context, q sqlx.QueryerContext, ids []uuid.UUID) (map[uuid.UUID]Event, error) {
	var rows []row
	if len(ids) > 0 {
		if err := sqlx.SelectContext(ctx, q, &rows, `SELECT id, type, created_at, data::text AS data FROM events
			WHERE id = ANY($1::uuid[])`, pq.Array(ids)); err != nil {
			return nil, fmt.Errorf("event: unable to read events: %w", err)
		}
	}
	by := make(map[uuid.UUID]Event, len(rows))
	for _, r := range rows {
		by[r.ID] = r.event()
	}
	return by, nil
}

// DeleteOld deletes the events past the retention, with their webhook
// deliveries (whose foreign key cascades).
func (s *Store) DeleteOld(ctx context.Context) error {
	_, err := s.DB.ExecContext(ctx, `DELETE FROM events WHERE created_at < $1`, s.Now().Add(-Retention))
	if err != nil {
		return fmt.Errorf("event: unable to delete old events: %w", err)
	}
	return nil
}
