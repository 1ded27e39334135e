// Package webhook pushes the events organizations subscribe to to the
// endpoints they register, following the Standard Webhooks specification
// v1: the endpoints, the fan-out of each event into one delivery per
// endpoint subscribed to it, the delivery worker and its signatures, and
// the address checks. It knows events only through package event, never
// the packages whose changes they record.
//
// It owns the tables webhook_endpoints, webhook_deliveries and
// webhook_attempts (every attempt of a delivery, written by the worker in
// the statement that records the attempt on its delivery, each with the
// type of the event it delivered). The events it delivers are package
// event's, read through event.Claim and event.ByID.
package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Store manages endpoints and reads and requests deliveries.
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

// Deliveries lists an event's deliveries, oldest endpoint first; the
// caller has read the event (event.Store.Get), which says whose it is.
func (s *Store) Deliveries(ctx context.Context, eventID uuid.UUID) ([]Delivery, error) {
	deliveries := []Delivery{}
	err := s.DB.SelectContext(ctx, &deliveries, `
		SELECT d.endpoint_id, d.status, d.attempts, d.last_status_code, d.last_error, d.last_attempt_at, d.delivered_at
		FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE d.event_id = $1 ORDER BY e.created_at, e.id`, eventID)
	if err != nil {
		return nil, fmt.Errorf("webhook: unable to read deliveries: %w", err)
	}
	return deliveries, nil
}

// Attempt is one try to deliver an event to an endpoint.
type Attempt struct {
	ID         uuid.UUID `db:"id"`
	EventID    uuid.UUID `db:"event_id"`
	EventType  string    `db:"event_type"`
	EndpointID uuid.UUID `db:"endpoint_id"`
	URL        string    `db:"url"`
	// Number is the delivery's count of attempts at this one (a
	// redelivery starts again from 1).
	Number int `db:"attempt"`
	// Status is the delivery's after the attempt: pending (it is tried
	// again later), delivered or failed.
	Status     string    `db:"status"`
	StatusCode *int      `db:"status_code"`
	Error      *string   `db:"error"`
	At         time.Time `db:"attempted_at"`
}

const selectAttempts = `SELECT a.id, a.event_id, a.event_type, a.endpoint_id, e.url, a.attempt, a.status, a.status_code,
		a.error, a.attempted_at
	FROM webhook_attempts a
	JOIN webhook_endpoints e ON e.id = a.endpoint_id`

// EventAttempts lists every attempt to deliver an event, oldest first;
// the caller has read the event (event.Store.Get), which says whose it is.
func (s *Store) EventAttempts(ctx context.Context, eventID uuid.UUID) ([]Attempt, error) {
	attempts := []Attempt{}
	err := s.DB.SelectContext(ctx, &attempts, selectAttempts+` WHERE a.event_id = $1 ORDER BY a.attempted_at, a.id`, eventID)
	if err != nil {
		return nil, fmt.Errorf("webhook: unable to read attempts: %w", err)
	}
	return attempts, nil
}

// EndpointAttempts returns a page of the attempts to deliver to an
// endpoint of the organization, newest first, of the events a member
// holding permissions may read (as GET /events lets a key read them), and
// the cursor of the next page ("" on the last).
func (s *Store) EndpointAttempts(ctx context.Context, org uuid.UUID, permissions []string, endpointID uuid.UUID, limit int,
	after string) ([]Attempt, string, error) {
	q := keyset.NewQuery(selectAttempts, "a.attempted_at", "a.id")
	q.Where("a.endpoint_id = $%d", endpointID)
	q.Where("e.organization_id = $%d", org)
	q.Where("a.event_type = ANY($%d)", pq.Array(event.Readable(permissions)))
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	query, args := q.SQL(limit)
	attempts := []Attempt{}
	if err := s.DB.SelectContext(ctx, &attempts, query, args...); err != nil {
		return nil, "", fmt.Errorf("webhook: unable to list attempts: %w", err)
	}
	page, next := keyset.Page(attempts, limit, func(a Attempt) keyset.Cursor { return keyset.Cursor{At: a.At, ID: a.ID} })
	return page, next, nil
}

