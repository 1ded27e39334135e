package auth

import (
	"context"
	"errors"

	"github.com/google/uuid"
)

// Organizations reads what auth needs of organizations: internal/directory
// implements it.
type Organizations interface {
	// OrganizationStatus is the organization's status: onboarding,
	// active, suspended or closed.
	OrganizationStatus(ctx context.Context, org uuid.UUID) (string, error)
}

// suspended says whether an organization of status has its keys refused.
func suspended(status string) bool { return status == "suspended" || status == "closed" }

// Members reads the memberships that make keys: internal/people
// implements it.
type Members interface {
	// KeyCreator is the current membership id; ErrNoCreator when it is
	// removed or there is none.
	KeyCreator(ctx context.Context, membership uuid.UUID) (Creator, error)
	// CreatorNames names each membership as a key list shows its creator:
	// its person's name (or email), "former member" once removed.
	CreatorNames(ctx context.Context, memberships []uuid.UUID) (map[uuid.UUID]string, error)
}

// Creator is what a membership may give a key: its organization and the
// organization's kind, its role and its permissions.
type Creator struct {
	Organization uuid.UUID
	Kind         string
	Role         string
	Permissions  []string
}

// ErrNoCreator: no current membership has this id.
var ErrNoCreator = errors.New("auth: no such current member")
