package people

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/mailaddr"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Invitation is a membership just made and the link that accepts it
// (shown to the operator; sent to the person by email).
type Invitation struct {
	MembershipID   uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organizationId"`
	Name           string    `json:"name"`
	Email          string    `json:"email"`
	Role           string    `json:"role"`
	Permissions    []string  `json:"permissions"`
	InvitationURL  string    `json:"invitationUrl"`
}

// NewMember is who an invitation is for. Permissions nil means every
// permission offered to the organization's kind (the command line's
// default); Name may be empty (asked when the invitation is accepted).
type NewMember struct {
	Name, Email, Role string
	Permissions       []string
}

// Invite makes a membership of org and emails its invitation link
// (72 hours, one use), in one transaction; at most MaxInvitations a day.
func (s *Store) Invite(ctx context.Context, actor Actor, org uuid.UUID, n NewMember) (Invitation, error) {
	n.Email, n.Name = strings.TrimSpace(n.Email), strings.TrimSpace(n.Name)
	fields := map[string][]string{}
	if !mailaddr.Valid(n.Email) {
		fields["email"] = []string{"Enter an email address, such as name@example.com."}
	}
	if len(n.Name) > 200 {
		fields["name"] = []string{"Use at most 200 characters."}
	}
	if err := rule.InvalidFields(fields); err != nil {
		return Invitation{}, err
	}
	var inv Invitation
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		kind, orgName, err := orgKind(ctx, tx, org)
		if err != nil {
			return err
		}
		if n.Permissions == nil && actor.Membership == nil {
			n.Permissions = auth.PermissionsFor(kind)
		}
		n.Permissions = sorted(n.Permissions)
		if err := checkGrant(actor, kind, n.Role, n.Permissions); err != nil {
			return err
		}
		if err := invitationAllowed(ctx, tx, org, s.Now()); err != nil {
			return err
		}
		var person uuid.UUID
		err = tx.GetContext(ctx, &person, `SELECT id FROM people WHERE lower(email) = lower($1) FOR UPDATE`, n.Email)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			person = uuid.Must(uuid.NewV7())
			// ON CONFLICT: another invitation of the same email at once.
			if _, err := tx.ExecContext(ctx, `INSERT INTO people (id, email, name, created_at) VALUES ($1, $2, $3, $4)`,
				person, n.Email, n.Name, s.Now()); err != nil {
				return fmt.Errorf("people: unable to add person: %w", err)
			}
		case err != nil:
			return fmt.Errorf("people: unable to find person: %w", err)
		}
		id := uuid.Must(uuid.NewV7())
		_, err = tx.ExecContext(ctx, `INSERT INTO memberships (id, organization_id, person_id, role, permissions, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, id, org, person, n.Role, pq.StringArray(n.Permissions), s.Now())
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "23505" {
			return rule.New(rule.Conflict, "email", "Already a member", "This email is a member of the organization already, or invited.")
		}
		if err != nil {
			return fmt.Errorf("people: unable to add membership: %w", err)
		}
		token, d := newToken()
		if _, err := tx.ExecContext(ctx, `INSERT INTO invitations (digest, membership_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
			d, id, s.Now(), s.Now().Add(InvitationLife)); err != nil {
			return fmt.Errorf("people: unable to add invitation: %w", err)
		}
		inv = Invitation{MembershipID: id, OrganizationID: org, Name: n.Name, Email: n.Email, Role: n.Role,
			Permissions: n.Permissions, InvitationURL: s.PublicURL + "/portal/invitations/" + token}
		by := "payreq's operator"
		if actor.Membership != nil {
			by = actor.Membership.PersonName
		}
		if err := delivery.EnqueueNotice(ctx, tx, s.Vault, &org, delivery.Notice{To: n.Email,
			Subject: "You are invited to " + orgName + " on payreq",
			Text: "Hello,\n\n" + by + " invites you to join " + orgName + " on payreq as " + article(n.Role) + " " + n.Role + ".\n\n" +
				"Accept the invitation here (the link works once, for 72 hours):\n" + inv.InvitationURL + "\n\n" +
				"If you did not expect this, ignore this email.\n"}, s.Now()); err != nil {
			return err
		}
		return s.record(ctx, tx, &org, actor.person(), actor.name(), ActionInvited,
			fmt.Sprintf("%s invited as %s (%s)", n.Email, n.Role, strings.Join(n.Permissions, ", ")), actor.Address)
	})
	return inv, err
}

func article(role string) string {
	if role == Admin || role == Owner {
		return "an"
	}
	return "a"
}

