package webhook

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Endpoint statuses.
const (
	Enabled  = "enabled"
	Disabled = "disabled"
)

// MaxEndpoints is how many endpoints an organization may have.
const MaxEndpoints = 16

// RotationOverlap is how long the previous secret keeps signing beside the
// new one after a rotation, unless the rotation says otherwise.
const RotationOverlap = 24 * time.Hour

// MaxRequestedSends is how many pings and redeliveries an endpoint takes
// in a minute.
const MaxRequestedSends = 10

// secretPrefix starts every signing secret (Standard Webhooks).
const secretPrefix = "whsec_"

// Endpoint is a URL an organization's events are pushed to.
type Endpoint struct {
	ID             uuid.UUID      `db:"id"`
	OrganizationID uuid.UUID      `db:"organization_id"`
	URL            string         `db:"url"`
	Description    *string        `db:"description"`
	EventTypes     pq.StringArray `db:"event_types"`
	Status         string         `db:"status"`
	DisabledReason *string        `db:"disabled_reason"`
	CreatedAt      time.Time      `db:"created_at"`
}

const endpointColumns = `id, organization_id, url, description, event_types, status, disabled_reason, created_at`

// ErrEndpointNotFound: no endpoint of that id in the organization.
var ErrEndpointNotFound = rule.New(rule.NotFound, "", "Webhook endpoint not found",
	"No webhook endpoint with this id exists in your organization.")

// ErrTooManyEndpoints: the organization has MaxEndpoints already.
var ErrTooManyEndpoints = rule.Newf(rule.Unprocessable, "", "Too many webhook endpoints",
	"An organization may have at most %d webhook endpoints; delete one before adding another.", MaxEndpoints)

// tooManySends refuses a ping or redelivery to an endpoint that had
// MaxRequestedSends within the last minute; it takes the next after wait.
func tooManySends(wait time.Duration) *rule.Error {
	e := rule.Newf(rule.Limited, "", "Too many requests",
		"The webhook endpoint took %d pings and redeliveries within a minute.", MaxRequestedSends)
	e.RetryAfter = wait
	return e
}

// maySubscribe refuses a subscription to a type whose data the key's
// permissions do not let it read; "*" stands for every type the
// organization's kind receives.
func maySubscribe(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, permissions, types []string) error {
	for _, t := range types {
		covered := []string{t}
		if t == "*" {
			o, err := directory.OrganizationByID(ctx, q, org)
			if err != nil {
				return fmt.Errorf("webhook: unable to read organization: %w", err)
			}
			covered = event.ReceivedBy(o.Kind)
		}
		for _, c := range covered {
			if p := event.Permission(c); p != "" && !slices.Contains(permissions, p) {
				return event.NeedsPermission(p, t)
			}
		}
	}
	return nil
}

// Actor is who acts on endpoints: the organization, the permissions it
// acts with (an API key's or a member's), and, when a person acts, who
// the audit log names (audited in the change's transaction).
type Actor struct {
	OrganizationID uuid.UUID
	Permissions    []string
	Audit          *audit.Actor
}

// audit appends the entry of a change the actor made in tx; none when no
// person acts.
func (a Actor) audit(ctx context.Context, tx *sqlx.Tx, action, detail string, at time.Time) error {
	if a.Audit == nil {
		return nil
	}
	return audit.Append(ctx, tx, audit.Entry{Organization: &a.OrganizationID, Actor: *a.Audit, Action: action, Detail: detail, At: at})
}

// named is how the log names an endpoint: its id and its URL without
// query and fragment.
func named(id uuid.UUID, u string) string { return id.String() + " " + audit.URL(u) }

