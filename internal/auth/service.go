package auth

import (
	"context"
	"crypto/hmac"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// TokenRequestsPerMinute is how many token requests one client address may
// make in a minute, across every instance.
const TokenRequestsPerMinute = 30

// Store keeps API keys: it makes, lists and revokes them, exchanges them
// for tokens and authenticates requests.
type Store struct {
	DB *sqlx.DB
	// Peppers key the secrets' fingerprints, the first current: a key
	// fingerprinted under an older one is fingerprinted again under the
	// current one at its next exchange.
	Peppers [][]byte
	Tokens  *Tokens
	Now     func() time.Time
	// Organizations and Members read, for auth, tables it does not own:
	// internal/directory's and internal/people's, which import auth, so
	// internal/app hands them in.
	Organizations Organizations
	Members       Members
	// RevocationCheckInterval is how long a key's revoked/suspended state is
	// trusted before it is read again from the database.
	RevocationCheckInterval time.Duration

	mu    sync.Mutex
	state map[string]keyState

	// limited are the addresses refused in the window limitedIn: refused
	// again from memory, with no database write, until it ends.
	limitMu   sync.Mutex
	limitedIn time.Time
	limited   map[string]bool
}

// TokenError is an OAuth 2.0 error answer of the token endpoint.
type TokenError struct {
	Status      int
	Code        string // invalid_request, invalid_client, unsupported_grant_type, too_many_requests
	Description string
	RetryAfter  int // seconds, for too_many_requests
}

func (e *TokenError) Error() string { return e.Code + ": " + e.Description }

// Credentials is what a client sent to the token endpoint.
type Credentials struct {
	GrantType    string
	ClientID     string
	ClientSecret string
}

// Token is a successful token answer.
type Token struct {
	AccessToken    string
	Permissions    []string
	OrganizationID uuid.UUID
}

// Exchange checks the credentials and issues a token; the request was
// counted by CountTokenRequest before its body was read.
func (s *Store) Exchange(ctx context.Context, c Credentials) (Token, error) {
	switch {
	case c.GrantType == "":
		return Token{}, &TokenError{Status: 400, Code: "invalid_request", Description: "grant_type is required and must be client_credentials."}
	case c.GrantType != "client_credentials":
		return Token{}, &TokenError{Status: 400, Code: "unsupported_grant_type", Description: "Only grant_type=client_credentials is supported."}
	case c.ClientID == "" || c.ClientSecret == "":
		return Token{}, &TokenError{Status: 400, Code: "invalid_request", Description: "Send the key id as client_id and the secret as client_secret, or both with HTTP Basic authentication."}
	}
	invalid := &TokenError{Status: 401, Code: "invalid_client", Description: "Unknown key, wrong secret, revoked key or suspended organization."}
	var key struct {
		Fingerprint []byte         `db:"secret_fingerprint"`
		OrgID       uuid.UUID      `db:"organization_id"`
		Permissions pq.StringArray `db:"permissions"`
		Revoked     bool           `db:"revoked"`
	}
	err := sql.ErrNoRows
	// Only a key id's own shape goes to the database: HTTP Basic credentials
	// are any bytes, which PostgreSQL text may not hold.
	if isKeyID(c.ClientID) {
		err = s.DB.GetContext(ctx, &key, `
			SELECT secret_fingerprint, organization_id, permissions, revoked_at IS NOT NULL AS revoked
			FROM api_keys WHERE id = $1`, c.ClientID)
	}
	if errors.Is(err, sql.ErrNoRows) {
		// Spend the same work as a real comparison, so timing does not tell
		// which key ids exist.
		hmac.Equal(fingerprint(s.Peppers[0], c.ClientSecret), make([]byte, 32))
		return Token{}, invalid
	}
	if err != nil {
		return Token{}, fmt.Errorf("auth: unable to read key: %w", err)
	}
	matched := -1
	for i, p := range s.Peppers {
		if hmac.Equal(fingerprint(p, c.ClientSecret), key.Fingerprint) {
			matched = i
			break
		}
	}
	if matched < 0 || key.Revoked {
		return Token{}, invalid
	}
	status, err := s.Organizations.OrganizationStatus(ctx, key.OrgID)
	if err != nil {
		return Token{}, fmt.Errorf("auth: unable to read key: %w", err)
	}
	if suspended(status) {
		return Token{}, invalid
	}
	if matched > 0 {
		// Under the current pepper from now on, so the old one can go. A
		// concurrent exchange may have done it already: the condition keeps
		// the first.
		if _, err := s.DB.ExecContext(ctx, `UPDATE api_keys SET secret_fingerprint = $2 WHERE id = $1 AND secret_fingerprint = $3`,
			c.ClientID, fingerprint(s.Peppers[0], c.ClientSecret), key.Fingerprint); err != nil {
			return Token{}, fmt.Errorf("auth: unable to re-fingerprint key: %w", err)
		}
	}
	// "Last used" on the portal's keys page is the last exchange.
	if _, err := s.DB.ExecContext(ctx, `UPDATE api_keys SET last_used_at = $2 WHERE id = $1`, c.ClientID, s.Now()); err != nil {
		return Token{}, fmt.Errorf("auth: unable to mark key used: %w", err)
	}
	access, err := s.Tokens.Issue(c.ClientID, key.OrgID, key.Permissions)
	if err != nil {
		return Token{}, err
	}
	return Token{AccessToken: access, Permissions: key.Permissions, OrganizationID: key.OrgID}, nil
}

// CountTokenRequest counts a token request against the address's current
// minute, before anything of the request is read, so that every request
// counts, malformed ones included; past the limit it is a 429 TokenError
// saying how long to wait. The count lives in the database so every
// instance shares it, and never goes past the limit: a refused address is
// refused from memory until the minute ends, so that a client sending on
// regardless costs no write.
func (s *Store) CountTokenRequest(ctx context.Context, address string) error {
	now := s.Now()
	window := now.Truncate(time.Minute)
	if s.limitedNow(address, window) {
		return tooManyTokenRequests(now, window)
	}
	var n int
	err := s.DB.GetContext(ctx, &n, `
		INSERT INTO token_requests (address, window_start, requests) VALUES ($1, $2, 1)
		ON CONFLICT (address, window_start) DO UPDATE SET requests = token_requests.requests + 1
		WHERE token_requests.requests < $3
		RETURNING requests`, address, window, TokenRequestsPerMinute)
	switch {
	case errors.Is(err, sql.ErrNoRows): // at the limit: nothing was counted
		s.limit(address, window)
		return tooManyTokenRequests(now, window)
	case err != nil:
		return fmt.Errorf("auth: unable to count token request: %w", err)
	}
	return nil
}

// limitedNow reports whether address was refused in window.
func (s *Store) limitedNow(address string, window time.Time) bool {
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	return s.limitedIn.Equal(window) && s.limited[address]
}

// limit remembers address as refused in window; a new window forgets the
// addresses of the one before.
func (s *Store) limit(address string, window time.Time) {
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	if !s.limitedIn.Equal(window) {
		s.limitedIn, s.limited = window, map[string]bool{}
	}
	s.limited[address] = true
}

func tooManyTokenRequests(now, window time.Time) *TokenError {
	wait := max(int(window.Add(time.Minute).Sub(now).Seconds()+0.999), 1)
	return &TokenError{Status: 429, Code: "too_many_requests",
		Description: fmt.Sprintf("More than %d token requests in a minute from this address; retry after %d seconds.", TokenRequestsPerMinute, wait),
		RetryAfter:  wait}
}

// DeleteOldTokenRequests removes counts of past minutes.
func (s *Store) DeleteOldTokenRequests(ctx context.Context) error {
	_, err := s.DB.ExecContext(ctx, `DELETE FROM token_requests WHERE window_start < $1`, s.Now().Add(-2*time.Minute))
	if err != nil {
		return fmt.Errorf("auth: unable to delete old token requests: %w", err)
	}
	return nil
}

// Principal is who a request acts for.
type Principal struct {
	KeyID          string
	KeyName        string
	OrganizationID uuid.UUID
	Permissions    []string
}

// Access failures after a valid signature.
var (
	ErrKeyRevoked            = errors.New("API key revoked")
	ErrOrganizationSuspended = errors.New("organization suspended")
)

type keyState struct {
	name      string
	revoked   bool
	suspended bool
	checkedAt time.Time
}

// Authenticate verifies a bearer token and the current state of its key.
// The key's state is cached for RevocationCheckInterval, so a revocation or
// suspension reaches every instance within that interval.
func (s *Store) Authenticate(ctx context.Context, bearer string) (Principal, error) {
	claims, err := s.Tokens.Verify(bearer)
	if err != nil {
		return Principal{}, err
	}
	st, err := s.keyState(ctx, claims.KeyID)
	if err != nil {
		return Principal{}, err
	}
	switch {
	case st.revoked:
		return Principal{}, ErrKeyRevoked
	case st.suspended:
		return Principal{}, ErrOrganizationSuspended
	}
	return Principal{KeyID: claims.KeyID, KeyName: st.name, OrganizationID: claims.OrganizationID, Permissions: claims.Permissions}, nil
}

func (s *Store) keyState(ctx context.Context, keyID string) (keyState, error) {
	now := s.Now()
	s.mu.Lock()
	st, ok := s.state[keyID]
	s.mu.Unlock()
	if ok && now.Sub(st.checkedAt) < s.RevocationCheckInterval {
		return st, nil
	}
	var row struct {
		Name    string    `db:"name"`
		Revoked bool      `db:"revoked"`
		Org     uuid.UUID `db:"organization_id"`
	}
	// Two lookups by primary key (the key, then its organization's status,
	// which is directory's), once per RevocationCheckInterval and key.
	var status string
	err := s.DB.GetContext(ctx, &row, `SELECT name, revoked_at IS NOT NULL AS revoked, organization_id FROM api_keys WHERE id = $1`, keyID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// A signed token for a key that no longer exists: treat as revoked.
		row.Revoked = true
	case err != nil:
		return keyState{}, fmt.Errorf("auth: unable to read key state: %w", err)
	default:
		if status, err = s.Organizations.OrganizationStatus(ctx, row.Org); err != nil {
			return keyState{}, fmt.Errorf("auth: unable to read key state: %w", err)
		}
	}
	st = keyState{name: row.Name, revoked: row.Revoked, suspended: suspended(status), checkedAt: now}
	s.mu.Lock()
	if s.state == nil {
		s.state = map[string]keyState{}
	}
	s.state[keyID] = st
	s.mu.Unlock()
	return st, nil
}
