package invoice

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// PayLinks makes and reads the tokens of pay links. A token is the
// invoice's id enciphered with AES under a server key: 128 bits that look
// random and cannot be made without the key, never the id itself, and
// nothing of it is stored, so a copy of the database holds no pay link. A
// token is read back by deciphering it under each key, the first one
// current, so links made under an older key keep working while it is kept.
//
// Invoices made before tokens were enciphered kept random tokens, which
// their customers hold; only the SHA-256 of each is stored
// (invoices.legacy_pay_token_digest), and such a link is found by it.
type PayLinks struct {
	keys []cipher.Block
}

// NewPayLinks takes 32-byte keys, the first current.
func NewPayLinks(keys ...[]byte) (*PayLinks, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("invoice: no pay link key")
	}
	p := &PayLinks{}
	for _, k := range keys {
		if len(k) != 32 {
			return nil, fmt.Errorf("invoice: a pay link key has %d bytes, want 32", len(k))
		}
		b, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("invoice: pay link key: %w", err)
		}
		p.keys = append(p.keys, b)
	}
	return p, nil
}

// tokenLength is the length of every token: 16 bytes in base64url.
const tokenLength = 22

// writeToken writes the token of an invoice's pay link to b (Store.Link
// makes the link in one allocation, where token, text and link had taken
// four).
func (p *PayLinks) writeToken(b *strings.Builder, id uuid.UUID) {
	var text [tokenLength]byte
	out := make([]byte, aes.BlockSize) // escapes, through cipher.Block
	p.keys[0].Encrypt(out, id[:])
	base64.RawURLEncoding.Encode(text[:], out)
	b.Write(text[:])
}

// ids are the invoice ids a token may name, one per key; none when it is
// not one of these tokens.
func (p *PayLinks) ids(token string) []uuid.UUID {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != aes.BlockSize {
		return nil
	}
	out := make([]uuid.UUID, len(p.keys))
	for i, k := range p.keys {
		k.Decrypt(out[i][:], raw)
	}
	return out
}

// legacyDigest is how a token made before enciphering is stored.
func legacyDigest(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}
