package people

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Session is a signed-in person. Token is the cookie's value, set only
// when the session is new; the database keeps its SHA-256 alone.
type Session struct {
	Token  string
	Person Person
	// Membership is the organization chosen, nil until one is.
	Membership *Membership
	// AwaitingSecondFactor: the password was right; the second step waits.
	AwaitingSecondFactor bool
	CreatedAt            time.Time
	// Device is a new device token for the browser's cookie (device.go),
	// set when a sign-in has just passed both steps.
	Device string
	// ConfirmedAt is when the person last confirmed it's them (zero:
	// never): a sign-in that passed every step, or Confirm. See Confirmed.
	ConfirmedAt time.Time
}

// ErrNoSession: no session has this token, or it has ended (signed out,
// idle 30 minutes, 12 hours old, or ended by a password change).
var ErrNoSession = errors.New("people: no session")

// newSession starts a session. One not awaiting the second factor has
// passed every step of signing in, which opens the confirmation window.
func (s *Store) newSession(ctx context.Context, tx *sqlx.Tx, person uuid.UUID, membership *uuid.UUID, awaiting bool) (Session, error) {
	token, d := newToken()
	now := s.Now()
	var confirmed *time.Time
	if !awaiting {
		confirmed = &now
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (digest, person_id, membership_id, awaiting_second_factor, created_at, last_seen_at, confirmed_at)
		VALUES ($1, $2, $3, $4, $5, $5, $6)`, d, person, membership, awaiting, now, confirmed); err != nil {
		return Session{}, fmt.Errorf("people: unable to start session: %w", err)
	}
	sess := Session{Token: token, AwaitingSecondFactor: awaiting, CreatedAt: now}
	if confirmed != nil {
		sess.ConfirmedAt = now
	}
	if membership != nil {
		sess.Membership = &Membership{ID: *membership} // the rest is read with the session
	}
	return sess, nil
}

// Session reads the session of token, and marks it seen. A session idle
// for SessionIdle or older than SessionLifetime has ended, as has one
// whose membership was removed.
func (s *Store) Session(ctx context.Context, token string) (Session, error) {
	if token == "" {
		return Session{}, ErrNoSession
	}
	// One statement reads the session, its person and its membership
	// (as Membership reads it: current and accepted), which a portal page
	// needs before anything else.
	var (
		row struct {
			Person     uuid.UUID
			Membership *uuid.UUID
			Awaiting   bool
			CreatedAt  time.Time
			LastSeen   time.Time
			Confirmed  *time.Time
			Email      string
			Name       string
			TwoFactor  bool
		}
		m struct {
			ID, OrganizationID, PersonID uuid.NullUUID
			Name, Email                  sql.NullString
			Role                         sql.NullString
			Permissions                  pq.StringArray
			CreatedAt                    sql.NullTime
			AcceptedAt                   *time.Time
			TwoFactor, TwoFactorRequired sql.NullBool
		}
	)
	d := digest(token)
	err := s.DB.QueryRowContext(ctx, `SELECT s.person_id, s.membership_id, s.awaiting_second_factor, s.created_at, s.last_seen_at, s.confirmed_at,
			sp.email, sp.name, sp.totp_secret IS NOT NULL AS two_factor, `+membershipColumns+`
		FROM sessions s JOIN people sp ON sp.id = s.person_id
		LEFT JOIN (memberships m JOIN people p ON p.id = m.person_id)
			ON m.id = s.membership_id AND m.removed_at IS NULL AND m.accepted_at IS NOT NULL
		WHERE s.digest = $1`, d).Scan(&row.Person, &row.Membership, &row.Awaiting, &row.CreatedAt, &row.LastSeen, &row.Confirmed,
		&row.Email, &row.Name, &row.TwoFactor,
		&m.ID, &m.OrganizationID, &m.PersonID, &m.Name, &m.Email, &m.Role, &m.Permissions,
		&m.CreatedAt, &m.AcceptedAt, &m.TwoFactor, &m.TwoFactorRequired)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("people: unable to read session: %w", err)
	}
	now := s.Now()
	if now.Sub(row.LastSeen) >= SessionIdle || now.Sub(row.CreatedAt) >= SessionLifetime {
		if _, err := s.DB.ExecContext(ctx, `DELETE FROM sessions WHERE digest = $1`, d); err != nil {
			return Session{}, fmt.Errorf("people: unable to end session: %w", err)
		}
		return Session{}, ErrNoSession
	}
	sess := Session{Person: Person{ID: row.Person, Email: row.Email, Name: row.Name, TwoFactor: row.TwoFactor},
		AwaitingSecondFactor: row.Awaiting, CreatedAt: row.CreatedAt}
	if row.Confirmed != nil {
		sess.ConfirmedAt = *row.Confirmed
	}
	if row.Membership != nil {
		if !m.ID.Valid { // removed, or not (yet) accepted
			return Session{}, ErrNoSession
		}
		sess.Membership = &Membership{ID: m.ID.UUID, OrganizationID: m.OrganizationID.UUID, PersonID: m.PersonID.UUID,
			PersonName: m.Name.String, Email: m.Email.String, Role: m.Role.String, Permissions: m.Permissions,
			CreatedAt: m.CreatedAt.Time, AcceptedAt: m.AcceptedAt, TwoFactor: m.TwoFactor.Bool,
			TwoFactorRequired: m.TwoFactorRequired.Bool}
		if err := withOrganization(ctx, s.DB, sess.Membership); err != nil {
			return Session{}, err
		}
	}
	// Seen: written at most once a minute, so that reading pages costs no
	// write each.
	if now.Sub(row.LastSeen) >= time.Minute {
		if _, err := s.DB.ExecContext(ctx, `UPDATE sessions SET last_seen_at = $2 WHERE digest = $1`, d, now); err != nil {
			return Session{}, fmt.Errorf("people: unable to mark session seen: %w", err)
		}
	}
	return sess, nil
}

// SignOut ends the session of token in the database.
func (s *Store) SignOut(ctx context.Context, token, address string) error {
	var row struct {
		Person     uuid.UUID  `db:"person_id"`
		Membership *uuid.UUID `db:"membership_id"`
	}
	err := s.DB.GetContext(ctx, &row, `DELETE FROM sessions WHERE digest = $1 RETURNING person_id, membership_id`, digest(token))
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("people: unable to end session: %w", err)
	}
	if row.Membership != nil {
		if m, err := s.Membership(ctx, *row.Membership); err == nil {
			a := Actor{Membership: &m, Address: address}
			return s.record(ctx, s.DB, &m.OrganizationID, a.person(), a.name(), ActionSignedOut, "", address)
		}
	}
	return nil
}

// Switch starts a new session in another of the person's organizations
// (org), ending the one of token.
func (s *Store) Switch(ctx context.Context, token string, org uuid.UUID) (Session, error) {
	var sess Session
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var person uuid.UUID
		err := tx.GetContext(ctx, &person, `SELECT person_id FROM sessions WHERE digest = $1 AND NOT awaiting_second_factor FOR UPDATE`, digest(token))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNoSession
		}
		if err != nil {
			return err
		}
		var membership uuid.UUID
		err = tx.GetContext(ctx, &membership, `SELECT id FROM memberships
			WHERE organization_id = $1 AND person_id = $2 AND removed_at IS NULL AND accepted_at IS NOT NULL`, org, person)
		if errors.Is(err, sql.ErrNoRows) {
			return rule.New(rule.NotFound, "", "Not found", "You are not a member of this organization.")
		}
		if err != nil {
			return err
		}
		sess, err = s.replaceSession(ctx, tx, token, person, membership)
		return err
	})
	return sess, err
}

// replaceSession ends the session of token and starts one of person in
// membership in its place, keeping when the person last confirmed it's
// them: a new token never opens the confirmation window by itself.
func (s *Store) replaceSession(ctx context.Context, tx *sqlx.Tx, token string, person, membership uuid.UUID) (Session, error) {
	var confirmed *time.Time
	if err := tx.GetContext(ctx, &confirmed, `DELETE FROM sessions WHERE digest = $1 RETURNING confirmed_at`, digest(token)); err != nil {
		return Session{}, fmt.Errorf("people: unable to end session: %w", err)
	}
	sess, err := s.newSession(ctx, tx, person, &membership, false)
	if err != nil {
		return Session{}, err
	}
	sess.ConfirmedAt = time.Time{}
	if confirmed != nil {
		sess.ConfirmedAt = *confirmed
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET confirmed_at = $2 WHERE digest = $1`, digest(sess.Token), confirmed); err != nil {
		return Session{}, fmt.Errorf("people: unable to start session: %w", err)
	}
	return sess, nil
}
