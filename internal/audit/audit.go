// Package audit keeps the audit log: who did what, when and from where.
// Append is the one way an entry is written, called by the package that
// makes the change inside the change's own transaction, beside
// event.Append: a change never commits without its entry (a client that
// drops the connection right after posting cannot take it away), and a
// form sent again, which changes nothing, writes none. Entries never hold
// a secret.
//
// It owns the table audit_log, kept a year (Kept).
package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// Kept is how long entries are kept.
const Kept = 365 * 24 * time.Hour

// Actions of the changes members make through the domain packages (people
// names its own: sign-ins, members, the second factor).
const (
	KeyCreated         = "API key created"
	KeyRevoked         = "API key revoked"
	InvoiceCreated     = "invoice created"
	CustomerCreated    = "customer created"
	CustomerChanged    = "customer changed"
	CustomerDeleted    = "customer deleted"
	InvoiceSent        = "invoice sent"
	InvoiceCancelled   = "invoice cancelled"
	InvoiceFinalized   = "invoice finalized"
	InvoiceChanged     = "invoice changed"
	DraftDeleted       = "draft deleted"
	PaymentRecorded    = "payment recorded"
	PaymentRemoved     = "payment removed"
	RemindersChanged   = "reminder settings changed"
	BrandingChanged    = "business settings changed"
	LocationChanged    = "location changed"
	TaxRateAdded       = "tax rate added"
	TaxRateChanged     = "tax rate changed"
	TaxRateRemoved     = "tax rate removed"
	SavedCardRemoved   = "saved card removed"
	ReceiptsChanged    = "receipts setting changed"
	Refunded           = "card payment refunded"
	WebhookCreated     = "webhook endpoint created"
	WebhookChanged     = "webhook endpoint changed"
	WebhookRotated     = "webhook secret rotated"
	WebhookDeleted     = "webhook endpoint deleted"
	WebhookPinged      = "webhook endpoint pinged"
	WebhookRedelivered = "webhook event sent again"
	TerminalAdded      = "terminal added"
	TerminalRenamed    = "terminal renamed"
	TerminalRemoved    = "terminal removed"
)

// Actor is who makes a change, as the log names it. Domain functions take
// a *Actor: nil when no person acts (an API key, the command line), and
// then they write no entry.
type Actor struct {
	Person  *uuid.UUID // nil: no person (an operator at the command line)
	Name    string     // "Dana Whitfield <dana@example.com>"
	Address string     // the client's address
}

// Entry is what Append writes.
type Entry struct {
	Organization *uuid.UUID // nil: of no organization (a sign-in of an unknown email)
	Actor        Actor
	Action       string
	Detail       string
	At           time.Time
}

// Append writes e in q, the transaction of the change it records.
func Append(ctx context.Context, q sqlx.ExecerContext, e Entry) error {
	_, err := q.ExecContext(ctx, `INSERT INTO audit_log (id, organization_id, person_id, actor, action, detail, address, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		uuid.Must(uuid.NewV7()), e.Organization, e.Actor.Person, e.Actor.Name, e.Action, e.Detail, e.Actor.Address, e.At)
	if err != nil {
		return fmt.Errorf("audit: unable to write the audit log: %w", err)
	}
	return nil
}

// URL is u as the log shows it: scheme, host, port and path, without the
// query and the fragment, where a receiver's token may sit.
func URL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unreadable address)"
	}
	p.RawQuery, p.ForceQuery, p.Fragment, p.RawFragment, p.User = "", false, "", "", nil
	return p.String()
}

// Line is one entry as the log shows it.
type Line struct {
	ID      uuid.UUID `db:"id"`
	Actor   string    `db:"actor"`
	Action  string    `db:"action"`
	Detail  string    `db:"detail"`
	Address string    `db:"address"`
	At      time.Time `db:"at"`
}

// Page is the organization's log as of now, newest first, limit lines
// before (at, id) when before is not nil; more says whether older ones
// follow.
func Page(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, now time.Time, before *Line, limit int) (lines []Line, more bool,
	err error) {
	lines = []Line{}
	s := `SELECT id, actor, action, detail, address, at FROM audit_log WHERE organization_id = $1 AND at > $2`
	args := []any{org, now.Add(-Kept)}
	if before != nil {
		s += ` AND (at, id) < ($3, $4)`
		args = append(args, before.At, before.ID)
	}
	s += fmt.Sprintf(` ORDER BY at DESC, id DESC LIMIT %d`, limit+1)
	if err := sqlx.SelectContext(ctx, q, &lines, s, args...); err != nil {
		return nil, false, fmt.Errorf("audit: unable to read the audit log: %w", err)
	}
	if len(lines) > limit {
		return lines[:limit], true, nil
	}
	return lines, false, nil
}

// Read is one line of org, to page from; nil when there is none.
func Read(ctx context.Context, q sqlx.QueryerContext, org, id uuid.UUID) (*Line, error) {
	var l Line
	err := sqlx.GetContext(ctx, q, &l, `SELECT id, actor, action, detail, address, at FROM audit_log WHERE organization_id = $1 AND id = $2`,
		org, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: unable to read the audit log: %w", err)
	}
	return &l, nil
}

// DeleteOld removes the entries past keeping.
func DeleteOld(ctx context.Context, q sqlx.ExecerContext, now time.Time) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM audit_log WHERE at < $1`, now.Add(-Kept)); err != nil {
		return fmt.Errorf("audit: unable to delete old entries: %w", err)
	}
	return nil
}