// managed locks the endpoint id of the actor's organization inside tx
// (lock: "FOR UPDATE" to delete it, else "FOR NO KEY UPDATE") and returns
// it, unless the actor's permissions would not let it subscribe to every
// type the endpoint receives: changing, rotating, pinging, redelivering
// to or deleting an endpoint takes what creating it takes, so that a key
// without payments.view cannot take the secret of an invoice.* endpoint.
func managed(ctx context.Context, tx *sqlx.Tx, a Actor, id uuid.UUID, lock string) (Endpoint, error) {
	var e Endpoint
	err := tx.GetContext(ctx, &e, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1 AND organization_id = $2 `+lock,
		id, a.OrganizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Endpoint{}, ErrEndpointNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("webhook: unable to read endpoint: %w", err)
	}
	return e, maySubscribe(ctx, tx, a.OrganizationID, a.Permissions, e.EventTypes)
}

// countSends records a ping or redelivery to each of endpoints, which the
// caller's transaction holds locked, unless one of them had
// MaxRequestedSends in the minute before now.
func countSends(ctx context.Context, tx *sqlx.Tx, endpoints []uuid.UUID, now time.Time) error {
	if len(endpoints) == 0 {
		return nil
	}
	now = now.Truncate(time.Microsecond) // as stored
	since := now.Add(-time.Minute)
	// Of each endpoint at the limit, its oldest send of the minute.
	var oldest []time.Time
	err := tx.SelectContext(ctx, &oldest, `SELECT min(t) FROM webhook_endpoints e, unnest(e.requested_sends) t
		WHERE e.id = ANY($1) AND t > $2 GROUP BY e.id HAVING count(*) >= $3`, pq.Array(endpoints), since, MaxRequestedSends)
	if err != nil {
		return fmt.Errorf("webhook: unable to count requested sends: %w", err)
	}
	if len(oldest) > 0 {
		return tooManySends(slices.MaxFunc(oldest, time.Time.Compare).Add(time.Minute).Sub(now))
	}
	_, err = tx.ExecContext(ctx, `UPDATE webhook_endpoints
		SET requested_sends = array(SELECT t FROM unnest(requested_sends) t WHERE t > $2 ORDER BY t) || $3::timestamptz
		WHERE id = ANY($1)`, pq.Array(endpoints), since, now)
	if err != nil {
		return fmt.Errorf("webhook: unable to record a requested send: %w", err)
	}
	return nil
}

// MaxDescription is the longest description an endpoint keeps, in
// characters; MaxEventTypes the most types it names.
const (
	MaxDescription = 500
	MaxEventTypes  = 20
)

// checkFields refuses event types that are none, too many or unknown
// (types nil: not given, by a change), and a description too long. The
// API's schema refuses these first; the portal's forms count on this.
func checkFields(types []string, description *string) error {
	fields := map[string][]string{}
	if types != nil {
		switch {
		case len(types) == 0:
			fields["eventTypes"] = []string{"must name at least one event type"}
		case len(types) > MaxEventTypes:
			fields["eventTypes"] = []string{fmt.Sprintf("must name at most %d event types, or *", MaxEventTypes)}
		}
		for _, t := range types {
			if t != "*" && !slices.Contains(event.Types, t) {
				fields["eventTypes"] = []string{"must be known event types, or *"}
				break
			}
		}
	}
	if description != nil && (!utf8.ValidString(*description) || utf8.RuneCountInString(*description) > MaxDescription) {
		fields["description"] = []string{fmt.Sprintf("must be text of at most %d characters", MaxDescription)}
	}
	if e := rule.InvalidFields(fields); e != nil {
		return e
	}
	return nil
}

// newSecret is whsec_ and the base64 of 32 random bytes, the HMAC key.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// NewEndpoint is an endpoint as a client asks for it.
type NewEndpoint struct {
	URL         string
	Description *string
	EventTypes  []string
}

// Create registers an endpoint for the actor and returns
// it with its secret, shown only now. The organization's row lock makes
// the count of endpoints exact under concurrent creations. With an
// idempotency key (key not nil), the same request sent again within
// idempotency.Window makes nothing: replayed, it returns the endpoint the
// key made, as it is now, with its current secret; the key of an endpoint
// deleted since is ErrKeyOfDeletedEndpoint.
func (s *Store) Create(ctx context.Context, a Actor, n NewEndpoint, key *string) (e Endpoint,
	secret string, replayed bool, err error) {
	org := a.OrganizationID
	if n.EventTypes == nil {
		n.EventTypes = []string{}
	}
	if err := checkFields(n.EventTypes, n.Description); err != nil {
		return Endpoint{}, "", false, err
	}
	if err := maySubscribe(ctx, s.DB, org, a.Permissions, n.EventTypes); err != nil {
		return Endpoint{}, "", false, err
	}
	if err := checkURL(ctx, n.URL, s.AllowPrivate, s.Resolver); err != nil {
		return Endpoint{}, "", false, err
	}
	k, err := idempotency.OptionalKey(key, n)
	if err != nil {
		return Endpoint{}, "", false, err
	}
	secret = newSecret()
	e = Endpoint{ID: uuid.Must(uuid.NewV7()), OrganizationID: org, URL: n.URL, Description: n.Description,
		EventTypes: n.EventTypes, Status: Enabled, CreatedAt: s.Now().Truncate(time.Microsecond)}
	sealed, keyID, err := s.Seal(secret, e.ID.String())
	if err != nil {
		return Endpoint{}, "", false, fmt.Errorf("webhook: unable to seal secret: %w", err)
	}
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if err := directory.LockOrganization(ctx, tx, org, directory.Update); err != nil {
			return err
		}
		earlier, err := k.Claim(ctx, tx, org, idempotency.CreateWebhookEndpoint, e.ID, s.Now())
		if err != nil {
			return err
		}
		if earlier != uuid.Nil {
			replayed = true
			e, secret, err = s.withSecret(ctx, tx, org, earlier)
			if errors.Is(err, ErrEndpointNotFound) {
				return ErrKeyOfDeletedEndpoint
			}
			return err
		}
		var count int
		if err := tx.GetContext(ctx, &count, `SELECT count(*) FROM webhook_endpoints WHERE organization_id = $1`, org); err != nil {
			return err
		}
		if count >= MaxEndpoints {
			return ErrTooManyEndpoints
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO webhook_endpoints (id, organization_id, url, description, event_types, status,
				secret, secret_key_id, created_at) VALUES ($1, $2, $3, $4, $5, 'enabled', $6, $7, $8)`,
			e.ID, org, e.URL, e.Description, e.EventTypes, sealed, keyID, e.CreatedAt)
		if err != nil {
			return err
		}
		return a.audit(ctx, tx, audit.WebhookCreated, named(e.ID, e.URL)+" ("+strings.Join(e.EventTypes, ", ")+")", e.CreatedAt)
	})
	if rule.As(err) != nil {
		return Endpoint{}, "", false, err
	}
	if err != nil {
		return Endpoint{}, "", false, fmt.Errorf("webhook: unable to create endpoint: %w", err)
	}
	return e, secret, replayed, nil
}

