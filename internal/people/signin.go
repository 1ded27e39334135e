package people

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// The sign-in limits: 5 password failures of one email in 15 minutes
// lock its sign-ins for 15 minutes; 5 wrong second-factor codes of one
// person in 15 minutes pause that person's second step for 15 minutes;
// 20 failures from one address (an IPv6 address's /64) in 10 minutes
// refuse that address's until they age out; more than 30 password checks
// a minute from one address without a device cookie are refused.
const (
	EmailFailures      = 5
	EmailWindow        = 15 * time.Minute
	LockFor            = 15 * time.Minute
	AddressFailures    = 20
	AddressWindow      = 10 * time.Minute
	ChecksPerMinute    = 30
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

// emailLock refuses a sign-in of email while it is locked.
func (s *Store) emailLock(ctx context.Context, email string) error {
	now := s.Now()
	var until *time.Time
	if err := s.DB.GetContext(ctx, &until, `SELECT max(locked_until) FROM sign_in_locks WHERE email = $1 AND locked_until > $2`, email, now); err != nil {
		return fmt.Errorf("people: unable to read sign-in lock: %w", err)
	}
	if until != nil {
		return limited(until.Sub(now), "Sign-ins of this email are paused after too many failed attempts.")
	}
	return nil
}

// addressLimit refuses a sign-in from address while it is over its
// failures. It counts every failure, cleared or not.
func (s *Store) addressLimit(ctx context.Context, address string) error {
	now := s.Now()
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

// spend counts a password check without a device cookie (a sign-in, a
// reset, an invitation, a password change) against its address, success
// or not, and refuses it past ChecksPerMinute: a flood from one network
// gets 429s, which cost no hash.
func (s *Store) spend(ctx context.Context, address string) error {
	address = framing.Network(address)
	now := s.Now()
	var seen struct {
		N      int        `db:"n"`
		Oldest *time.Time `db:"oldest"`
	}
	if err := s.DB.GetContext(ctx, &seen, `WITH this AS (INSERT INTO password_checks (address, at) VALUES ($1, $2))
		SELECT count(*) AS n, min(at) AS oldest FROM password_checks WHERE address = $1 AND at > $3`,
		address, now, now.Add(-time.Minute)); err != nil {
		return fmt.Errorf("people: unable to count password checks: %w", err)
	}
	if seen.N+1 > ChecksPerMinute { // the count does not see this one
		wait := max(seen.Oldest.Add(time.Minute).Sub(now).Round(time.Second), time.Second)
		return &rule.Error{Kind: rule.Limited, Title: "Too many sign-in attempts", RetryAfter: wait,
			Message: fmt.Sprintf("There have been too many sign-ins from your network. Try again in %d seconds.", int(wait.Seconds()))}
	}
	return nil
}

// failed records a failed password of email from address (a sign-in, or
// the current password on the account page), and locks the email at its
// fifth failure in the window (telling the person, if there is one, by
// email).
func (s *Store) failed(ctx context.Context, email, address string, person *uuid.UUID) error {
	now := s.Now()
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sign_in_failures (email, address, at, person_id) VALUES ($1, $2, $3, $4)`, email, address, now, person); err != nil {
			return fmt.Errorf("people: unable to record sign-in failure: %w", err)
		}
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM sign_in_failures WHERE email = $1 AND at > $2 AND NOT second_factor AND cleared_at IS NULL`,
			email, now.Add(-EmailWindow)); err != nil {
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

// secondStepLimits refuses a second step of person from address while
// the person's second step is paused or the address is over its failures.
func (s *Store) secondStepLimits(ctx context.Context, person uuid.UUID, address string) error {
	now := s.Now()
	var until *time.Time
	if err := s.DB.GetContext(ctx, &until, `SELECT second_factor_paused_until FROM people WHERE id = $1 AND second_factor_paused_until > $2`,
		person, now); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("people: unable to read the second step's pause: %w", err)
	}
	if until != nil {
		return limited(until.Sub(now), "The second step of signing in is paused after too many wrong codes.")
	}
	return s.addressLimit(ctx, address)
}

// secondFactorFailed records a wrong code (or recovery code) of person
// from address: counted for the person on its own, and for the address.
// The fifth in the window pauses the person's second step and tells them.
func (s *Store) secondFactorFailed(ctx context.Context, p Person, address string) error {
	now := s.Now()
	email := normalEmail(p.Email)
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sign_in_failures (email, address, at, person_id, second_factor) VALUES ($1, $2, $3, $4, true)`,
			email, address, now, p.ID); err != nil {
			return fmt.Errorf("people: unable to record second-factor failure: %w", err)
		}
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM sign_in_failures WHERE person_id = $1 AND second_factor AND at > $2 AND cleared_at IS NULL`,
			p.ID, now.Add(-EmailWindow)); err != nil {
			return err
		}
		orgs, err := s.orgsOf(ctx, tx, &p.ID)
		if err != nil {
			return err
		}
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, &p.ID, email, ActionSignInFailed, "wrong second-factor code", address); err != nil {
				return err
			}
		}
		if n < EmailFailures {
			return nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE people SET second_factor_paused_until = $2
			WHERE id = $1 AND (second_factor_paused_until IS NULL OR second_factor_paused_until <= $3)`, p.ID, now.Add(LockFor), now)
		if err != nil {
			return fmt.Errorf("people: unable to pause the second step: %w", err)
		}
		if paused, _ := res.RowsAffected(); paused == 0 {
			return nil
		}
		for _, org := range orgs {
			if err := s.record(ctx, tx, &org, &p.ID, email, ActionSignInLocked, "second step, for 15 minutes", address); err != nil {
				return err
			}
		}
		return delivery.EnqueueNotice(ctx, tx, s.Vault, nil, delivery.Notice{To: p.Email,
			Subject: "Sign-ins to your payreq account are paused",
			Text: "Hello,\n\nYour password was given and then 5 wrong second-factor codes in the last 15 minutes, " +
				"so the second step of signing in is paused for 15 minutes.\n\nIf this was not you, someone knows your password: " +
				"change it now on your account page, or reset it here:\n" + s.PublicURL + "/portal/password-reset\n"}, now)
	})
}

// clearFailures ends the count of email's password failures and of the
// person's second-factor failures, after a sign-in that passed both steps.
// The rows stay: the address limit still counts them.
func (s *Store) clearFailures(ctx context.Context, tx *sqlx.Tx, email string, person uuid.UUID) error {
	if _, err := tx.ExecContext(ctx, `UPDATE sign_in_failures SET cleared_at = $3 WHERE (email = $1 OR person_id = $2) AND cleared_at IS NULL`,
		email, person, s.Now()); err != nil {
		return fmt.Errorf("people: unable to clear sign-in failures: %w", err)
	}
	return nil
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
// (ErrWrongCredentials) after the same work. device is the browser's
// device cookie (or ""): valid for this email, the sign-in is not held by
// the email's lock nor counted against its address, and may use the
// hashing slots reserved to such sign-ins. It answers a new session:
// awaiting the second factor when the person has one, else in the
// person's organization when there is exactly one, with a new device
// token.
func (s *Store) SignIn(ctx context.Context, email, password, address, device string) (Session, error) {
	key := normalEmail(email)
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
	trusted := found && s.deviceOf(device, p.ID)
	if !trusted {
		if err := s.spend(ctx, address); err != nil {
			return Session{}, err
		}
		if err := s.emailLock(ctx, key); err != nil {
			return Session{}, err
		}
	}
	if err := s.addressLimit(ctx, address); err != nil {
		return Session{}, err
	}
	hash := ""
	if found && p.Hash != nil {
		hash = *p.Hash
	}
	ok, err := s.Hasher.verify(hash, password, trusted)
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
		// Failures are cleared only once both steps have passed.
		if !p.TwoFactor {
			if err := s.clearFailures(ctx, tx, key, p.ID); err != nil {
				return err
			}
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
	if err == nil && !p.TwoFactor {
		sess.Device = s.newDevice(p.ID)
	}
	return sess, err
}

// ChangePassword sets a new password after checking the current one, and
// ends the person's other sessions and every open reset link. A wrong
// current password counts as a failed sign-in of the person (it can lock
// the email, which then refuses this too).
func (s *Store) ChangePassword(ctx context.Context, sess Session, token, current, password, address string) error {
	if err := s.spend(ctx, address); err != nil {
		return err
	}
	email := normalEmail(sess.Person.Email)
	if err := s.emailLock(ctx, email); err != nil {
		return err
	}
	var hash *string
	if err := s.DB.GetContext(ctx, &hash, `SELECT password_hash FROM people WHERE id = $1`, sess.Person.ID); err != nil {
		return fmt.Errorf("people: unable to read person: %w", err)
	}
	fields := map[string][]string{}
	if err := CheckPassword("password", sess.Person.Email, sess.Person.Name, password); err != nil {
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
		if err := s.failed(ctx, email, framing.Network(address), &sess.Person.ID); err != nil {
			return err
		}
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
		if err := s.endResets(ctx, tx, sess.Person.ID); err != nil {
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

// Reset request limits: per email (typed, lower case) and per address.
const (
	ResetsPerEmail   = 3
	ResetsPerAddress = 20
	ResetWindow      = time.Hour
)

// RequestReset queues a reset request for email, whether or not it has a
// sign-in: nothing about the email is looked up here, so the answer takes
// the same work either way; the delivery worker asks ResetNotice. At most
// ResetsPerEmail an hour per email and ResetsPerAddress per address.
func (s *Store) RequestReset(ctx context.Context, email, address string) error {
	email = strings.TrimSpace(email)
	if email == "" || len(email) > 254 {
		return rule.InvalidField("email", "Enter the email you sign in with.")
	}
	key, address, now := normalEmail(email), framing.Network(address), s.Now()
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var seen struct {
			Email         int        `db:"email"`
			Address       int        `db:"address"`
			OldestEmail   *time.Time `db:"oldest_email"`
			OldestAddress *time.Time `db:"oldest_address"`
		}
		if err := tx.GetContext(ctx, &seen, `SELECT count(*) FILTER (WHERE email = $1) AS email, min(at) FILTER (WHERE email = $1) AS oldest_email,
				count(*) FILTER (WHERE address = $2) AS address, min(at) FILTER (WHERE address = $2) AS oldest_address
			FROM reset_requests WHERE (email = $1 OR address = $2) AND at > $3`, key, address, now.Add(-ResetWindow)); err != nil {
			return fmt.Errorf("people: unable to count reset requests: %w", err)
		}
		switch {
		case seen.Email >= ResetsPerEmail:
			return resetsLimited(seen.OldestEmail.Add(ResetWindow).Sub(now), "This email was sent enough reset links for now.")
		case seen.Address >= ResetsPerAddress:
			return resetsLimited(seen.OldestAddress.Add(ResetWindow).Sub(now), "There have been too many reset requests from your network.")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO reset_requests (email, address, at) VALUES ($1, $2, $3)`, key, address, now); err != nil {
			return fmt.Errorf("people: unable to record reset request: %w", err)
		}
		return delivery.EnqueueNotice(ctx, tx, s.Vault, nil, delivery.Notice{To: email, Subject: "Reset your payreq password", PasswordReset: true}, now)
	})
}