// Redeliver sends the event again, from a first attempt, to every enabled
// endpoint of the organization subscribed to its type or already sent it;
// each counts it as one of its MaxRequestedSends a minute. One the actor's
// permissions do not let it read is event.ErrNotFound; an endpoint among
// them the actor may not manage (managed) refuses it all.
func (s *Store) Redeliver(ctx context.Context, a Actor, id uuid.UUID) error {
	now := s.Now()
	org := a.OrganizationID
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		ev, err := event.Read(ctx, tx, org, a.Permissions, id)
		if err != nil {
			return err
		}
		// Locked, so that their sends are counted exactly.
		var targets []Endpoint
		err = tx.SelectContext(ctx, &targets, `
			SELECT `+endpointColumns+` FROM webhook_endpoints e
			WHERE e.organization_id = $1 AND e.status = 'enabled'
				AND (e.event_types && ARRAY[$2, '*']
					OR EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = $3 AND d.endpoint_id = e.id))
			ORDER BY e.id FOR NO KEY UPDATE OF e`, org, ev.Type, id)
		if err != nil {
			return err
		}
		endpoints := make([]uuid.UUID, len(targets))
		for i, e := range targets {
			if err := maySubscribe(ctx, tx, org, a.Permissions, e.EventTypes); err != nil {
				return err
			}
			endpoints[i] = e.ID
		}
		if err := countSends(ctx, tx, endpoints, now); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO webhook_deliveries (event_id, endpoint_id, status, next_attempt_at)
			SELECT $1, endpoint_id, 'pending', $3 FROM unnest($2::uuid[]) AS endpoint_id
			ON CONFLICT (event_id, endpoint_id) DO UPDATE SET status = 'pending', attempts = 0, next_attempt_at = $3,
				delivered_at = NULL`, id, pq.Array(endpoints), now)
		if err != nil {
			return err
		}
		return a.audit(ctx, tx, audit.WebhookRedelivered, fmt.Sprintf("%s (%s) to %d endpoints", id, ev.Type, len(endpoints)), now)
	})
	if rule.As(err) != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("webhook: unable to redeliver: %w", err)
	}
	return nil
}

// fanOutBatch is how many events one fan-out claims at once: four groups
// of attempts (with one endpoint an event), so that a burst of events is
// shared by the worker's loops rather than attempted group after group by
// the one that claimed it.
const fanOutBatch = 4 * claimBatch

// FanOut turns up to limit events not yet dispatched into their
// deliveries, one to each enabled endpoint of the event's organization
// subscribed to its type and made before it, in one transaction: the
// events are claimed (event.Claim, which skips those another instance
// holds) and their deliveries written together, so that every event is
// fanned out exactly once, whatever the number of instances, and none is
// lost if one dies. The deliveries are written claimed for their first
// attempt, as DeliverDue claims one (attempt 1, held for a lease), and
// attempted once the transaction has committed, claimBatch at a time,
// oldest events first, each group recorded as it ends: which spares each
// the statement and the row version of a claim of its own. The k-th group
// is held for k leases, so that none is claimed again while the groups
// before it are attempted; one whose process died, or stopped before
// its group began, is attempted again once its lease is over. n is how
// many events it claimed, attempted how many deliveries it attempted.
func (w *Worker) FanOut(ctx context.Context, limit int) (n, attempted int, err error) {
	now := w.now()
	var claims []claim
	err = postgres.InTx(ctx, w.db, func(tx *sqlx.Tx) error {
		claimed, err := event.Claim(ctx, tx, limit)
		if err != nil || len(claimed) == 0 {
			return err
		}
		n = len(claimed)
		ids, orgs, types, ats := make([]string, n), make([]string, n), make([]string, n), make([]time.Time, n)
		for i, c := range claimed {
			ids[i], orgs[i], types[i], ats[i] = c.ID.String(), c.OrganizationID.String(), c.Type, c.CreatedAt
		}
		// An endpoint gets the events that came after it, as when the
		// change wrote the deliveries itself: its id is older than the
		// event's (both UUIDv7s, in the order they were made, whatever the
		// application's clock says). A redelivery asked for before the
		// fan-out is there already: left as it is. The group size is in
		// the statement, so that its generic plan knows it.
		err = tx.SelectContext(ctx, &claims, fmt.Sprintf(`
			WITH claimed AS (
				INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, next_attempt_at)
				SELECT event_id, endpoint_id, 'pending', 1, $5::timestamptz + make_interval(secs => $6::float8 * ((n - 1) / %d))
				FROM (
					SELECT ev.id AS event_id, e.id AS endpoint_id, row_number() OVER (ORDER BY ev.at, ev.id, e.id) AS n
					FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[]) AS ev(id, org, type, at)
					JOIN webhook_endpoints e ON e.organization_id = ev.org AND e.id < ev.id AND e.status = 'enabled'
						AND e.event_types && ARRAY[ev.type, '*']
				) d
				ON CONFLICT (event_id, endpoint_id) DO NOTHING
				RETURNING event_id, endpoint_id, attempts
			)`, claimBatch)+selectClaimed,
			pq.Array(ids), pq.Array(orgs), pq.Array(types), pq.Array(ats), now.Add(w.lease()), w.lease().Seconds())
		if err != nil {
			return fmt.Errorf("webhook: unable to write deliveries: %w", err)
		}
		claims, err = withEvents(ctx, tx, claims)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("webhook: fan-out: %w", err)
	}
	var errs []error
	for group := range slices.Chunk(claims, claimBatch) {
		if ctx.Err() != nil {
			break // the groups not begun are attempted elsewhere once their leases end
		}
		errs = append(errs, w.attemptAll(ctx, group, w.now()))
	}
	return n, len(claims), errors.Join(errs...)
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
