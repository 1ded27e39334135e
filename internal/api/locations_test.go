package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

func TestLocationsOrderedByNameAndAccountsFilteredByLocation(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)

	var locs []models.Location
	resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /locations: %d %s", resp.StatusCode, resp.Body)
	}
	resp.JSON(t, &locs)
	if len(locs) != 2 {
		t.Fatalf("%d locations, want 2", len(locs))
	}
	apitest.Want(t, "first location", locs[0].Name, "Airport Kiosk")
	apitest.Want(t, "second location", locs[1].Name, "Downtown")

	var all, one []models.MerchantAccount
	env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: token}).JSON(t, &all)
	if len(all) != 3 {
		t.Fatalf("%d accounts, want 3", len(all))
	}
	apitest.Want(t, "accounts ordered by mid", slices.IsSortedFunc(all, func(a, b models.MerchantAccount) int { return strings.Compare(a.Mid, b.Mid) }), true)
	env.Do(apitest.Request{Method: "GET", Path: "/accounts?locationId=" + locs[1].Id.String(), Token: token}).JSON(t, &one)
	if len(one) != 2 {
		t.Fatalf("locationId filter: got %d accounts, want the 2 of Downtown", len(one))
	}
	for _, a := range one {
		if a.LocationId != locs[1].Id {
			t.Errorf("account %s of location %s in Downtown's list", a.Mid, a.LocationId)
		}
	}

	var loc models.Location
	env.Do(apitest.Request{Method: "GET", Path: "/locations/" + locs[0].Id.String(), Token: token}).JSON(t, &loc)
	if loc.Id != locs[0].Id || loc.Name != "Airport Kiosk" {
		t.Fatalf("GET one location: %+v", loc)
	}
}

// Another organization's ids answer exactly as ids that do not exist.
func TestOtherOrganizationsLocationsAreNotFound(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	mine, theirs := env.Seed(), env.Seed()
	token := env.Token(mine.Merchant.KeyID, mine.Merchant.Secret)
	theirToken := env.Token(theirs.Merchant.KeyID, theirs.Merchant.Secret)
	var theirLocs []models.Location
	env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: theirToken}).JSON(t, &theirLocs)
	if len(theirLocs) == 0 {
		t.Fatal("the other organization has no locations")
	}

	other := env.Do(apitest.Request{Method: "GET", Path: "/locations/" + theirLocs[0].Id.String(), Token: token})
	unknown := env.Do(apitest.Request{Method: "GET", Path: "/locations/" + uuid.NewString(), Token: token})
	apitest.WantProblem(t, other, http.StatusNotFound, "")
	apitest.WantProblem(t, unknown, http.StatusNotFound, "")
	if string(other.Body) != string(unknown.Body) {
		t.Errorf("another organization's location:\n  %s\nan unknown id:\n  %s\nwant the same answer", other.Body, unknown.Body)
	}

	var accounts []models.MerchantAccount
	resp := env.Do(apitest.Request{Method: "GET", Path: "/accounts?locationId=" + theirLocs[0].Id.String(), Token: token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /accounts?locationId=<theirs>: %d %s", resp.StatusCode, resp.Body)
	}
	resp.JSON(t, &accounts)
	if len(accounts) != 0 {
		t.Errorf("another organization's location lists %d accounts: %+v", len(accounts), accounts)
	}
	var locs []models.Location
	env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token}).JSON(t, &locs)
	for _, l := range locs {
		if l.OrganizationId != mine.Merchant.OrganizationID {
			t.Errorf("GET /locations lists %s of organization %s", l.Name, l.OrganizationId)
		}
	}
}