// Invited is an invitation as its page shows it.
type Invited struct {
	OrganizationName string
	// PersonID is whom it is for: a person signed in as someone else is
	// told so.
	PersonID uuid.UUID
	Email    string
	Name     string
	// HasPassword: the person signs in (the ordinary sign-in, both steps)
	// and then accepts (AcceptSignedIn); otherwise they choose a name and
	// a password (Accept).
	HasPassword bool
}

var errLinkGone = rule.New(rule.NotFound, "", "Link not valid", "This link was used already, or it has expired.")

// Invitation reads the invitation of token, unused and unexpired.
func (s *Store) Invitation(ctx context.Context, token string) (Invited, error) {
	var in struct {
		Org      uuid.UUID `db:"organization_id"`
		Person   uuid.UUID `db:"person_id"`
		Email    string    `db:"email"`
		Name     string    `db:"name"`
		Password *string   `db:"password_hash"`
	}
	err := s.DB.GetContext(ctx, &in, `SELECT m.organization_id, p.id AS person_id, p.email, p.name, p.password_hash
		FROM invitations i JOIN memberships m ON m.id = i.membership_id JOIN people p ON p.id = m.person_id
		WHERE i.digest = $1 AND i.used_at IS NULL AND i.expires_at > $2 AND m.removed_at IS NULL`, digest(token), s.Now())
	if errors.Is(err, sql.ErrNoRows) {
		return Invited{}, errLinkGone
	}
	if err != nil {
		return Invited{}, fmt.Errorf("people: unable to read invitation: %w", err)
	}
	_, org, err := orgKind(ctx, s.DB, in.Org)
	if err != nil {
		return Invited{}, err
	}
	return Invited{OrganizationName: org, PersonID: in.Person, Email: in.Email, Name: in.Name, HasPassword: in.Password != nil}, nil
}

// pendingInvitation is an invitation being accepted.
type pendingInvitation struct {
	Membership uuid.UUID `db:"membership_id"`
	Org        uuid.UUID `db:"organization_id"`
	Person     uuid.UUID `db:"person_id"`
	Email      string    `db:"email"`
	Hash       *string   `db:"password_hash"`
	TwoFactor  bool      `db:"two_factor"`
}

// pending reads the unused, unexpired invitation of token; lock takes
// it for the transaction q.
func (s *Store) pending(ctx context.Context, q sqlx.QueryerContext, token string, lock bool) (pendingInvitation, error) {
	var p pendingInvitation
	query := `SELECT m.id AS membership_id, m.organization_id, p.id AS person_id, p.email,
			p.password_hash, p.totp_secret IS NOT NULL AS two_factor
		FROM invitations i JOIN memberships m ON m.id = i.membership_id JOIN people p ON p.id = m.person_id
		WHERE i.digest = $1 AND i.used_at IS NULL AND i.expires_at > $2 AND m.removed_at IS NULL`
	if lock {
		query += ` FOR UPDATE OF i, m, p`
	}
	err := sqlx.GetContext(ctx, q, &p, query, digest(token), s.Now())
	if errors.Is(err, sql.ErrNoRows) {
		return p, errLinkGone
	}
	if err != nil {
		return p, fmt.Errorf("people: unable to read invitation: %w", err)
	}
	return p, nil
}

// errSignInToAccept: the invitation is for a person who has a sign-in;
// they sign in (the ordinary sign-in, with its limits) to accept.
var errSignInToAccept = rule.New(rule.Forbidden, "", "Sign in to accept", "This email has a payreq sign-in: sign in first, then accept the invitation.")

// Accept takes an invitation of a person without a sign-in: they give a
// name and a new password. It answers a new session in the invitation's
// organization. A person with a sign-in signs in and uses AcceptSignedIn:
// no password is checked here.
func (s *Store) Accept(ctx context.Context, token, name, password, address string) (Session, error) {
	if err := s.spend(ctx, address); err != nil { // the hashing budget (signin.go)
		return Session{}, err
	}
	in, err := s.pending(ctx, s.DB, token, false)
	if err != nil {
		return Session{}, err
	}
	if in.Hash != nil {
		return Session{}, errSignInToAccept
	}
	name = strings.TrimSpace(name)
	fields := map[string][]string{}
	if name == "" || len(name) > 200 {
		fields["name"] = []string{"Enter your name (at most 200 characters)."}
	}
	if err := CheckPassword("password", in.Email, name, password); err != nil {
		fields["password"] = err.Fields["password"]
	}
	if err := rule.InvalidFields(fields); err != nil {
		return Session{}, err
	}
	// Hashed before the transaction: no transaction waits for a hashing slot.
	hash, err := s.Hasher.Hash(password)
	if err != nil {
		return Session{}, err
	}
	var sess Session
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		in, err := s.pending(ctx, tx, token, true)
		if err != nil {
			return err
		}
		if in.Hash != nil { // a password chosen meanwhile, through another invitation
			return errSignInToAccept
		}
		if _, err := tx.ExecContext(ctx, `UPDATE people SET name = $2, password_hash = $3 WHERE id = $1`, in.Person, name, hash); err != nil {
			return err
		}
		if err := s.take(ctx, tx, token, in, address); err != nil {
			return err
		}
		sess, err = s.newSession(ctx, tx, in.Person, &in.Membership, in.TwoFactor)
		return err
	})
	return sess, err
}

