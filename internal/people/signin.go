package people

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// The sign-in limits: 5 failures of one email in 15 minutes lock its
// sign-ins for 15 minutes; 20 failures from one address (an IPv6
// address's /64) in 10 minutes refuse that address's until they age out.
const (
	EmailFailures      = 5
	EmailWindow        = 15 * time.Minute
	LockFor            = 15 * time.Minute
	AddressFailures    = 20
	AddressWindow      = 10 * time.Minute
	wrongCredentialMsg = "The email or the password is not right."
)

// ErrWrongCredentials is the one answer to a wrong email or password.
var ErrWrongCredentials = rule.New(rule.Invalid, "", "Sign-in failed", wrongCredentialMsg)

func limited(wait time.Duration, why string) *rule.Error {
	wait = max(wait.Round(time.Second), time.Second)
	minutes := int(math.Ceil(wait.Minutes()))
	return &rule.Error{Kind: rule.Limited, Title: "Too many sign-in attempts", RetryAfter: wait,
		Message: fmt.Sprintf("%s Try again in %d minute%s, or reset your password.", why, minutes, map[bool]string{true: "", false: "s"}[minutes == 1])}
}

// checkLimits refuses a sign-in of email from address while either is
// over its limit.
func (s *Store) checkLimits(ctx context.Context, email, address string) error {
	now := s.Now()
	var until *time.Time
	if err := s.DB.GetContext(ctx, &until, `SELECT max(locked_until) FROM sign_in_locks WHERE email = $1 AND locked_until > $2`, email, now); err != nil {
		return fmt.Errorf("people: unable to read sign-in lock: %w", err)
	}
	if until != nil {
		return limited(until.Sub(now), "Sign-ins of this email are paused after too many failed attempts.")
	}
	var fails struct {
		N      int        `db:"n"`
		Oldest *time.Time `db:"oldest"`
	}
	if err := s.DB.GetContext(ctx, &fails, `SELECT count(*) AS n, min(at) AS oldest FROM
		(SELECT at FROM sign_in_failures WHERE address = $1 AND at > $2 ORDER BY at DESC LIMIT $3) f`,
		address, now.Add(-AddressWindow), AddressFailures); err != nil {
		return fmt.Errorf("people: unable to count sign-in failures: %w", err)
	}
	if fails.N >= AddressFailures {
		return limited(fails.Oldest.Add(AddressWindow).Sub(now), "There have been too many failed sign-ins from your network.")
	}
	return nil
}

