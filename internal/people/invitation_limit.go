package people

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/rule"
)

// An organization sends at most MaxInvitations invitations in any
// InvitationWindow, so that no member (or stolen session) floods
// strangers' inboxes with payreq's mail.
const (
	MaxInvitations   = 50
	InvitationWindow = 24 * time.Hour
)

// invitationAllowed refuses (rule.Limited) another invitation of org when
// it made MaxInvitations in the InvitationWindow before now. It locks the
// organization's row for the caller's transaction, so that invitations
// made at once count one after the other.
func invitationAllowed(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, now time.Time) error {
	if err := directory.LockOrganization(ctx, tx, org, directory.NoKeyUpdate); err != nil {
		return fmt.Errorf("people: %w", err)
	}
	var n int
	var oldest *time.Time
	err := tx.QueryRowContext(ctx, `SELECT count(*), min(i.created_at) FROM invitations i
		JOIN memberships m ON m.id = i.membership_id
		WHERE m.organization_id = $1 AND i.created_at > $2`, org, now.Add(-InvitationWindow)).Scan(&n, &oldest)
	if err != nil {
		return fmt.Errorf("people: unable to count invitations: %w", err)
	}
	if n < MaxInvitations {
		return nil
	}
	return &rule.Error{Kind: rule.Limited, Title: "Too many invitations",
		Message:    fmt.Sprintf("An organization can send at most %d invitations in 24 hours.", MaxInvitations),
		RetryAfter: oldest.Add(InvitationWindow).Sub(now)}
}
