package auth

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A verified token is remembered: later checks of the same token give the
// same claims until its exp, and nothing else rides on it.
func TestVerifiedTokensAreRememberedUntilExpiry(t *testing.T) {
	pem, err := GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tokens, err := NewTokens(pem, "https://payreq.example", func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
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
	if len(tokens.verified) != 1 {
		t.Errorf("%d tokens remembered, want 1", len(tokens.verified))
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
