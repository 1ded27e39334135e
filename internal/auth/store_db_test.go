package auth

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// keyring is a store of keys on a clock the test moves, and a merchant
// organization whose members make them.
type keyring struct {
	store *Store
	db    *sqlx.DB
	org   uuid.UUID
	now   time.Time
}

func newKeyring(t *testing.T) *keyring {
	t.Helper()
	db, err := postgres.Open(context.Background(), testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	k := &keyring{db: db, org: uuid.Must(uuid.NewV7()), now: time.Now().Truncate(time.Second)}
	clock := func() time.Time { return k.now }
	k.store = &Store{DB: db, Peppers: [][]byte{[]byte("the current pepper")}, Tokens: newTestTokens(t, clock), Now: clock,
		RevocationCheckInterval: 15 * time.Second, Organizations: others{db}, Members: others{db}}
	if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, 'Dana''s Bakery', 'merchant')`, k.org); err != nil {
		t.Fatal(err)
	}
	return k
}

// others reads organizations and memberships as internal/directory and
// internal/people do for auth (they import auth, so this test cannot).
type others struct{ db *sqlx.DB }

func (o others) OrganizationStatus(ctx context.Context, org uuid.UUID) (string, error) {
	var status string
	err := o.db.GetContext(ctx, &status, `SELECT status FROM organizations WHERE id = $1`, org)
	return status, err
}

func (o others) KeyCreator(ctx context.Context, membership uuid.UUID) (Creator, error) {
	var m struct {
		Org         uuid.UUID      `db:"organization_id"`
		Kind        string         `db:"kind"`
		Role        string         `db:"role"`
		Permissions pq.StringArray `db:"permissions"`
	}
	err := o.db.GetContext(ctx, &m, `SELECT m.organization_id, o.kind, m.role, m.permissions
		FROM memberships m JOIN organizations o ON o.id = m.organization_id WHERE m.id = $1 AND m.removed_at IS NULL`, membership)
	if errors.Is(err, sql.ErrNoRows) {
		return Creator{}, ErrNoCreator
	}
	return Creator{Organization: m.Org, Kind: m.Kind, Role: m.Role, Permissions: m.Permissions}, err
}

func (o others) CreatorNames(ctx context.Context, memberships []uuid.UUID) (map[uuid.UUID]string, error) {
	var rows []struct {
		ID   uuid.UUID `db:"id"`
		Name string    `db:"name"`
	}
	err := o.db.SelectContext(ctx, &rows, `SELECT m.id,
			CASE WHEN m.removed_at IS NULL THEN coalesce(nullif(p.name, ''), p.email) ELSE 'former member' END AS name
		FROM memberships m JOIN people p ON p.id = m.person_id WHERE m.id = ANY($1)`, pq.Array(memberships))
	names := map[uuid.UUID]string{}
	for _, r := range rows {
		names[r.ID] = r.Name
	}
	return names, err
}

// member adds a member of the organization (the people package's tables,
// written here as it writes them) and returns the membership's id.
func (k *keyring) member(t *testing.T, role string, permissions ...string) uuid.UUID {
	t.Helper()
	person, membership := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	if _, err := k.db.Exec(`INSERT INTO people (id, email, name, created_at) VALUES ($1, $2, 'Dana', now())`,
		person, person.String()+"@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.db.Exec(`INSERT INTO memberships (id, organization_id, person_id, role, permissions, created_at, accepted_at)
		VALUES ($1, $2, $3, $4, $5, now(), now())`, membership, k.org, person, role, pq.StringArray(permissions)); err != nil {
		t.Fatal(err)
	}
	return membership
}

func (k *keyring) exchange(id, secret string) (Token, error) {
	return k.store.Exchange(context.Background(), Credentials{GrantType: "client_credentials", ClientID: id, ClientSecret: secret})
}

func wantTokenError(t *testing.T, err error, status int, code string) {
	t.Helper()
	var te *TokenError
	if !errors.As(err, &te) || te.Status != status || te.Code != code {
		t.Errorf("err = %v, want %d %s", err, status, code)
	}
}

// A key an Owner makes is exchanged for a token carrying its permissions,
// which authenticates as the key; a wrong secret or an unknown key gets
// invalid_client.
func TestKeyExchangesForAToken(t *testing.T) {
	k := newKeyring(t)
	ctx := context.Background()
	owner := k.member(t, "Owner", PermissionsFor(KindMerchant)...)
	nk, replayed, err := k.store.CreateKey(ctx, nil, owner, " Billing ", []string{PaymentsView, PaymentsCreate, PaymentsView}, nil)
	if err != nil || replayed {
		t.Fatalf("CreateKey: %v, replayed %v", err, replayed)
	}
	if !isKeyID(nk.KeyID) || len(nk.Secret) != 43 || nk.OrganizationID != k.org ||
		!slices.Equal(nk.Permissions, []string{PaymentsCreate, PaymentsView}) {
		t.Errorf("new key = %+v", nk)
	}
	tok, err := k.exchange(nk.KeyID, nk.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if tok.OrganizationID != k.org || !slices.Equal(tok.Permissions, nk.Permissions) {
		t.Errorf("token = %+v, want the key's organization and permissions", tok)
	}
	p, err := k.store.Authenticate(ctx, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if p.KeyID != nk.KeyID || p.KeyName != "Billing" || p.OrganizationID != k.org || !slices.Equal(p.Permissions, nk.Permissions) {
		t.Errorf("principal = %+v, want the key named Billing", p)
	}
	keys, err := k.store.Keys(ctx, k.org)
	if err != nil || len(keys) != 1 || keys[0].LastUsedAt == nil || !keys[0].LastUsedAt.Equal(k.now) || keys[0].CreatorName != "Dana" {
		t.Errorf("Keys = %+v, %v; want the key, last used now, made by Dana", keys, err)
	}

	_, err = k.exchange(nk.KeyID, nk.Secret+"x")
	wantTokenError(t, err, 401, "invalid_client")
	_, err = k.exchange(newKeyID(), nk.Secret)
	wantTokenError(t, err, 401, "invalid_client")
	_, err = k.store.Exchange(ctx, Credentials{GrantType: "password", ClientID: nk.KeyID, ClientSecret: nk.Secret})
	wantTokenError(t, err, 400, "unsupported_grant_type")
}

// Only Owners and Admins make keys, and only of permissions they hold;
// a refused key is not made.
func TestCreateKeyRefusals(t *testing.T) {
	k := newKeyring(t)
	ctx := context.Background()
	admin := k.member(t, "Admin", PaymentsView)
	member := k.member(t, "Member", PermissionsFor(KindMerchant)...)
	for _, c := range []struct {
		name        string
		creator     uuid.UUID
		keyName     string
		permissions []string
		kind        rule.Kind
	}{
		{"no name", admin, " ", []string{PaymentsView}, rule.Invalid},
		{"no permission", admin, "Billing", nil, rule.Invalid},
		{"a Member", member, "Billing", []string{PaymentsView}, rule.Forbidden},
		{"a permission the creator lacks", admin, "Billing", []string{PaymentsRefund}, rule.Forbidden},
		{"a reseller's permission", admin, "Billing", []string{PortfolioView}, rule.Forbidden},
		{"no such membership", uuid.New(), "Billing", []string{PaymentsView}, rule.Forbidden},
	} {
		if _, _, err := k.store.CreateKey(ctx, nil, c.creator, c.keyName, c.permissions, nil); !rule.Is(err, c.kind) {
			t.Errorf("%s: %v, want %v", c.name, err, c.kind)
		}
	}
	if keys, err := k.store.Keys(ctx, k.org); err != nil || len(keys) != 0 {
		t.Errorf("Keys = %+v, %v; want none", keys, err)
	}
}

// A revoked key gets no new token at once, and its tokens are refused
// once the revocation check interval has passed; a key of another
// organization is not found. A suspended organization's keys alike.
func TestRevocationAndSuspension(t *testing.T) {
	k := newKeyring(t)
	ctx := context.Background()
	owner := k.member(t, "Owner", PermissionsFor(KindMerchant)...)
	issued := func() (NewKey, string) {
		t.Helper()
		nk, _, err := k.store.CreateKey(ctx, nil, owner, "Billing", []string{PaymentsView}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := k.exchange(nk.KeyID, nk.Secret)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.store.Authenticate(ctx, tok.AccessToken); err != nil {
			t.Fatal(err)
		}
		return nk, tok.AccessToken
	}
	revoked, token := issued()
	if _, err := k.store.RevokeKey(ctx, nil, uuid.New(), revoked.KeyID); !rule.Is(err, rule.NotFound) {
		t.Errorf("revoking from another organization: %v, want NotFound", err)
	}
	key, err := k.store.RevokeKey(ctx, nil, k.org, revoked.KeyID)
	if err != nil || key.RevokedAt == nil || !key.RevokedAt.Equal(k.now) {
		t.Fatalf("RevokeKey = %+v, %v; want revoked now", key, err)
	}
	_, err = k.exchange(revoked.KeyID, revoked.Secret)
	wantTokenError(t, err, 401, "invalid_client")
	if _, err := k.store.Authenticate(ctx, token); err != nil {
		t.Errorf("within the check interval the token still works: %v", err)
	}
	k.now = k.now.Add(k.store.RevocationCheckInterval)
	if _, err := k.store.Authenticate(ctx, token); !errors.Is(err, ErrKeyRevoked) {
		t.Errorf("after the check interval: %v, want ErrKeyRevoked", err)
	}

	kept, token := issued()
	if _, err := k.db.Exec(`UPDATE organizations SET status = 'suspended' WHERE id = $1`, k.org); err != nil {
		t.Fatal(err)
	}
	_, err = k.exchange(kept.KeyID, kept.Secret)
	wantTokenError(t, err, 401, "invalid_client")
	k.now = k.now.Add(k.store.RevocationCheckInterval)
	if _, err := k.store.Authenticate(ctx, token); !errors.Is(err, ErrOrganizationSuspended) {
		t.Errorf("suspended: %v, want ErrOrganizationSuspended", err)
	}
}

// An address gets TokenRequestsPerMinute token requests a minute, the
// next is 429 with the seconds left in the minute, and a new minute
// starts again.
func TestTokenRequestsPerMinute(t *testing.T) {
	k := newKeyring(t)
	ctx := context.Background()
	k.now = time.Date(2026, 3, 2, 15, 4, 20, 0, time.UTC)
	for i := range TokenRequestsPerMinute {
		if err := k.store.CountTokenRequest(ctx, "192.0.2.9"); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	err := k.store.CountTokenRequest(ctx, "192.0.2.9")
	wantTokenError(t, err, 429, "too_many_requests")
	if te := (*TokenError)(nil); errors.As(err, &te) && te.RetryAfter != 40 {
		t.Errorf("RetryAfter = %d, want 40", te.RetryAfter)
	}
	if err := k.store.CountTokenRequest(ctx, "192.0.2.10"); err != nil {
		t.Errorf("another address: %v", err)
	}
	k.now = k.now.Add(40 * time.Second)
	if err := k.store.CountTokenRequest(ctx, "192.0.2.9"); err != nil {
		t.Errorf("the next minute: %v", err)
	}
}
