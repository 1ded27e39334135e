// Package idempotency remembers the requests made with an idempotency key
// (the API's Idempotency-Key header, or a form's one-time key), so that
// a request sent again answers what the first made and is never made
// twice. Every operation that takes a key claims it here: invoice
// creation, recorded payments, refunds, webhook endpoints and their
// secrets' rotations, API keys, the
// sign-up page's applications, and the portal's forms that make one of
// them.
// It owns the table idempotency_keys.
//
// A key is scoped to its organization and its operation: the same key sent
// to create an invoice and to refund is two keys. A request is the same
// request when its hash is the same (NewKey); the same key with another
// request is refused (rule.KeyReused). A key is claimed in the transaction
// that starts the request's change, so a request refused, or rolled back,
// leaves no key behind; one whose change came to nothing later gives its
// key back (Release).
package idempotency

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/rule"
)

// Window is how long a key is remembered.
const Window = 24 * time.Hour

// Operation is what a key was sent to do.
type Operation string

// The operations that take a key.
const (
	CreateInvoice     Operation = "invoice.create"
	CreateCustomer    Operation = "customer.create"
	RecordPayment     Operation = "invoice.record_payment"
	RefundCardPayment Operation = "card_payment.refund"
	// CreateTerminalPayment: a repeat asks the terminal for no second card.
	CreateTerminalPayment Operation = "terminal_payment.create"
	// CreateAPIKey: the portal's form sent twice makes one key.
	CreateAPIKey Operation = "api_key.create"
	// CreateWebhookEndpoint: a second endpoint of one request would get
	// every event twice, under a secret nobody saw.
	CreateWebhookEndpoint Operation = "webhook_endpoint.create"
	// RotateWebhookSecret: rotated twice, the secret in use would stop at
	// once for one nobody saw.
	RotateWebhookSecret Operation = "webhook_endpoint.rotate_secret"
	// SubmitApplication: the sign-up page's form carries a one-time key,
	// so that a double submit makes one application.
	SubmitApplication Operation = "application.submit"
	// CreateRecurringInvoice: a retried request makes one series, not two
	// that each issue every invoice.
	CreateRecurringInvoice Operation = "recurring_invoice.create"
)

// Key is an idempotency key as a request sent it, with the hash of the
// request.
type Key struct {
	Key  string
	hash []byte
}

// MaxKey is the most characters a key may have.
const MaxKey = 255

// ErrKeyLength is the refusal of a key empty or longer than MaxKey. The
// API's validator refuses such a header first; a form sent without the key
// it was shown with gets it.
var ErrKeyLength = rule.InvalidField("Idempotency-Key", fmt.Sprintf("must be 1 to %d characters", MaxKey))

// NewKey is key sent with the request made of parts (ErrKeyLength when
// key is empty or over MaxKey characters): for an operation on
// something, its id first, then what is asked, as the domain function
// received it. A uuid.UUID is hashed as its 16 bytes; anything else is
// encoded as JSON, so that key order, spacing and number-versus-string
// spelling of a decimal do not make two requests differ. Each part is
// encoded from an addressable copy, so that values whose text form has a
// pointer receiver (an apd.Decimal's MarshalText) are encoded as text.
func NewKey(key string, parts ...any) (Key, error) {
	if key == "" || utf8.RuneCountInString(key) > MaxKey {
		return Key{}, ErrKeyLength
	}
	h := sha256.New()
	for _, p := range parts {
		if id, ok := p.(uuid.UUID); ok {
			h.Write(id[:])
			continue
		}
		v := reflect.New(reflect.TypeOf(p))
		v.Elem().Set(reflect.ValueOf(p))
		b, err := json.Marshal(v.Interface())
		if err != nil {
			return Key{}, fmt.Errorf("idempotency: unable to encode the request: %w", err)
		}
		h.Write(b)
	}
	return Key{Key: key, hash: h.Sum(nil)}, nil
}

// OptionalKey is NewKey of key, or nil when no key was sent (key nil).
func OptionalKey(key *string, parts ...any) (*Key, error) {
	if key == nil {
		return nil, nil
	}
	k, err := NewKey(*key, parts...)
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// ErrReused is the refusal of a key sent again with another request.
var ErrReused = &rule.Error{Kind: rule.KeyReused, Title: "Idempotency key reused",
	Message: "This key was used in the last 24 hours for a request with other values; a new request needs a new key."}

// Claim takes k, of org and op, for the request about to make made, inside
// tx, and holds it until tx ends: a request with the same key waits here
// for tx to commit (then it finds made) or roll back (then it takes the key
// itself). earlier is what a request with the key made within the Window,
// to answer again, or uuid.Nil when the key is now made's. The key with
// another request is ErrReused. A key past the Window is taken over.
func Claim(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, op Operation, k Key, made uuid.UUID, now time.Time) (earlier uuid.UUID, err error) {
	// Conflicting or not, the key's row is locked until tx ends.
	var claimed uuid.UUID
	err = tx.GetContext(ctx, &claimed, `
		INSERT INTO idempotency_keys (organization_id, operation, key, request_hash, result_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (organization_id, operation, key) DO UPDATE
			SET request_hash = excluded.request_hash, result_id = excluded.result_id, created_at = excluded.created_at
			WHERE idempotency_keys.created_at <= $7
		RETURNING result_id`, org, op, k.Key, k.hash, made, now, now.Add(-Window))
	if err == nil {
		return uuid.Nil, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return uuid.Nil, fmt.Errorf("idempotency: unable to claim key: %w", err)
	}
	var row struct {
		Hash     []byte    `db:"request_hash"`
		ResultID uuid.UUID `db:"result_id"`
	}
	err = tx.GetContext(ctx, &row, `SELECT request_hash, result_id FROM idempotency_keys
		WHERE organization_id = $1 AND operation = $2 AND key = $3`, org, op, k.Key)
	if err != nil {
		return uuid.Nil, fmt.Errorf("idempotency: unable to read key: %w", err)
	}
	if subtle.ConstantTimeCompare(row.Hash, k.hash) != 1 {
		return uuid.Nil, ErrReused
	}
	return row.ResultID, nil
}

// Claim is Claim of k, or uuid.Nil when no key was sent (k nil): without
// a key, every request makes what it asks.
func (k *Key) Claim(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, op Operation, made uuid.UUID, now time.Time) (earlier uuid.UUID, err error) {
	if k == nil {
		return uuid.Nil, nil
	}
	return Claim(ctx, tx, org, op, *k, made, now)
}

// Release gives back the key of org and op claimed for made, inside tx:
// made came to nothing (the card processor made no refund), so the key may
// make something again.
func Release(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, op Operation, made uuid.UUID) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys
		WHERE organization_id = $1 AND operation = $2 AND result_id = $3`, org, op, made)
	if err != nil {
		return fmt.Errorf("idempotency: unable to release key: %w", err)
	}
	return nil
}

// DeleteExpired forgets the keys past the Window.
func DeleteExpired(ctx context.Context, db *sqlx.DB, now time.Time) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE created_at < $1`, now.Add(-Window)); err != nil {
		return fmt.Errorf("idempotency: unable to delete expired keys: %w", err)
	}
	return nil
}