// ErrKeyOfDeletedEndpoint: the idempotency key made an endpoint that has
// been deleted since, so the request can be answered neither as it was
// nor by a new endpoint under the same key.
var ErrKeyOfDeletedEndpoint = &rule.Error{Kind: rule.KeyReused, Title: "Idempotency key reused",
	Message: "The webhook endpoint this key added has been deleted since; a new request needs a new key."}

// withSecret reads the endpoint id of org inside tx, with its current
// secret (ErrEndpointNotFound when there is none).
func (s *Store) withSecret(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID) (Endpoint, string, error) {
	var row struct {
		Endpoint
		Secret []byte `db:"secret"`
		KeyID  string `db:"secret_key_id"`
	}
	err := tx.GetContext(ctx, &row, `SELECT `+endpointColumns+`, secret, secret_key_id FROM webhook_endpoints
		WHERE id = $1 AND organization_id = $2`, id, org)
	if errors.Is(err, sql.ErrNoRows) {
		return Endpoint{}, "", ErrEndpointNotFound
	}
	if err != nil {
		return Endpoint{}, "", err
	}
	secret, err := s.Open(row.Secret, row.KeyID, id.String())
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("webhook: unable to open the secret of endpoint %s: %w", id, err)
	}
	return row.Endpoint, secret, nil
}

// Endpoints lists the organization's endpoints, oldest first.
func (s *Store) Endpoints(ctx context.Context, org uuid.UUID) ([]Endpoint, error) {
	list := []Endpoint{}
	err := s.DB.SelectContext(ctx, &list, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE organization_id = $1 ORDER BY created_at, id`, org)
	if err != nil {
		return nil, fmt.Errorf("webhook: unable to list endpoints: %w", err)
	}
	return list, nil
}

// Endpoint reads one endpoint of the organization.
func (s *Store) Endpoint(ctx context.Context, org, id uuid.UUID) (Endpoint, error) {
	var e Endpoint
	err := s.DB.GetContext(ctx, &e, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1 AND organization_id = $2`, id, org)
	if errors.Is(err, sql.ErrNoRows) {
		return Endpoint{}, ErrEndpointNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("webhook: unable to read endpoint: %w", err)
	}
	return e, nil
}

// Change is a PATCH of an endpoint: nil fields stay as they are;
// ClearDescription sets the description to none. DisabledReason is what
// the endpoint's disabledReason says when Status disables it (who did).
type Change struct {
	URL              *string
	Description      *string
	ClearDescription bool
	EventTypes       []string
	Status           *string
	DisabledReason   string
}

