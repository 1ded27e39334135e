package portal

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/rule"
)

// Locations and their MIDs (operators add them with the CLI; Owners and
// Admins change what customers see of each on its page, business.go), as GET /locations (locations.view) and GET /accounts
// (accounts.view) show them: a member sees what its permissions let a key
// read.

type locationView struct {
	directory.Location
	MIDs []directory.MerchantAccount
}

type locationsData struct {
	Locations    []locationView
	ShowLocation bool
	ShowMIDs     bool
	// CanEdit: Owners and Admins change each location's details.
	CanEdit bool
}

// either lets in the members holding one of the permissions.
func either(permissions ...string) guard {
	return func(m people.Membership) *rule.Error {
		for _, p := range permissions {
			if m.Can(p) {
				return nil
			}
		}
		return &rule.Error{Kind: rule.Forbidden, Title: "Permission required", Permission: permissions[0],
			Message: "This page needs the permission " + permissions[0] + " or " + permissions[1] + ", which you do not hold in " + m.OrganizationName + "."}
	}
}

// locations is GET /portal/locations.
func (h *handler) locations(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	locs, err := h.Directory.Locations(ctx, m.OrganizationID)
	if err != nil {
		return h.failure(c, err)
	}
	d := locationsData{ShowLocation: m.Can(auth.LocationsView), ShowMIDs: m.Can(auth.AccountsView), CanEdit: settingsManagers(*m) == nil}
	byID := map[string]int{}
	for i, l := range locs {
		d.Locations = append(d.Locations, locationView{Location: l})
		byID[l.ID.String()] = i
	}
	if d.ShowMIDs {
		mids, err := h.Directory.MerchantAccounts(ctx, m.OrganizationID, nil)
		if err != nil {
			return h.failure(c, err)
		}
		for _, a := range mids {
			if i, ok := byID[a.LocationID.String()]; ok {
				d.Locations[i].MIDs = append(d.Locations[i].MIDs, a)
			}
		}
	}
	return h.render(c, http.StatusOK, "locations", page{Title: "Locations and MIDs", Data: d})
}
