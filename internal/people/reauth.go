package people

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// ConfirmWindow is how long "confirm it's you" lasts (GitHub's sudo mode
// asks again after a while too): changing the second factor or making an
// API key needs the person's password, and their current code when they
// have a second factor, given within it, on the confirmation page or by
// signing in. Whoever finds a browser left signed in cannot take the
// account over with it.
const ConfirmWindow = 10 * time.Minute

// Confirmed says whether the person of sess confirmed it's them within
// ConfirmWindow.
func (s *Store) Confirmed(sess Session) bool {
	return !sess.ConfirmedAt.IsZero() && s.Now().Sub(sess.ConfirmedAt) < ConfirmWindow
}

var errWrongCode = errors.New("people: wrong code")

// Confirm opens the confirmation window of the session of token when
// password is the person's and, with a second factor, code is a current
// code of their app (used, as at sign-in). It is a sign-in in all but
// name: it is refused while the person's sign-ins are paused or the
// address is over its limit, and a wrong password counts as a failed
// sign-in of the person, a wrong code as a failed second step.
func (s *Store) Confirm(ctx context.Context, token, password, code, address string) error {
	sess, err := s.Session(ctx, token)
	if err != nil {
		return err
	}
	if sess.AwaitingSecondFactor {
		return ErrNoSession
	}
	key := normalEmail(sess.Person.Email)
	for _, limit := range []func() error{
		func() error { return s.emailLock(ctx, key) },
		func() error { return s.addressLimit(ctx, address) },
		func() error {
			if !sess.Person.TwoFactor {
				return nil
			}
			return s.secondStepLimits(ctx, sess.Person.ID, address)
		},
		func() error { return s.spend(ctx, address) }, // the hashing budget
	} {
		if err := limit(); err != nil {
			return err
		}
	}
	var hash *string
	if err := s.DB.GetContext(ctx, &hash, `SELECT password_hash FROM people WHERE id = $1`, sess.Person.ID); err != nil {
		return fmt.Errorf("people: unable to read person: %w", err)
	}
	h := ""
	if hash != nil {
		h = *hash
	}
	ok, err := s.Hasher.Verify(h, password)
	if err != nil {
		return err
	}
	if !ok {
		if err := s.failed(ctx, key, address, &sess.Person.ID); err != nil {
			return err
		}
		return rule.InvalidField("password", "This is not your password.")
	}
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if sess.Person.TwoFactor {
			ok, err := s.currentCode(ctx, tx, sess.Person.ID, code)
			if err != nil {
				return err
			}
			if !ok {
				return errWrongCode
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET confirmed_at = $2 WHERE digest = $1`, digest(token), s.Now()); err != nil {
			return fmt.Errorf("people: unable to confirm session: %w", err)
		}
		return nil
	})
	if errors.Is(err, errWrongCode) {
		if err := s.secondFactorFailed(ctx, sess.Person, address); err != nil {
			return err
		}
		return rule.InvalidField("code", "This code is not right, or it was used already. Enter the 6 digits your app shows now.")
	}
	return err
}

// tellChanged emails the person at to that what (a sentence) was just
// done to their account, in the change's transaction: whoever made the
// change, the owner of the account hears of it and can undo it.
func (s *Store) tellChanged(ctx context.Context, tx *sqlx.Tx, to, subject, what string) error {
	now := s.Now()
	return delivery.EnqueueNotice(ctx, tx, s.Vault, nil, delivery.Notice{To: to, Subject: subject,
		Text: "Hello,\n\n" + what + ", on " + now.UTC().Format("2 January 2006 at 15:04 UTC") + ".\n\n" +
			"If this was you, there is nothing more to do.\n\n" +
			"If it was not, reset your password now (this ends every session of your account) and tell an Owner of your organization:\n" +
			s.PublicURL + "/portal/password-reset\n"}, now)
}