// Update changes an endpoint for the actor, who must be allowed to
// subscribe to the types it receives (managed) and to those it is given.
// Enabling it clears its disabled reason and its record of failures.
func (s *Store) Update(ctx context.Context, a Actor, id uuid.UUID, c Change) (Endpoint, error) {
	if err := checkFields(c.EventTypes, c.Description); err != nil {
		return Endpoint{}, err
	}
	if c.Status != nil && *c.Status != Enabled && *c.Status != Disabled {
		return Endpoint{}, rule.InvalidField("status", "must be enabled or disabled")
	}
	if c.EventTypes != nil {
		if err := maySubscribe(ctx, s.DB, a.OrganizationID, a.Permissions, c.EventTypes); err != nil {
			return Endpoint{}, err
		}
	}
	if c.URL != nil {
		if err := checkURL(ctx, *c.URL, s.AllowPrivate, s.Resolver); err != nil {
			return Endpoint{}, err
		}
	}
	var e Endpoint
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if _, err := managed(ctx, tx, a, id, "FOR NO KEY UPDATE"); err != nil {
			return err
		}
		err := tx.GetContext(ctx, &e, `
			UPDATE webhook_endpoints SET
				url = coalesce($3, url),
				description = CASE WHEN $5 THEN NULL ELSE coalesce($4, description) END,
				event_types = coalesce($6, event_types),
				status = coalesce($7, status),
				disabled_reason = CASE WHEN $7 = 'enabled' THEN NULL WHEN $7 = 'disabled' THEN $8 ELSE disabled_reason END,
				failing_since = CASE WHEN $7 = 'enabled' THEN NULL ELSE failing_since END
			WHERE id = $1 AND organization_id = $2
			RETURNING `+endpointColumns, id, a.OrganizationID, c.URL, c.Description, c.ClearDescription, nullArray(c.EventTypes), c.Status,
			c.DisabledReason)
		if err != nil {
			return err
		}
		return a.audit(ctx, tx, audit.WebhookChanged, named(e.ID, e.URL)+" ("+strings.Join(e.EventTypes, ", ")+"): "+e.Status, s.Now())
	})
	if rule.As(err) != nil {
		return Endpoint{}, err
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("webhook: unable to update endpoint: %w", err)
	}
	return e, nil
}

func nullArray(a []string) any {
	if a == nil {
		return nil
	}
	return pq.StringArray(a)
}

// Delete removes an endpoint and its deliveries, for an actor allowed to
// manage it (managed).
func (s *Store) Delete(ctx context.Context, a Actor, id uuid.UUID) error {
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		e, err := managed(ctx, tx, a, id, "FOR UPDATE")
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id); err != nil {
			return err
		}
		return a.audit(ctx, tx, audit.WebhookDeleted, named(e.ID, e.URL), s.Now())
	})
	if rule.As(err) != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("webhook: unable to delete endpoint: %w", err)
	}
	return nil
}

// RotateSecret gives the endpoint a new secret, returned (shown only now);
// the current one keeps signing beside it for overlap, and is forgotten at
// once when overlap is 0 (a leaked secret). With an idempotency key (key
// not nil), the same request sent again within idempotency.Window rotates
// nothing: it returns the endpoint with its current secret. Rotated twice,
// the secret in use would be dropped at once for one nobody saw. The
// actor must be allowed to manage the endpoint (managed), replay or not.
func (s *Store) RotateSecret(ctx context.Context, a Actor, id uuid.UUID, overlap time.Duration, key *string) (e Endpoint, secret string,
	replayed bool, err error) {
	org := a.OrganizationID
	if overlap < 0 || overlap > RotationOverlap {
		return Endpoint{}, "", false, rule.InvalidField("expireCurrentInSeconds", "must be from 0 to 86400 seconds")
	}
	k, err := idempotency.OptionalKey(key, id, overlap.Seconds())
	if err != nil {
		return Endpoint{}, "", false, err
	}
	secret = newSecret()
	sealed, keyID, err := s.Seal(secret, id.String())
	if err != nil {
		return Endpoint{}, "", false, fmt.Errorf("webhook: unable to seal secret: %w", err)
	}
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if _, err := managed(ctx, tx, a, id, "FOR NO KEY UPDATE"); err != nil {
			return err
		}
		earlier, err := k.Claim(ctx, tx, org, idempotency.RotateWebhookSecret, id, s.Now())
		if err != nil {
			return err
		}
		if earlier != uuid.Nil {
			replayed = true
			e, secret, err = s.withSecret(ctx, tx, org, id)
			return err
		}
		err = tx.GetContext(ctx, &e, `
			UPDATE webhook_endpoints SET previous_secret = CASE WHEN $6 THEN secret END,
				previous_key_id = CASE WHEN $6 THEN secret_key_id END, previous_until = CASE WHEN $6 THEN $3::timestamptz END,
				secret = $4, secret_key_id = $5
			WHERE id = $1 AND organization_id = $2
			RETURNING `+endpointColumns, id, org, s.Now().Add(overlap), sealed, keyID, overlap > 0)
		if err != nil {
			return err
		}
		return a.audit(ctx, tx, audit.WebhookRotated, fmt.Sprintf("%s: the old secret stops in %d s", named(e.ID, e.URL), int(overlap.Seconds())),
			s.Now())
	})
	if rule.As(err) != nil {
		return Endpoint{}, "", false, err
	}
	if err != nil {
		return Endpoint{}, "", false, fmt.Errorf("webhook: unable to rotate secret: %w", err)
	}
	return e, secret, replayed, nil
}