// failed records a failed sign-in of email from address, and locks the
// email at its fifth failure in the window (telling the person, if there
// is one, by email).
func (s *Store) failed(ctx context.Context, email, address string, person *uuid.UUID) error {
	now := s.Now()
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sign_in_failures (email, address, at) VALUES ($1, $2, $3)`, email, address, now); err != nil {
			return fmt.Errorf("people: unable to record sign-in failure: %w", err)
		}
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM sign_in_failures WHERE email = $1 AND at > $2`, email, now.Add(-EmailWindow)); err != nil {
			return err
		}
		orgs, err := s.orgsOf(ctx, tx, person)
		if err != nil {
			return err
		}
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, person, email, ActionSignInFailed, "", address); err != nil {
				return err
			}
		}
		if n < EmailFailures {
			return nil
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO sign_in_locks (email, locked_until) VALUES ($1, $2)
			ON CONFLICT (email) DO UPDATE SET locked_until = excluded.locked_until WHERE sign_in_locks.locked_until <= $3`,
			email, now.Add(LockFor), now)
		if err != nil {
			return fmt.Errorf("people: unable to lock sign-ins: %w", err)
		}
		if locked, _ := res.RowsAffected(); locked == 0 || person == nil {
			return nil
		}
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, person, email, ActionSignInLocked, "for 15 minutes", address); err != nil {
				return err
			}
		}
		var to string
		if err := tx.GetContext(ctx, &to, `SELECT email FROM people WHERE id = $1`, *person); err != nil {
			return err
		}
		return delivery.EnqueueNotice(ctx, tx, s.Vault, nil, delivery.Notice{To: to,
			Subject: "Sign-ins to your payreq account are paused",
			Text: "Hello,\n\nThere have been 5 failed attempts to sign in to payreq with this email in the last 15 minutes, " +
				"so sign-ins are paused for 15 minutes.\n\nIf this was you, wait or reset your password (which also lifts the pause):\n" +
				s.PublicURL + "/portal/password-reset\n\nIf it was not you, someone may be guessing your password; a long, unique one keeps you safe.\n"}, now)
	})
}

// orgsOf lists the organizations of a person's current memberships, for
// their audit logs.
func (s *Store) orgsOf(ctx context.Context, q sqlx.QueryerContext, person *uuid.UUID) ([]uuid.UUID, error) {
	if person == nil {
		return nil, nil
	}
	var orgs []uuid.UUID
	err := sqlx.SelectContext(ctx, q, &orgs, `SELECT organization_id FROM memberships
		WHERE person_id = $1 AND removed_at IS NULL AND accepted_at IS NOT NULL`, *person)
	return orgs, err
}

// SignIn checks an email and a password from address (already reduced to
// its /64 for IPv6). A wrong email and a wrong password get one answer
// (ErrWrongCredentials) after the same work. It answers a new session:
// awaiting the second factor when the person has one, else in the
// person's organization when there is exactly one.
func (s *Store) SignIn(ctx context.Context, email, password, address string) (Session, error) {
	key := normalEmail(email)
	if err := s.checkLimits(ctx, key, address); err != nil {
		return Session{}, err
	}
	var p struct {
		ID        uuid.UUID `db:"id"`
		Hash      *string   `db:"password_hash"`
		TwoFactor bool      `db:"two_factor"`
	}
	err := s.DB.GetContext(ctx, &p, `SELECT id, password_hash, totp_secret IS NOT NULL AS two_factor FROM people WHERE lower(email) = $1`, key)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("people: unable to find person: %w", err)
	}
	hash := ""
	if found && p.Hash != nil {
		hash = *p.Hash
	}
	ok, err := s.Hasher.Verify(hash, password)
	if err != nil {
		return Session{}, err
	}
	if !ok {
		var person *uuid.UUID
		if found {
			person = &p.ID
		}
		if err := s.failed(ctx, key, address, person); err != nil {
			return Session{}, err
		}
		return Session{}, ErrWrongCredentials
	}
	var sess Session
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sign_in_failures WHERE email = $1`, key); err != nil {
			return err
		}
		orgs, err := s.orgsOf(ctx, tx, &p.ID)
		if err != nil {
			return err
		}
		var membership *uuid.UUID
		if len(orgs) == 1 && !p.TwoFactor {
			var id uuid.UUID
			if err := tx.GetContext(ctx, &id, `SELECT id FROM memberships WHERE person_id = $1 AND organization_id = $2 AND removed_at IS NULL`, p.ID, orgs[0]); err != nil {
				return err
			}
			membership = &id
		}
		if sess, err = s.newSession(ctx, tx, p.ID, membership, p.TwoFactor); err != nil {
			return err
		}
		detail := "with a password"
		if p.TwoFactor {
			detail = "with a password; second factor asked"
		}
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, &p.ID, key, ActionSignedIn, detail, address); err != nil {
				return err
			}
		}
		return nil
	})
	return sess, err
}

// ChangePassword sets a new password after checking the current one, and
// ends the person's other sessions.
func (s *Store) ChangePassword(ctx context.Context, sess Session, token, current, password, address string) error {
	var hash *string
	if err := s.DB.GetContext(ctx, &hash, `SELECT password_hash FROM people WHERE id = $1`, sess.Person.ID); err != nil {
		return fmt.Errorf("people: unable to read person: %w", err)
	}
	fields := map[string][]string{}
	if err := CheckPassword("password", sess.Person.Email, password); err != nil {
		fields["password"] = err.Fields["password"]
	}
	h := ""
	if hash != nil {
		h = *hash
	}
	ok, err := s.Hasher.Verify(h, current)
	if err != nil {
		return err
	}
	if !ok {
		fields["currentPassword"] = []string{"This is not your current password."}
	}
	if err := rule.InvalidFields(fields); err != nil {
		return err
	}
	newHash, err := s.Hasher.Hash(password)
	if err != nil {
		return err
	}
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE people SET password_hash = $2 WHERE id = $1`, sess.Person.ID, newHash); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE person_id = $1 AND digest <> $2`, sess.Person.ID, digest(token)); err != nil {
			return err
		}
		orgs, err := s.orgsOf(ctx, tx, &sess.Person.ID)
		if err != nil {
			return err
		}
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, &sess.Person.ID, sess.Person.Email, ActionPasswordChanged, "other sessions ended", address); err != nil {
				return err
			}
		}
		return s.tellChanged(ctx, tx, sess.Person.Email, "Your payreq password was changed", "The password of your payreq account was changed")
	})
}