// AcceptSignedIn takes an invitation for the person signed in with the
// session of sessionToken (both steps passed): their session is replaced
// by one in the invitation's organization. An invitation for someone
// else is refused (403), and nothing changes.
func (s *Store) AcceptSignedIn(ctx context.Context, token, sessionToken, address string) (Session, error) {
	sess, err := s.Session(ctx, sessionToken)
	if err != nil {
		return Session{}, err
	}
	if sess.AwaitingSecondFactor {
		return Session{}, ErrNoSession
	}
	var next Session
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		in, err := s.pending(ctx, tx, token, true)
		if err != nil {
			return err
		}
		if in.Person != sess.Person.ID {
			return rule.Newf(rule.Forbidden, "", "Another person's invitation",
				"This invitation is for %s, and you are signed in as %s. Sign out, then open the invitation's link again and sign in as %s.",
				in.Email, sess.Person.Email, in.Email)
		}
		if err := s.take(ctx, tx, token, in, address); err != nil {
			return err
		}
		next, err = s.replaceSession(ctx, tx, sessionToken, in.Person, in.Membership)
		return err
	})
	return next, err
}

// take marks the invitation of token used and its membership accepted.
func (s *Store) take(ctx context.Context, tx *sqlx.Tx, token string, in pendingInvitation, address string) error {
	now := s.Now()
	if _, err := tx.ExecContext(ctx, `UPDATE invitations SET used_at = $2 WHERE digest = $1`, digest(token), now); err != nil {
		return fmt.Errorf("people: unable to use invitation: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE memberships SET accepted_at = $2 WHERE id = $1`, in.Membership, now); err != nil {
		return fmt.Errorf("people: unable to accept membership: %w", err)
	}
	return s.record(ctx, tx, &in.Org, &in.Person, in.Email, ActionInvitationTaken, "", address)
}

// ChangeMember sets a member's role and permissions.
func (s *Store) ChangeMember(ctx context.Context, actor Actor, org, id uuid.UUID, role string, permissions []string) error {
	permissions = sorted(permissions)
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		m, err := membership(ctx, tx, org, id, true)
		if err != nil {
			return err
		}
		if err := checkGrant(actor, m.Kind, role, permissions); err != nil {
			return err
		}
		if actor.Membership != nil && actor.Membership.Role != Owner && m.Role == Owner {
			return &rule.Error{Kind: rule.Forbidden, Title: "Permission required", Message: "Only Owners change Owners."}
		}
		if m.Role == Owner && role != Owner {
			if err := keepAnOwner(ctx, tx, org, id); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE memberships SET role = $2, permissions = $3 WHERE id = $1`,
			id, role, pq.StringArray(permissions)); err != nil {
			return fmt.Errorf("people: unable to change membership: %w", err)
		}
		return s.record(ctx, tx, &org, actor.person(), actor.name(), ActionMemberChanged,
			fmt.Sprintf("%s: %s (%s) → %s (%s)", m.Email, m.Role, strings.Join(m.Permissions, ", "), role, strings.Join(permissions, ", ")), actor.Address)
	})
}

// keepAnOwner refuses a change that would leave org without a current
// Owner other than membership id. Owners are locked, so that two changes
// at once cannot each leave the other as the last.
func keepAnOwner(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID) error {
	var others []uuid.UUID
	if err := tx.SelectContext(ctx, &others, `SELECT id FROM memberships
		WHERE organization_id = $1 AND role = 'Owner' AND removed_at IS NULL AND accepted_at IS NOT NULL AND id <> $2
		FOR UPDATE`, org, id); err != nil {
		return fmt.Errorf("people: unable to count Owners: %w", err)
	}
	if len(others) == 0 {
		return rule.New(rule.Conflict, "", "The last Owner stays", "An organization always keeps at least one Owner: make another member an Owner first.")
	}
	return nil
}

// RemoveMember ends a membership: its sessions end, the API keys it made
// keep working (they belong to the organization).
func (s *Store) RemoveMember(ctx context.Context, actor Actor, org, id uuid.UUID) error {
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		m, err := membership(ctx, tx, org, id, true)
		if err != nil {
			return err
		}
		if a := actor.Membership; a != nil && (!a.Manages() || (m.Role == Owner && a.Role != Owner)) {
			return &rule.Error{Kind: rule.Forbidden, Title: "Permission required", Message: "Only Owners remove Owners; only Owners and Admins remove members."}
		}
		if m.Role == Owner {
			if err := keepAnOwner(ctx, tx, org, id); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE memberships SET removed_at = $2 WHERE id = $1`, id, s.Now()); err != nil {
			return fmt.Errorf("people: unable to remove membership: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE membership_id = $1`, id); err != nil {
			return fmt.Errorf("people: unable to end sessions: %w", err)
		}
		return s.record(ctx, tx, &org, actor.person(), actor.name(), ActionMemberRemoved, m.Email+" ("+m.Role+")", actor.Address)
	})
}