// Ping records a webhook.ping event for the endpoint alone, with its one
// delivery (it is never fanned out), and returns its id, for an actor
// allowed to manage the endpoint (managed). A disabled endpoint gets no
// delivery. It counts as one of the endpoint's MaxRequestedSends a minute.
func (s *Store) Ping(ctx context.Context, a Actor, id uuid.UUID) (uuid.UUID, error) {
	now := s.Now()
	var eventID uuid.UUID
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		e, err := managed(ctx, tx, a, id, "FOR NO KEY UPDATE")
		if err != nil {
			return err
		}
		if err := countSends(ctx, tx, []uuid.UUID{id}, now); err != nil {
			return err
		}
		eventID, err = event.AppendDispatched(ctx, tx, a.OrganizationID, event.WebhookPing,
			models.WebhookPing{EndpointId: id, Message: "A test event from payreq."}, now)
		if err != nil {
			return err
		}
		if err := a.audit(ctx, tx, audit.WebhookPinged, named(e.ID, e.URL)+": event "+eventID.String(), now); err != nil || e.Status != Enabled {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, status, next_attempt_at)
			VALUES ($1, $2, 'pending', $3)`, eventID, id, now)
		return err
	})
	if rule.As(err) != nil {
		return uuid.Nil, err
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("webhook: unable to ping: %w", err)
	}
	return eventID, nil
}

// Reencrypt re-seals, under the current key (current), every endpoint
// secret sealed under another one, and returns how many it re-sealed.
// Each endpoint is re-sealed in a transaction of its own, under its row
// lock; run again, it finds nothing.
func (s *Store) Reencrypt(ctx context.Context, current string) (int, error) {
	n, err := postgres.InBatches(ctx, s.DB, func(tx *sqlx.Tx) (int, error) {
		var e struct {
			ID          uuid.UUID `db:"id"`
			Secret      []byte    `db:"secret"`
			SecretKey   string    `db:"secret_key_id"`
			Previous    []byte    `db:"previous_secret"`
			PreviousKey *string   `db:"previous_key_id"`
		}
		err := tx.GetContext(ctx, &e, `SELECT id, secret, secret_key_id, previous_secret, previous_key_id FROM webhook_endpoints
			WHERE secret_key_id <> $1 OR previous_key_id <> $1 LIMIT 1 FOR UPDATE SKIP LOCKED`, current)
		if isNoRows(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		reseal := func(sealed []byte, key string) ([]byte, string, error) {
			plain, err := s.Open(sealed, key, e.ID.String())
			if err != nil {
				return nil, "", err
			}
			return s.Seal(plain, e.ID.String())
		}
		n := 0
		if e.SecretKey != current {
			if e.Secret, e.SecretKey, err = reseal(e.Secret, e.SecretKey); err != nil {
				return 0, err
			}
			n++
		}
		if e.PreviousKey != nil && *e.PreviousKey != current {
			sealed, key, err := reseal(e.Previous, *e.PreviousKey)
			if err != nil {
				return 0, err
			}
			e.Previous, e.PreviousKey = sealed, &key
			n++
		}
		_, err = tx.ExecContext(ctx, `UPDATE webhook_endpoints SET secret = $2, secret_key_id = $3, previous_secret = $4,
			previous_key_id = $5 WHERE id = $1`, e.ID, e.Secret, e.SecretKey, e.Previous, e.PreviousKey)
		return n, err
	})
	if err != nil {
		return n, fmt.Errorf("webhook: re-encrypt: %w", err)
	}
	return n, nil
}
