// Package people holds who signs in to the portal and what they may do
// there: people (an email, a password, a second factor), their
// memberships of organizations (a role and permissions), sessions,
// invitations, password resets and the sign-in limits. It writes the audit
// entries of its own changes (sign-ins, members) through package audit, in
// their transactions. It knows nothing of HTTP: the portal and the CLI
// call it.
//
// It owns the tables people, memberships, two_factor_required,
// recovery_codes, sessions, invitations, password_resets, reset_requests,
// sign_in_failures, sign_in_locks and password_checks. Its
// messages (invitations, resets, lockout notices) go through the outbox
// (internal/delivery); a reset request's words are written when the
// delivery worker asks ResetNotice.
package people

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/rule"
)

// Roles a membership may have: Owners do everything; Admins everything
// but managing Owners and the two-factor rule; Members manage nothing.
const (
	Owner  = "Owner"
	Admin  = "Admin"
	Member = "Member"
)

// Roles in the order a form offers them.
var Roles = []string{Owner, Admin, Member}

// Limits of the links and sessions (decisions: "People and the portal").
const (
	InvitationLife  = 72 * time.Hour
	ResetLife       = 30 * time.Minute
	SessionIdle     = 30 * time.Minute
	SessionLifetime = 12 * time.Hour
)

// Sealer seals and opens the values kept secret at rest (TOTP secrets,
// messages holding a link), as internal/vault does.
type Sealer interface {
	Seal(plaintext, aad string) (sealed []byte, keyID string, err error)
	Open(sealed []byte, keyID, aad string) (string, error)
}

// Store is the people of every organization.
type Store struct {
	DB     *sqlx.DB
	Now    func() time.Time
	Vault  Sealer
	Hasher *Hasher
	// RecoveryKeys key the recovery codes' HMAC: derived from each pepper,
	// the first (the current pepper's) for new codes.
	RecoveryKeys [][]byte
	// PublicURL is the base of the links in messages.
	PublicURL string
	// DeviceKey signs device tokens (device.go); derived from the pepper,
	// so every instance of a deployment shares it. Empty: no device tokens.
	DeviceKey []byte
}

// Person is someone who may sign in.
type Person struct {
	ID        uuid.UUID `db:"id"`
	Email     string    `db:"email"`
	Name      string    `db:"name"`
	TwoFactor bool      `db:"two_factor"`
}

// Membership is a person's place in an organization.
type Membership struct {
	ID               uuid.UUID      `db:"id"`
	OrganizationID   uuid.UUID      `db:"organization_id"`
	OrganizationName string         `db:"-"` // directory's, see withOrganizations
	Kind             string         `db:"-"`
	PersonID         uuid.UUID      `db:"person_id"`
	PersonName       string         `db:"person_name"`
	Email            string         `db:"email"`
	Role             string         `db:"role"`
	Permissions      pq.StringArray `db:"permissions"`
	CreatedAt        time.Time      `db:"created_at"`
	AcceptedAt       *time.Time     `db:"accepted_at"`
	TwoFactor        bool           `db:"two_factor"`
	// TwoFactorRequired: the organization requires a second factor.
	TwoFactorRequired bool `db:"two_factor_required"`
}

// Can says whether the membership holds permission.
func (m Membership) Can(permission string) bool { return slices.Contains(m.Permissions, permission) }

// Manages says whether the membership may manage keys and members.
func (m Membership) Manages() bool { return m.Role == Owner || m.Role == Admin }

const membershipColumns = `m.id, m.organization_id, m.person_id,
	p.name AS person_name, p.email, m.role, m.permissions, m.created_at, m.accepted_at,
	p.totp_secret IS NOT NULL AS two_factor,
	EXISTS (SELECT 1 FROM two_factor_required r WHERE r.organization_id = m.organization_id) AS two_factor_required`

const membershipFrom = ` FROM memberships m JOIN people p ON p.id = m.person_id`

// withOrganization fills in m's organization name and kind, read from
// directory in q (one more lookup by primary key).
func withOrganization(ctx context.Context, q sqlx.QueryerContext, m *Membership) error {
	o, err := directory.OrganizationByID(ctx, q, m.OrganizationID)
	if err != nil {
		return fmt.Errorf("people: unable to read membership: %w", err)
	}
	m.OrganizationName, m.Kind = o.Name, o.Kind
	return nil
}

