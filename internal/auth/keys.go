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

	"github.com/google/uuid"
	"github.com/lib/pq"
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

// ErrInvalid marks a request the operator must change (unknown organization,
// permissions out of reach, ...).
var ErrInvalid = errors.New("invalid")

// Key is an API key as listed to an operator; its secret is never kept.
type Key struct {
	ID             string     `db:"id" json:"keyId"`
	OrganizationID uuid.UUID  `db:"organization_id" json:"organizationId"`
	Name           string     `db:"name" json:"name"`
	Permissions    []string   `db:"-" json:"permissions"`
	CreatedAt      time.Time  `db:"created_at" json:"createdAt"`
	RevokedAt      *time.Time `db:"revoked_at" json:"revokedAt"`
}

// NewKey is a key just made, with the secret shown this once.
type NewKey struct {
	KeyID          string    `json:"keyId"`
	Secret         string    `json:"secret"`
	OrganizationID uuid.UUID `json:"organizationId"`
	Permissions    []string  `json:"permissions"`
}

// CreateKey makes a key for org as the organization's Owner. The permissions
// must be offered to the organization's kind and held by the Owner.
func (k *Store) CreateKey(ctx context.Context, org uuid.UUID, name string, permissions []string) (NewKey, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return NewKey{}, fmt.Errorf("%w: a key name of 1 to 200 characters is required", ErrInvalid)
	}
	if len(permissions) == 0 {
		return NewKey{}, fmt.Errorf("%w: at least one permission is required", ErrInvalid)
	}
	var owner struct {
		ID          uuid.UUID      `db:"id"`
		Kind        string         `db:"kind"`
		Permissions pq.StringArray `db:"permissions"`
	}
	err := k.DB.GetContext(ctx, &owner, `
		SELECT u.id, o.kind, u.permissions
		FROM organizations o JOIN users u ON u.organization_id = o.id AND u.role = 'Owner'
		WHERE o.id = $1 ORDER BY u.created_at, u.id LIMIT 1`, org)
	if errors.Is(err, sql.ErrNoRows) {
		return NewKey{}, fmt.Errorf("%w: organization %s not found or has no Owner", ErrInvalid, org)
	}
	if err != nil {
		return NewKey{}, fmt.Errorf("auth: unable to find the Owner of %s: %w", org, err)
	}
	offered := PermissionsFor(owner.Kind)
	permissions = slices.Compact(slices.Sorted(slices.Values(permissions)))
	for _, p := range permissions {
		if !slices.Contains(offered, p) {
			return NewKey{}, fmt.Errorf("%w: permission %q is not offered to %s organizations (offered: %s)", ErrInvalid, p, owner.Kind, strings.Join(offered, ","))
		}
		if !slices.Contains(owner.Permissions, p) {
			return NewKey{}, fmt.Errorf("%w: the Owner does not hold permission %q, so a key cannot be given it", ErrInvalid, p)
		}
	}
	nk := NewKey{KeyID: newKeyID(), Secret: newSecret(), OrganizationID: org, Permissions: permissions}
	_, err = k.DB.ExecContext(ctx, `
		INSERT INTO api_keys (id, organization_id, name, secret_fingerprint, permissions, created_by)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		nk.KeyID, org, name, fingerprint(k.Peppers[0], nk.Secret), pq.StringArray(permissions), owner.ID)
	if err != nil {
		return NewKey{}, fmt.Errorf("auth: unable to create key: %w", err)
	}
	return nk, nil
}

// Keys returns the organization's keys, revoked ones included, oldest first.
func (k *Store) Keys(ctx context.Context, org uuid.UUID) ([]Key, error) {
	rows, err := k.DB.QueryxContext(ctx, `
		SELECT id, organization_id, name, permissions, created_at, revoked_at
		FROM api_keys WHERE organization_id = $1 ORDER BY created_at, id`, org)
	if err != nil {
		return nil, fmt.Errorf("auth: unable to list keys: %w", err)
	}
	defer rows.Close()
	keys := []Key{}
	for rows.Next() {
		var key Key
		var perms pq.StringArray
		if err := rows.Scan(&key.ID, &key.OrganizationID, &key.Name, &perms, &key.CreatedAt, &key.RevokedAt); err != nil {
			return nil, fmt.Errorf("auth: unable to list keys: %w", err)
		}
		key.Permissions = perms
		keys = append(keys, key)
	}
	return keys, rows.Err()
}

// RevokeKey marks a key revoked; revoking twice keeps the first date.
func (k *Store) RevokeKey(ctx context.Context, keyID string) error {
	res, err := k.DB.ExecContext(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1`, keyID)
	if err != nil {
		return fmt.Errorf("auth: unable to revoke key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: key %s not found", ErrInvalid, keyID)
	}
	return nil
}
