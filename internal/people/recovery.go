package people

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// A recovery code: 16 characters of Crockford's base32 alphabet (no i, l,
// o or u), 5 bits each, so 80 random bits, shown as four groups of four.
// An unsalted hash of fewer bits (the first codes had about 49.5) gives
// them all up to one GPU run over a copy of the database; these are kept
// as HMAC-SHA-256 under a key derived from the pepper (Store.RecoveryKeys),
// which a copy of the database does not hold.
const (
	recoveryAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	recoveryLength   = 16
)

var errNoRecoveryKey = errors.New("people: no recovery code key (Store.RecoveryKeys)")

func newRecoveryCode() string {
	b := make([]byte, recoveryLength)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("people: crypto/rand failed: %v", err))
	}
	var c strings.Builder
	for i := range b {
		if i > 0 && i%4 == 0 {
			c.WriteByte('-')
		}
		c.WriteByte(recoveryAlphabet[b[i]&31]) // 256 is a multiple of 32: no bias
	}
	return c.String()
}

// normalCode is a recovery code as typed, in the form it is hashed in:
// lower case, without separators, and Crockford's look-alikes (o for 0,
// i and l for 1) read as meant.
func normalCode(c string) string {
	return strings.NewReplacer("-", "", " ", "", "o", "0", "i", "1", "l", "1").Replace(strings.ToLower(strings.TrimSpace(c)))
}

func recoveryMAC(key []byte, code string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("payreq recovery code\x00" + normalCode(code)))
	return m.Sum(nil)
}

// newRecoveryCodes replaces the person's recovery codes by RecoveryCodes
// new ones, under the current key, and answers them (shown this once).
func (s *Store) newRecoveryCodes(ctx context.Context, tx *sqlx.Tx, person uuid.UUID) ([]string, error) {
	if len(s.RecoveryKeys) == 0 {
		return nil, errNoRecoveryKey
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM recovery_codes WHERE person_id = $1`, person); err != nil {
		return nil, fmt.Errorf("people: unable to remove recovery codes: %w", err)
	}
	codes := make([]string, 0, RecoveryCodes)
	for range RecoveryCodes {
		c := newRecoveryCode()
		if _, err := tx.ExecContext(ctx, `INSERT INTO recovery_codes (person_id, digest, scheme) VALUES ($1, $2, 'hmac')`,
			person, recoveryMAC(s.RecoveryKeys[0], c)); err != nil {
			return nil, fmt.Errorf("people: unable to keep recovery codes: %w", err)
		}
		codes = append(codes, c)
	}
	return codes, nil
}

// useRecoveryCode marks code used when it is one of the person's unused
// recovery codes. Codes made before the pepper keyed them (scheme
// sha256) are still taken, once each, until used or replaced.
func (s *Store) useRecoveryCode(ctx context.Context, tx *sqlx.Tx, person uuid.UUID, code string) (bool, error) {
	macs := make(pq.ByteaArray, len(s.RecoveryKeys))
	for i, k := range s.RecoveryKeys {
		macs[i] = recoveryMAC(k, code)
	}
	res, err := tx.ExecContext(ctx, `UPDATE recovery_codes SET used_at = $4 WHERE person_id = $1 AND used_at IS NULL
		AND ((scheme = 'hmac' AND digest = ANY($2)) OR (scheme = 'sha256' AND digest = $3))`,
		person, macs, digest(normalCode(code)), s.Now())
	if err != nil {
		return false, fmt.Errorf("people: unable to use recovery code: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