// withOrganizations fills in the memberships' organization names and kinds,
// read from directory in q in one statement.
func withOrganizations(ctx context.Context, q sqlx.QueryerContext, ms []Membership) error {
	ids := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		ids[i] = m.OrganizationID
	}
	orgs, err := directory.OrganizationsByID(ctx, q, ids)
	if err != nil {
		return fmt.Errorf("people: unable to read memberships: %w", err)
	}
	for i := range ms {
		o := orgs[ms[i].OrganizationID]
		ms[i].OrganizationName, ms[i].Kind = o.Name, o.Kind
	}
	return nil
}

// Actor is who makes a change: a member in the portal, or an operator at
// the command line (Membership nil).
type Actor struct {
	Membership *Membership
	Address    string
}

func (a Actor) name() string {
	if a.Membership == nil {
		return "operator (command line)"
	}
	return a.Membership.PersonName + " <" + a.Membership.Email + ">"
}

func (a Actor) person() *uuid.UUID {
	if a.Membership == nil {
		return nil
	}
	return &a.Membership.PersonID
}

// newToken is a random link or session token (256 bits) and its digest,
// which is what is stored.
func newToken() (string, []byte) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("people: crypto/rand failed: %v", err))
	}
	t := base64.RawURLEncoding.EncodeToString(b)
	return t, digest(t)
}

func digest(token string) []byte {
	d := sha256.Sum256([]byte(token))
	return d[:]
}

// normalEmail is an email as people are found by it.
func normalEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

var errNotFound = rule.New(rule.NotFound, "", "Not found", "There is no such member in this organization.")

// membership reads a current membership of org.
func membership(ctx context.Context, q sqlx.QueryerContext, org, id uuid.UUID, lock bool) (Membership, error) {
	var m Membership
	query := `SELECT ` + membershipColumns + membershipFrom + ` WHERE m.organization_id = $1 AND m.id = $2 AND m.removed_at IS NULL`
	if lock {
		query += ` FOR UPDATE OF m`
	}
	err := sqlx.GetContext(ctx, q, &m, query, org, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Membership{}, errNotFound
	}
	if err != nil {
		return Membership{}, fmt.Errorf("people: unable to read membership: %w", err)
	}
	return m, withOrganization(ctx, q, &m)
}

// Membership reads a current, accepted membership by id (a session's).
func (s *Store) Membership(ctx context.Context, id uuid.UUID) (Membership, error) {
	var m Membership
	err := s.DB.GetContext(ctx, &m, `SELECT `+membershipColumns+membershipFrom+`
		WHERE m.id = $1 AND m.removed_at IS NULL AND m.accepted_at IS NOT NULL`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Membership{}, errNotFound
	}
	if err != nil {
		return Membership{}, fmt.Errorf("people: unable to read membership: %w", err)
	}
	return m, withOrganization(ctx, s.DB, &m)
}

// Memberships are a person's current, accepted memberships, by
// organization name.
func (s *Store) Memberships(ctx context.Context, person uuid.UUID) ([]Membership, error) {
	ms := []Membership{}
	err := s.DB.SelectContext(ctx, &ms, `SELECT `+membershipColumns+membershipFrom+`
		WHERE m.person_id = $1 AND m.removed_at IS NULL AND m.accepted_at IS NOT NULL ORDER BY m.id`, person)
	if err != nil {
		return nil, fmt.Errorf("people: unable to list memberships: %w", err)
	}
	if err := withOrganizations(ctx, s.DB, ms); err != nil {
		return nil, err
	}
	// By organization name, compared byte by byte (PostgreSQL's C
	// collation), then by id (the order read).
	slices.SortStableFunc(ms, func(a, b Membership) int { return strings.Compare(a.OrganizationName, b.OrganizationName) })
	return ms, nil
}

// Members are an organization's current memberships (invited ones too), by name.
func (s *Store) Members(ctx context.Context, org uuid.UUID) ([]Membership, error) {
	ms := []Membership{}
	err := s.DB.SelectContext(ctx, &ms, `SELECT `+membershipColumns+membershipFrom+`
		WHERE m.organization_id = $1 AND m.removed_at IS NULL ORDER BY lower(p.name), lower(p.email), m.id`, org)
	if err != nil {
		return nil, fmt.Errorf("people: unable to list members: %w", err)
	}
	return ms, withOrganizations(ctx, s.DB, ms)
}