func resetsLimited(wait time.Duration, why string) *rule.Error {
	minutes := max(int(math.Ceil(wait.Minutes())), 1)
	return &rule.Error{Kind: rule.Limited, Title: "Too many reset requests", RetryAfter: max(wait.Round(time.Second), time.Second),
		Message: fmt.Sprintf("%s Try again in %d minute%s.", why, minutes, map[bool]string{true: "", false: "s"}[minutes == 1])}
}

// ResetNotice is the reset email of email, with a new one-use link (30
// minutes), when a person has this email; ok false when none has. The
// delivery worker asks it for a request RequestReset queued.
func (s *Store) ResetNotice(ctx context.Context, email string) (n delivery.Notice, ok bool, err error) {
	var p struct {
		ID    uuid.UUID `db:"id"`
		Email string    `db:"email"`
	}
	err = s.DB.GetContext(ctx, &p, `SELECT id, email FROM people WHERE lower(email) = $1`, normalEmail(email))
	if errors.Is(err, sql.ErrNoRows) {
		return delivery.Notice{}, false, nil
	}
	if err != nil {
		return delivery.Notice{}, false, fmt.Errorf("people: unable to find person: %w", err)
	}
	token, d := newToken()
	now := s.Now()
	if _, err := s.DB.ExecContext(ctx, `INSERT INTO password_resets (digest, person_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		d, p.ID, now, now.Add(ResetLife)); err != nil {
		return delivery.Notice{}, false, fmt.Errorf("people: unable to make reset link: %w", err)
	}
	return delivery.Notice{To: p.Email, Subject: "Reset your payreq password",
		Text: "Hello,\n\nSomeone (we hope you) asked to reset the password of your payreq account.\n\n" +
			"Choose a new password here (the link works once, for 30 minutes):\n" + s.PublicURL + "/portal/password-reset/" + token + "\n\n" +
			"If you did not ask, ignore this email: your password stays as it is.\n"}, true, nil
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
// and every other reset link of the person ends, and a sign-in lock of
// their email is lifted.
func (s *Store) ResetPassword(ctx context.Context, token, password, address string) error {
	if err := s.spend(ctx, address); err != nil {
		return err
	}
	var p struct {
		ID    uuid.UUID `db:"id"`
		Email string    `db:"email"`
		Name  string    `db:"name"`
	}
	err := s.DB.GetContext(ctx, &p, `SELECT p.id, p.email, p.name FROM password_resets r JOIN people p ON p.id = r.person_id
		WHERE r.digest = $1 AND r.used_at IS NULL AND r.expires_at > $2`, digest(token), s.Now())
	if errors.Is(err, sql.ErrNoRows) {
		return errLinkGone
	}
	if err != nil {
		return fmt.Errorf("people: unable to read reset link: %w", err)
	}
	if err := CheckPassword("password", p.Email, p.Name, password); err != nil {
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
		if err := s.endResets(ctx, tx, p.ID); err != nil {
			return err
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
		if _, err := tx.ExecContext(ctx, `DELETE FROM sign_in_locks WHERE email = $1`, normalEmail(p.Email)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sign_in_failures SET cleared_at = $2 WHERE email = $1 AND NOT second_factor AND cleared_at IS NULL`,
			normalEmail(p.Email), s.Now()); err != nil {
			return err
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

// endResets ends every open reset link of person: a new password, however
// set, makes the links sent for the old one useless.
func (s *Store) endResets(ctx context.Context, tx *sqlx.Tx, person uuid.UUID) error {
	if _, err := tx.ExecContext(ctx, `UPDATE password_resets SET used_at = $2 WHERE person_id = $1 AND used_at IS NULL`, person, s.Now()); err != nil {
		return fmt.Errorf("people: unable to end reset links: %w", err)
	}
	return nil
}