// RequestReset emails a one-use reset link (30 minutes) when a person has
// this email; the caller answers the same either way.
func (s *Store) RequestReset(ctx context.Context, email, address string) error {
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var p struct {
			ID    uuid.UUID `db:"id"`
			Email string    `db:"email"`
		}
		err := tx.GetContext(ctx, &p, `SELECT id, email FROM people WHERE lower(email) = $1`, normalEmail(email))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("people: unable to find person: %w", err)
		}
		token, d := newToken()
		now := s.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO password_resets (digest, person_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
			d, p.ID, now, now.Add(ResetLife)); err != nil {
			return fmt.Errorf("people: unable to make reset link: %w", err)
		}
		return delivery.EnqueueNotice(ctx, tx, s.Vault, nil, delivery.Notice{To: p.Email,
			Subject: "Reset your payreq password",
			Text: "Hello,\n\nSomeone (we hope you) asked to reset the password of your payreq account.\n\n" +
				"Choose a new password here (the link works once, for 30 minutes):\n" + s.PublicURL + "/portal/password-reset/" + token + "\n\n" +
				"If you did not ask, ignore this email: your password stays as it is.\n"}, now)
	})
}

// ResetValid reports whether token is an unused, unexpired reset link.
func (s *Store) ResetValid(ctx context.Context, token string) error {
	var ok bool
	if err := s.DB.GetContext(ctx, &ok, `SELECT EXISTS (SELECT 1 FROM password_resets WHERE digest = $1 AND used_at IS NULL AND expires_at > $2)`,
		digest(token), s.Now()); err != nil {
		return fmt.Errorf("people: unable to read reset link: %w", err)
	}
	if !ok {
		return errLinkGone
	}
	return nil
}

// ResetPassword sets a new password through a reset link: every session
// of the person ends, and a sign-in lock of their email is lifted.
func (s *Store) ResetPassword(ctx context.Context, token, password, address string) error {
	var p struct {
		ID    uuid.UUID `db:"id"`
		Email string    `db:"email"`
	}
	err := s.DB.GetContext(ctx, &p, `SELECT p.id, p.email FROM password_resets r JOIN people p ON p.id = r.person_id
		WHERE r.digest = $1 AND r.used_at IS NULL AND r.expires_at > $2`, digest(token), s.Now())
	if errors.Is(err, sql.ErrNoRows) {
		return errLinkGone
	}
	if err != nil {
		return fmt.Errorf("people: unable to read reset link: %w", err)
	}
	if err := CheckPassword("password", p.Email, password); err != nil {
		return err
	}
	hash, err := s.Hasher.Hash(password)
	if err != nil {
		return err
	}
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE password_resets SET used_at = $2 WHERE digest = $1 AND used_at IS NULL`, digest(token), s.Now())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errLinkGone
		}
		for _, q := range []string{
			`UPDATE people SET password_hash = $2 WHERE id = $1`,
			`DELETE FROM sessions WHERE person_id = $1`,
		} {
			args := []any{p.ID}
			if q[0] == 'U' {
				args = append(args, hash)
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		for _, q := range []string{`DELETE FROM sign_in_locks WHERE email = $1`, `DELETE FROM sign_in_failures WHERE email = $1`} {
			if _, err := tx.ExecContext(ctx, q, normalEmail(p.Email)); err != nil {
				return err
			}
		}
		orgs, err := s.orgsOf(ctx, tx, &p.ID)
		if err != nil {
			return err
		}
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, &p.ID, p.Email, ActionPasswordReset, "every session ended", address); err != nil {
				return err
			}
		}
		return s.tellChanged(ctx, tx, p.Email, "Your payreq password was changed", "The password of your payreq account was reset through an emailed link")
	})
}