// Owner is an organization's first current Owner: who the command line
// acts as when it makes keys.
func (s *Store) Owner(ctx context.Context, org uuid.UUID) (Membership, error) {
	var m Membership
	err := s.DB.GetContext(ctx, &m, `SELECT `+membershipColumns+membershipFrom+`
		WHERE m.organization_id = $1 AND m.role = 'Owner' AND m.removed_at IS NULL ORDER BY m.created_at, m.id LIMIT 1`, org)
	if errors.Is(err, sql.ErrNoRows) {
		return Membership{}, rule.Newf(rule.Unprocessable, "", "No Owner", "Organization %s was not found or has no Owner.", org)
	}
	if err != nil {
		return Membership{}, fmt.Errorf("people: unable to find the Owner: %w", err)
	}
	return m, withOrganization(ctx, s.DB, &m)
}

// checkGrant refuses a role and permissions the actor may not give in an
// organization of kind: Admins make no Owners, nobody gives a permission
// the organization's kind is not offered, and a member gives only
// permissions it holds.
func checkGrant(actor Actor, kind, role string, permissions []string) error {
	if !slices.Contains(Roles, role) {
		return rule.InvalidField("role", "Choose Owner, Admin or Member.")
	}
	offered := auth.PermissionsFor(kind)
	for _, p := range permissions {
		if !slices.Contains(offered, p) {
			return rule.InvalidField("permissions", fmt.Sprintf("%q is not a permission of %s organizations.", p, kind))
		}
	}
	m := actor.Membership
	if m == nil {
		return nil
	}
	if !m.Manages() {
		return &rule.Error{Kind: rule.Forbidden, Title: "Permission required", Message: "Only Owners and Admins manage members."}
	}
	if role == Owner && m.Role != Owner {
		return &rule.Error{Kind: rule.Forbidden, Field: "role", Title: "Permission required", Message: "Only Owners make Owners."}
	}
	for _, p := range permissions {
		if !m.Can(p) {
			return &rule.Error{Kind: rule.Forbidden, Field: "permissions", Title: "Permission required", Permission: p,
				Message: fmt.Sprintf("You do not hold %s, so you cannot give it.", p)}
		}
	}
	return nil
}

// orgKind is the kind and name of the organization org (directory's).
func orgKind(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID) (string, string, error) {
	o, err := directory.OrganizationByID(ctx, q, org)
	if errors.Is(err, directory.ErrNoOrganization) {
		return "", "", rule.Newf(rule.Unprocessable, "", "No such organization", "Organization %s does not exist.", org)
	}
	if err != nil {
		return "", "", fmt.Errorf("people: unable to read organization: %w", err)
	}
	return o.Kind, o.Name, nil
}

// sorted is a set of permissions in order, never nil (the column is NOT NULL).
func sorted(permissions []string) []string {
	return append([]string{}, slices.Compact(slices.Sorted(slices.Values(permissions)))...)
}

// KeyCreator reads the current membership id as an API key's creator
// (auth.Members).
func (s *Store) KeyCreator(ctx context.Context, id uuid.UUID) (auth.Creator, error) {
	var m struct {
		Org         uuid.UUID      `db:"organization_id"`
		Role        string         `db:"role"`
		Permissions pq.StringArray `db:"permissions"`
	}
	err := s.DB.GetContext(ctx, &m, `SELECT organization_id, role, permissions FROM memberships WHERE id = $1 AND removed_at IS NULL`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return auth.Creator{}, auth.ErrNoCreator
	}
	if err != nil {
		return auth.Creator{}, fmt.Errorf("people: unable to read membership: %w", err)
	}
	kind, _, err := orgKind(ctx, s.DB, m.Org)
	if err != nil {
		return auth.Creator{}, err
	}
	return auth.Creator{Organization: m.Org, Kind: kind, Role: m.Role, Permissions: m.Permissions}, nil
}

// CreatorNames names the memberships ids as a key list shows its creators
// (auth.Members): the person's name, or email when it has none, and
// "former member" once the membership is removed.
func (s *Store) CreatorNames(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	var rows []struct {
		ID   uuid.UUID `db:"id"`
		Name string    `db:"name"`
	}
	err := s.DB.SelectContext(ctx, &rows, `SELECT m.id,
			CASE WHEN m.removed_at IS NULL THEN coalesce(nullif(p.name, ''), p.email) ELSE 'former member' END AS name
		FROM memberships m JOIN people p ON p.id = m.person_id WHERE m.id = ANY($1)`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("people: unable to name members: %w", err)
	}
	names := make(map[uuid.UUID]string, len(rows))
	for _, r := range rows {
		names[r.ID] = r.Name
	}
	return names, nil
}
