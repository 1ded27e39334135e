package people

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
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
	ActionKeyCreated        = "API key created"
	ActionKeyRevoked        = "API key revoked"
	// Invoices, their payments made outside the card, and reminders,
	// changed in the portal (package invoice makes the change).
	ActionInvoiceCreated   = "invoice created"
	ActionInvoiceSent      = "invoice sent"
	ActionInvoiceCancelled = "invoice cancelled"
	ActionPaymentRecorded  = "payment recorded"
	ActionPaymentRemoved   = "payment removed"
	ActionRemindersChanged = "reminder settings changed"
	// What members do through other packages' functions in the portal.
	ActionRefunded             = "card payment refunded"
	ActionWebhookCreated       = "webhook endpoint created"
	ActionWebhookChanged       = "webhook endpoint changed"
	ActionWebhookSecretRotated = "webhook secret rotated"
	ActionWebhookDeleted       = "webhook endpoint deleted"
)

// Entry is one line of the audit log: who did what, when, from where.
// Detail never holds a secret.
type Entry struct {
	ID      uuid.UUID `db:"id"`
	Actor   string    `db:"actor"`
	Action  string    `db:"action"`
	Detail  string    `db:"detail"`
	Address string    `db:"address"`
	At      time.Time `db:"at"`
}

// record writes an entry of org (nil: of no organization) in the caller's
// transaction or connection.
func (s *Store) record(ctx context.Context, q sqlx.ExecerContext, org *uuid.UUID, person *uuid.UUID, actor, action, detail, address string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO audit_log (id, organization_id, person_id, actor, action, detail, address, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, uuid.Must(uuid.NewV7()), org, person, actor, action, detail, address, s.Now())
	if err != nil {
		return fmt.Errorf("people: unable to write the audit log: %w", err)
	}
	return nil
}

// Record writes an entry of the actor's organization: what a front did
// through another package (an API key made or revoked, a refund).
func (s *Store) Record(ctx context.Context, actor Actor, action, detail string) error {
	var org *uuid.UUID
	if actor.Membership != nil {
		org = &actor.Membership.OrganizationID
	}
	return s.record(ctx, s.DB, org, actor.person(), actor.name(), action, detail, actor.Address)
}

// AuditPage is the organization's log, newest first, limit entries
// before (at, id) when before is not zero; more says whether older ones
// follow.
func (s *Store) AuditPage(ctx context.Context, org uuid.UUID, before *Entry, limit int) (entries []Entry, more bool, err error) {
	entries = []Entry{}
	q := `SELECT id, actor, action, detail, address, at FROM audit_log WHERE organization_id = $1 AND at > $2`
	args := []any{org, s.Now().Add(-AuditKept)}
	if before != nil {
		q += ` AND (at, id) < ($3, $4)`
		args = append(args, before.At, before.ID)
	}
	q += fmt.Sprintf(` ORDER BY at DESC, id DESC LIMIT %d`, limit+1)
	if err := s.DB.SelectContext(ctx, &entries, q, args...); err != nil {
		return nil, false, fmt.Errorf("people: unable to read the audit log: %w", err)
	}
	if len(entries) > limit {
		return entries[:limit], true, nil
	}
	return entries, false, nil
}

// AuditEntry reads one entry of org, to page from; nil when there is none.
func (s *Store) AuditEntry(ctx context.Context, org, id uuid.UUID) (*Entry, error) {
	var e Entry
	err := s.DB.GetContext(ctx, &e, `SELECT id, actor, action, detail, address, at FROM audit_log WHERE organization_id = $1 AND id = $2`, org, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("people: unable to read the audit log: %w", err)
	}
	return &e, nil
}

// DeleteOld removes what is past keeping: audit entries after a year,
// sign-in failures and locks after a day, used or expired links, sessions
// past their lifetime.
func (s *Store) DeleteOld(ctx context.Context) error {
	now := s.Now()
	for _, q := range []struct {
		sql string
		at  time.Time
	}{
		{`DELETE FROM audit_log WHERE at < $1`, now.Add(-AuditKept)},
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
