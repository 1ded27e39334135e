package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomBase62 returns n characters drawn uniformly from base62 (5.95 bits each).
func randomBase62(n int) string {
	var b strings.Builder
	max := big.NewInt(int64(len(base62)))
	for range n {
		i, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(fmt.Sprintf("auth: crypto/rand failed: %v", err))
		}
		b.WriteByte(base62[i.Int64()])
	}
	return b.String()
}

// newKeyID returns "mk_" + 24 base62; newSecret "ms_" + 40 base62 (238 bits).
func newKeyID() string  { return "mk_" + randomBase62(24) }
func newSecret() string { return "ms_" + randomBase62(40) }

// isKeyID says whether s has the shape of a key id.
func isKeyID(s string) bool {
	if len(s) != 27 || !strings.HasPrefix(s, "mk_") {
		return false
	}
	for i := 3; i < len(s); i++ {
		if strings.IndexByte(base62, s[i]) < 0 {
			return false
		}
	}
	return true
}

// fingerprint is what is stored of a secret: HMAC-SHA256 under the pepper,
// so a copy of the database alone cannot be used to test guesses.
func fingerprint(pepper []byte, secret string) []byte {
	m := hmac.New(sha256.New, pepper)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// Key is an API key as listed; its secret is never kept.
type Key struct {
	ID             string    `db:"id" json:"keyId"`
	OrganizationID uuid.UUID `db:"organization_id" json:"organizationId"`
	Name           string    `db:"name" json:"name"`
	Permissions    []string  `db:"-" json:"permissions"`
	// CreatedBy is the membership that made the key; CreatorName its
	// person's name, or "former member" once the membership is removed.
	CreatedBy   uuid.UUID  `db:"created_by" json:"-"`
	CreatorName string     `db:"creator_name" json:"createdBy"`
	CreatedAt   time.Time  `db:"created_at" json:"createdAt"`
	LastUsedAt  *time.Time `db:"last_used_at" json:"lastUsedAt"`
	RevokedAt   *time.Time `db:"revoked_at" json:"revokedAt"`
}

// NewKey is a key just made, with the secret shown this once.
type NewKey struct {
	KeyID          string    `json:"keyId"`
	Secret         string    `json:"secret"`
	OrganizationID uuid.UUID `json:"organizationId"`
	Permissions    []string  `json:"permissions"`
}

// MaxKeyName is the longest key name, in characters.
const MaxKeyName = 64

// CreateKey makes a key of the creator's organization, as the creator (a
// membership): an Owner or an Admin, giving only permissions it holds
// that the organization's kind is offered. A refusal is a *rule.Error:
// Invalid for the name or no permission, Forbidden for the rest. With an
// idempotency key (key not nil: a portal form's), the same request sent
// again within idempotency.Window makes nothing: replayed, it returns the
// key made then, without its secret, which was shown once. by, when a
// person makes the key, is audited in the key's transaction (a replay
// writes no second entry).
func (k *Store) CreateKey(ctx context.Context, by *audit.Actor, creator uuid.UUID, name string, permissions []string, key *string) (nk NewKey,
	replayed bool, err error) {
	name = strings.TrimSpace(name)
	fields := map[string][]string{}
	if name == "" || utf8.RuneCountInString(name) > MaxKeyName || strings.ContainsFunc(name, unicode.IsControl) {
		fields["name"] = []string{fmt.Sprintf("Give the key a name of 1 to %d characters.", MaxKeyName)}
	}
	if len(permissions) == 0 {
		fields["permissions"] = []string{"Choose at least one permission."}
	}
	if err := rule.InvalidFields(fields); err != nil {
		return NewKey{}, false, err
	}
	m, err := k.Members.KeyCreator(ctx, creator)
	if errors.Is(err, ErrNoCreator) {
		return NewKey{}, false, rule.New(rule.Forbidden, "", "Permission required", "Only current members make keys.")
	}
	if err != nil {
		return NewKey{}, false, fmt.Errorf("auth: unable to read the key's creator: %w", err)
	}
	if m.Role != "Owner" && m.Role != "Admin" {
		return NewKey{}, false, rule.New(rule.Forbidden, "", "Permission required", "Only Owners and Admins make API keys.")
	}
	offered := PermissionsFor(m.Kind)
	permissions = slices.Compact(slices.Sorted(slices.Values(permissions)))
	for _, p := range permissions {
		if !slices.Contains(offered, p) {
			return NewKey{}, false, &rule.Error{Kind: rule.Forbidden, Field: "permissions", Title: "Permission required", Permission: p,
				Message: fmt.Sprintf("%q is not a permission of %s organizations (they have %s).", p, m.Kind, strings.Join(offered, ", "))}
		}
		if !slices.Contains(m.Permissions, p) {
			return NewKey{}, false, &rule.Error{Kind: rule.Forbidden, Field: "permissions", Title: "Permission required", Permission: p,
				Message: fmt.Sprintf("A key can be given only permissions its creator holds, and its creator does not hold %s.", p)}
		}
	}
	var request *uuid.UUID
	var ik idempotency.Key
	if key != nil {
		if ik, err = idempotency.NewKey(*key, creator, name, permissions); err != nil {
			return NewKey{}, false, err
		}
		id := uuid.Must(uuid.NewV7())
		request = &id
	}
	nk = NewKey{KeyID: newKeyID(), Secret: newSecret(), OrganizationID: m.Organization, Permissions: permissions}
	err = postgres.InTx(ctx, k.DB, func(tx *sqlx.Tx) error {
		if request != nil {
			earlier, err := idempotency.Claim(ctx, tx, m.Organization, idempotency.CreateAPIKey, ik, *request, k.Now())
			if err != nil {
				return err
			}
			if earlier != uuid.Nil {
				replayed = true
				var made struct {
					ID          string         `db:"id"`
					Permissions pq.StringArray `db:"permissions"`
				}
				if err := tx.GetContext(ctx, &made, `SELECT id, permissions FROM api_keys WHERE request_id = $1`, earlier); err != nil {
					return err
				}
				nk = NewKey{KeyID: made.ID, OrganizationID: m.Organization, Permissions: made.Permissions}
				return nil
			}
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO api_keys (id, organization_id, name, secret_fingerprint, permissions, created_by, created_at, request_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			nk.KeyID, m.Organization, name, fingerprint(k.Peppers[0], nk.Secret), pq.StringArray(permissions), creator, k.Now(), request)
		if err != nil || by == nil {
			return err
		}
		return audit.Append(ctx, tx, audit.Entry{Organization: &m.Organization, Actor: *by, Action: audit.KeyCreated,
			Detail: nk.KeyID + " " + name + " (" + strings.Join(permissions, ", ") + ")", At: k.Now()})
	})
	if rule.As(err) != nil {
		return NewKey{}, false, err
	}
	if err != nil {
		return NewKey{}, false, fmt.Errorf("auth: unable to create key: %w", err)
	}
	return nk, replayed, nil
}

const keyColumns = `id, organization_id, name, permissions, created_by, created_at, last_used_at, revoked_at FROM api_keys`

// scanKeys reads the keys of rows and names their creators (people's).
func (k *Store) scanKeys(ctx context.Context, rows *sqlx.Rows) ([]Key, error) {
	defer rows.Close()
	keys := []Key{}
	for rows.Next() {
		var key Key
		var perms pq.StringArray
		if err := rows.Scan(&key.ID, &key.OrganizationID, &key.Name, &perms, &key.CreatedBy,
			&key.CreatedAt, &key.LastUsedAt, &key.RevokedAt); err != nil {
			return nil, fmt.Errorf("auth: unable to list keys: %w", err)
		}
		key.Permissions = perms
		keys = append(keys, key)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("auth: unable to list keys: %w", err)
	}
	creators := make([]uuid.UUID, len(keys))
	for i, key := range keys {
		creators[i] = key.CreatedBy
	}
	names, err := k.Members.CreatorNames(ctx, creators)
	if err != nil {
		return nil, fmt.Errorf("auth: unable to name keys' creators: %w", err)
	}
	for i := range keys {
		keys[i].CreatorName = names[keys[i].CreatedBy]
	}
	return keys, nil
}

// Keys returns the organization's keys, revoked ones included, oldest first.
func (k *Store) Keys(ctx context.Context, org uuid.UUID) ([]Key, error) {
	rows, err := k.DB.QueryxContext(ctx, `SELECT `+keyColumns+` WHERE organization_id = $1 ORDER BY created_at, id`, org)
	if err != nil {
		return nil, fmt.Errorf("auth: unable to list keys: %w", err)
	}
	return k.scanKeys(ctx, rows)
}

var errNoKey = rule.New(rule.NotFound, "", "Key not found", "There is no such API key in this organization.")

// Key reads one key by its id.
func (k *Store) Key(ctx context.Context, keyID string) (Key, error) {
	if !isKeyID(keyID) {
		return Key{}, errNoKey
	}
	rows, err := k.DB.QueryxContext(ctx, `SELECT `+keyColumns+` WHERE id = $1`, keyID)
	if err != nil {
		return Key{}, fmt.Errorf("auth: unable to read key: %w", err)
	}
	keys, err := k.scanKeys(ctx, rows)
	if err != nil {
		return Key{}, err
	}
	if len(keys) == 0 {
		return Key{}, errNoKey
	}
	return keys[0], nil
}

// RevokeKey marks a key of org revoked: no new token at once, tokens
// issued refused within the revocation check interval. Revoking twice
// keeps the first date and audits the first only; a key of another
// organization is not found. by, when a person revokes it, is audited in
// the revocation's transaction.
func (k *Store) RevokeKey(ctx context.Context, by *audit.Actor, org uuid.UUID, keyID string) (Key, error) {
	if !isKeyID(keyID) {
		return Key{}, errNoKey
	}
	err := postgres.InTx(ctx, k.DB, func(tx *sqlx.Tx) error {
		var r struct {
			Name  string `db:"name"`
			First bool   `db:"first"`
		}
		err := tx.GetContext(ctx, &r, `
			UPDATE api_keys k SET revoked_at = coalesce(k.revoked_at, $3)
			FROM (SELECT id, revoked_at FROM api_keys WHERE id = $1 AND organization_id = $2 FOR UPDATE) old
			WHERE k.id = old.id
			RETURNING k.name, old.revoked_at IS NULL AS first`, keyID, org, k.Now())
		if errors.Is(err, sql.ErrNoRows) {
			return errNoKey
		}
		if err != nil || by == nil || !r.First {
			return err
		}
		return audit.Append(ctx, tx, audit.Entry{Organization: &org, Actor: *by, Action: audit.KeyRevoked, Detail: keyID + " " + r.Name, At: k.Now()})
	})
	if rule.As(err) != nil {
		return Key{}, err
	}
	if err != nil {
		return Key{}, fmt.Errorf("auth: unable to revoke key: %w", err)
	}
	return k.Key(ctx, keyID)
}
