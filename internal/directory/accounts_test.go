package directory

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/auth"
)

// The reads of MIDs others compose: a page's by id, an organization's (or
// every one's) by MID, with their locations' names, time zones and
// statuses; and whether an organization exists.
func TestAccounts(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	org := must(s.CreateOrganization(ctx, auth.KindMerchant, "Dana's Bakery", "", nil))(t)
	other := must(s.CreateOrganization(ctx, auth.KindMerchant, "Other Bakery", "", nil))(t)
	east := mainStreet("East Street")
	east.TimeZone = "America/New_York"
	eastLoc := must(s.CreateLocation(ctx, org.ID, east))(t)
	mainLoc := must(s.CreateLocation(ctx, org.ID, mainStreet("Main Street")))(t)
	a := must(s.CreateMID(ctx, org.ID, eastLoc.ID, "496160875002"))(t)
	b := must(s.CreateMID(ctx, org.ID, mainLoc.ID, "496160875001"))(t)
	c := must(s.CreateMID(ctx, other.ID, must(s.CreateLocation(ctx, other.ID, mainStreet("Elm Street")))(t).ID, "496160875003"))(t)
	must(s.DeactivateLocation(ctx, mainLoc.ID))(t)

	by := must(AccountsByID(ctx, s.DB, []uuid.UUID{a.ID, b.ID, uuid.New()}))(t)
	want := Account{ID: a.ID, OrganizationID: org.ID, LocationID: eastLoc.ID, MID: "496160875002", Location: "East Street",
		TimeZone: "America/New_York", LocationStatus: "active"}
	if len(by) != 2 || by[a.ID] != want || by[b.ID].LocationStatus != "inactive" || by[b.ID].TimeZone != "America/Chicago" {
		t.Errorf("by id %+v", by)
	}
	if none := must(AccountsByID(ctx, s.DB, nil))(t); len(none) != 0 {
		t.Errorf("no ids read %+v", none)
	}
	of := must(AccountsOf(ctx, s.DB, &org.ID))(t)
	if len(of) != 2 || of[0].ID != b.ID || of[1].ID != a.ID {
		t.Errorf("the organization's %+v, want ordered by MID", of)
	}
	seen := map[uuid.UUID]bool{}
	for _, x := range must(AccountsOf(ctx, s.DB, nil))(t) {
		seen[x.ID] = true
	}
	if !seen[a.ID] || !seen[b.ID] || !seen[c.ID] {
		t.Errorf("every organization's: %v", seen)
	}
	if !must(OrganizationExists(ctx, s.DB, org.ID))(t) || must(OrganizationExists(ctx, s.DB, uuid.New()))(t) {
		t.Error("OrganizationExists")
	}
}