// RemoveByEmail is RemoveMember for the command line, by the member's email.
func (s *Store) RemoveByEmail(ctx context.Context, actor Actor, org uuid.UUID, email string) error {
	var id uuid.UUID
	err := s.DB.GetContext(ctx, &id, `SELECT m.id FROM memberships m JOIN people p ON p.id = m.person_id
		WHERE m.organization_id = $1 AND lower(p.email) = lower($2) AND m.removed_at IS NULL`, org, strings.TrimSpace(email))
	if errors.Is(err, sql.ErrNoRows) {
		return rule.Newf(rule.NotFound, "email", "Not a member", "%s is not a member of organization %s.", email, org)
	}
	if err != nil {
		return fmt.Errorf("people: unable to find member: %w", err)
	}
	return s.RemoveMember(ctx, actor, org, id)
}

// SetTwoFactorRequired is the Owner's switch: when on, every member must
// set up a second factor before anything else.
func (s *Store) SetTwoFactorRequired(ctx context.Context, actor Actor, org uuid.UUID, on bool) error {
	if a := actor.Membership; a != nil && a.Role != Owner {
		return &rule.Error{Kind: rule.Forbidden, Title: "Permission required", Message: "Only Owners set the organization's two-factor rule."}
	}
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		if on {
			_, err = tx.ExecContext(ctx, `INSERT INTO two_factor_required (organization_id, since) VALUES ($1, $2) ON CONFLICT DO NOTHING`, org, s.Now())
		} else {
			_, err = tx.ExecContext(ctx, `DELETE FROM two_factor_required WHERE organization_id = $1`, org)
		}
		if err != nil {
			return fmt.Errorf("people: unable to set the two-factor rule: %w", err)
		}
		detail := "two-factor not required"
		if on {
			detail = "two-factor required of every member"
		}
		return s.record(ctx, tx, &org, actor.person(), actor.name(), ActionTwoFactorRequired, detail, actor.Address)
	})
}

// AddMember makes a person with a password and an accepted membership of
// org at once, with no invitation: for the demo and tests, whose people
// sign in right away. The password must pass CheckPassword.
func (s *Store) AddMember(ctx context.Context, org uuid.UUID, name, email, role string, permissions []string, password string) (uuid.UUID, error) {
	if err := CheckPassword("password", email, name, password); err != nil {
		return uuid.Nil, err
	}
	hash, err := s.Hasher.Hash(password)
	if err != nil {
		return uuid.Nil, err
	}
	id := uuid.Must(uuid.NewV7())
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		kind, _, err := orgKind(ctx, tx, org)
		if err != nil {
			return err
		}
		if err := checkGrant(Actor{}, kind, role, permissions); err != nil {
			return err
		}
		var person uuid.UUID
		err = tx.GetContext(ctx, &person, `INSERT INTO people (id, email, name, password_hash, created_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (lower(email)) DO UPDATE SET name = excluded.name RETURNING id`, uuid.Must(uuid.NewV7()), email, name, hash, s.Now())
		if err != nil {
			return fmt.Errorf("people: unable to add person: %w", err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO memberships (id, organization_id, person_id, role, permissions, created_at, accepted_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6)`, id, org, person, role, pq.StringArray(sorted(permissions)), s.Now())
		if err != nil {
			return fmt.Errorf("people: unable to add membership: %w", err)
		}
		return nil
	})
	return id, err
}
