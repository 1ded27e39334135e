package people

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/audit"
)

// Audit actions: what the log records.
const (
	ActionSignedIn          = "signed in"
	ActionSignInFailed      = "sign-in failed"
	ActionSignInLocked      = "sign-ins locked"
	ActionSignedOut         = "signed out"
	ActionPasswordChanged   = "password changed"
	ActionPasswordReset     = "password reset"
	ActionTwoFactorOn       = "two-factor set up"
	ActionRecoveryCodeUsed  = "recovery code used"
	ActionTwoFactorRequired = "two-factor rule changed"
	ActionInvited           = "member invited"
	ActionInvitationTaken   = "invitation accepted"
	ActionMemberChanged     = "role and permissions changed"
	ActionMemberRemoved     = "member removed"
	ActionNotificationsSet  = "notifications changed"
)

// record writes an entry of org (nil: of no organization) in the caller's
// transaction or connection.
func (s *Store) record(ctx context.Context, q sqlx.ExecerContext, org *uuid.UUID, person *uuid.UUID, actor, action, detail, address string) error {
	return audit.Append(ctx, q, audit.Entry{Organization: org, Actor: audit.Actor{Person: person, Name: actor, Address: address},
		Action: action, Detail: detail, At: s.Now()})
}

// Audit is the actor as the audit log names it, for the changes other
// packages make on a member's (or the operator's) behalf and audit in
// their own transactions.
func (a Actor) Audit() *audit.Actor {
	return &audit.Actor{Person: a.person(), Name: a.name(), Address: a.Address}
}

// AuditPage is the organization's log, newest first, limit entries
// before the entry before when it is not nil; more says whether older ones
// follow.
func (s *Store) AuditPage(ctx context.Context, org uuid.UUID, before *audit.Line, limit int) (entries []audit.Line, more bool, err error) {
	return audit.Page(ctx, s.DB, org, s.Now(), before, limit)
}

// AuditEntry reads one entry of org, to page from; nil when there is none.
func (s *Store) AuditEntry(ctx context.Context, org, id uuid.UUID) (*audit.Line, error) {
	return audit.Read(ctx, s.DB, org, id)
}

// DeleteOld removes what is past keeping: audit entries after a year,
// sign-in failures and locks after a day, used or expired links, sessions
// past their lifetime.
func (s *Store) DeleteOld(ctx context.Context) error {
	now := s.Now()
	if err := audit.DeleteOld(ctx, s.DB, now); err != nil {
		return err
	}
	for _, q := range []struct {
		sql string
		at  time.Time
	}{
		{`DELETE FROM sign_in_failures WHERE at < $1`, now.Add(-24 * time.Hour)},
		{`DELETE FROM sign_in_locks WHERE locked_until < $1`, now},
		{`DELETE FROM password_checks WHERE at < $1`, now.Add(-time.Hour)},
		{`DELETE FROM reset_requests WHERE at < $1`, now.Add(-24 * time.Hour)},
		{`DELETE FROM invitations WHERE expires_at < $1`, now.Add(-24 * time.Hour)},
		{`DELETE FROM password_resets WHERE expires_at < $1`, now.Add(-24 * time.Hour)},
		{`DELETE FROM sessions WHERE created_at < $1`, now.Add(-SessionLifetime)},
		{`DELETE FROM sessions WHERE last_seen_at < $1`, now.Add(-SessionIdle)},
	} {
		if _, err := s.DB.ExecContext(ctx, q.sql, q.at); err != nil {
			return fmt.Errorf("people: unable to delete old rows: %w", err)
		}
	}
	return nil
}
