package portal

import (
	"testing"

	"github.com/payreq/payreq/internal/people"
)

// The guards let in exactly whom their name says: requires by the
// permission held, managers Owners and Admins, owners Owners.
func TestGuards(t *testing.T) {
	viewer := people.Membership{Role: people.Member, Permissions: []string{"payments.view"}}
	admin := people.Membership{Role: people.Admin}
	owner := people.Membership{Role: people.Owner}
	for _, c := range []struct {
		name string
		g    guard
		m    people.Membership
		in   bool
	}{
		{"requires(payments.view), holding it", requires("payments.view"), viewer, true},
		{"requires(payments.refund), not holding it", requires("payments.refund"), viewer, false},
		{"requires, an Owner without the permission", requires("payments.view"), owner, false},
		{"managers, a Member", managers, viewer, false},
		{"managers, an Admin", managers, admin, true},
		{"owners, an Admin", owners, admin, false},
		{"owners, an Owner", owners, owner, true},
		{"either, holding the second", either("locations.view", "payments.view"), viewer, true},
		{"either, holding neither", either("locations.view", "accounts.view"), viewer, false},
	} {
		if got := c.g(c.m) == nil; got != c.in {
			t.Errorf("%s: let in %v, want %v", c.name, got, c.in)
		}
	}
	if r := requires("payments.refund")(viewer); r == nil || r.Permission != "payments.refund" {
		t.Errorf("the refusal does not name the permission: %+v", r)
	}
}
