package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

// newTestTokens signs with a new key, on the clock now.
func newTestTokens(t testing.TB, now func() time.Time) *Tokens {
	t.Helper()
	pem, err := GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := NewTokens(pem, "https://payreq.example", now)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// A verified token is remembered: later checks of the same token give the
// same claims until its exp, and nothing else rides on it.
func TestVerifiedTokensAreRememberedUntilExpiry(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tokens := newTestTokens(t, func() time.Time { return now })
	org := uuid.New()
	token, err := tokens.Issue("mk_000000000000000000000001", org, []string{PaymentsView})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		c, err := tokens.Verify(token)
		if err != nil || c.OrganizationID != org || c.KeyID != "mk_000000000000000000000001" || len(c.Permissions) != 1 {
			t.Fatalf("check %d: %+v, %v", i, c, err)
		}
	}
	if tokens.verified.len() != 1 {
		t.Errorf("%d tokens remembered, want 1", tokens.verified.len())
	}
	// Another signature on the same claims is checked in full, and refused.
	forged := token[:len(token)-2] + "AA"
	if forged == token {
		forged = token[:len(token)-2] + "BB"
	}
	if _, err := tokens.Verify(forged); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("forged signature: %v, want ErrTokenInvalid", err)
	}
	now = now.Add(TokenLifetime - time.Second)
	if _, err := tokens.Verify(token); err != nil {
		t.Errorf("a second before exp: %v", err)
	}
	now = now.Add(time.Second)
	if _, err := tokens.Verify(token); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("at exp: %v, want ErrTokenExpired", err)
	}
}

// Far more tokens than the cache holds: it stays bounded, keeps the ones
// in use, drops the least recently used, and a dropped token is simply
// verified again, in full.
func TestVerifiedCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tokens := newTestTokens(t, func() time.Time { return now })
	tokens.verified = newVerifiedCache(100)
	issue := func(i int) string {
		tok, err := tokens.Issue(fmt.Sprintf("mk_%024d", i), uuid.New(), []string{PaymentsView})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	hot := issue(0)
	first := issue(1)
	for _, tok := range []string{hot, first} {
		if _, err := tokens.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i < 1000; i++ {
		if _, err := tokens.Verify(issue(i)); err != nil {
			t.Fatal(err)
		}
		if _, err := tokens.Verify(hot); err != nil { // in use all along
			t.Fatal(err)
		}
	}
	if n := tokens.verified.len(); n != 100 {
		t.Errorf("the cache holds %d tokens, want its bound of 100", n)
	}
	if _, ok := tokens.verified.get(sha256.Sum256([]byte(hot))); !ok {
		t.Error("the token in use was dropped")
	}
	if _, ok := tokens.verified.get(sha256.Sum256([]byte(first))); ok {
		t.Error("the least recently used token is still held")
	}
	c, err := tokens.Verify(first)
	if err != nil {
		t.Fatalf("a dropped token verified again: %v", err)
	}
	if c.KeyID != fmt.Sprintf("mk_%024d", 1) {
		t.Errorf("claims of a dropped token verified again: key %q", c.KeyID)
	}
	// A held token past its expiry is expired, not served.
	now = now.Add(TokenLifetime)
	if _, err := tokens.Verify(hot); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("a held token past its expiry: %v, want ErrTokenExpired", err)
	}
}

// Remembering a token with the cache full takes constant time: it used to
// scan every entry.
func BenchmarkVerifiedCachePutFull(b *testing.B) {
	c := newVerifiedCache(maxVerified)
	var sum [sha256.Size]byte
	for i := range maxVerified {
		binary.BigEndian.PutUint64(sum[:], uint64(i))
		c.put(sum, verifiedToken{})
	}
	b.ResetTimer()
	for i := range b.N {
		binary.BigEndian.PutUint64(sum[:], uint64(maxVerified+i))
		c.put(sum, verifiedToken{})
	}
}
