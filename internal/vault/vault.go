// Package vault encrypts the few values the service must keep but never
// show: full tax ids, social security numbers and bank account numbers.
package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/payreq/payreq/internal/secretfile"
)

// Vault seals with one AES-256-GCM key and opens with any key it knows, so
// keys can be rotated: each sealed value is stored with its key id.
type Vault struct {
	current string
	keys    map[string]cipher.AEAD
}

// GenerateKeyFile returns the contents of a new key file: 32 random bytes in hex.
func GenerateKeyFile() ([]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return []byte(hex.EncodeToString(b) + "\n"), nil
}

// New reads a key file: one hex key per line (secretfile.HexKeys), the
// first one current (used to seal), the others kept to open older values.
func New(keyFile []byte) (*Vault, error) {
	raws, err := secretfile.HexKeys(keyFile)
	if err != nil {
		return nil, err
	}
	v := &Vault{keys: map[string]cipher.AEAD{}}
	for _, raw := range raws {
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("vault: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("vault: %w", err)
		}
		sum := sha256.Sum256(raw)
		id := hex.EncodeToString(sum[:6])
		v.keys[id] = aead
		if v.current == "" {
			v.current = id
		}
	}
	return v, nil
}

// Seal encrypts plaintext; aad binds it to where it is stored (for example
// "application:<id>:tax_id"), so a value cannot be moved to another row.
func (v *Vault) Seal(plaintext, aad string) (sealed []byte, keyID string, err error) {
	aead := v.keys[v.current]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, "", fmt.Errorf("vault: %w", err)
	}
	return aead.Seal(nonce, nonce, []byte(plaintext), []byte(aad)), v.current, nil
}

// Open decrypts a value sealed under keyID with the same aad.
func (v *Vault) Open(sealed []byte, keyID, aad string) (string, error) {
	aead, ok := v.keys[keyID]
	if !ok {
		return "", fmt.Errorf("vault: unknown key id %s", keyID)
	}
	if len(sealed) < aead.NonceSize() {
		return "", errors.New("vault: sealed value too short")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("vault: %w", err)
	}
	return string(plain), nil
}

// Keys is what re-sealing needs: sealing under the current key, opening
// under any (a *Vault).
type Keys interface {
	Seal(plaintext, aad string) (sealed []byte, keyID string, err error)
	Open(sealed []byte, keyID, aad string) (string, error)
}

// Reseal opens a value sealed under keyID with aad and seals it again with
// k's current key.
func Reseal(k Keys, sealed []byte, keyID, aad string) ([]byte, string, error) {
	plain, err := k.Open(sealed, keyID, aad)
	if err != nil {
		return nil, "", err
	}
	return k.Seal(plain, aad)
}

// Current is the id of the key Seal uses.
func (v *Vault) Current() string { return v.current }
