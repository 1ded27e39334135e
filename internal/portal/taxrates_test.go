package portal_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

var taxRateLink = regexp.MustCompile(`<a href="(/portal/settings/tax-rates/[0-9a-f-]{36})">([^<]*)</a>`)

// Owners and Admins keep the organization's named tax rates: listed by
// name with their percent, added, renamed and changed, removed; a rate
// outside 0 to 100, of more than 4 places, no number or a name already
// used is refused beside its field in the page's words, nothing kept;
// each change is audited.
func TestTaxRatesSettings(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	admin, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Admin", auth.PermissionsFor(auth.KindMerchant)...)
	p := admin.Get("/portal/settings/tax-rates").Want(t, http.StatusOK).Has(t, "No tax rates yet", "Add a tax rate")
	if !strings.Contains(p.Body, `href="/portal/settings/tax-rates"`) {
		t.Error("no link to the tax rates in the navigation")
	}

	admin.Post("/portal/settings/tax-rates", p.CSRF(t), form("name", "Sales tax", "rate", "8.25")).WantRedirect(t, "/portal/settings/tax-rates?done=added")
	admin.Post("/portal/settings/tax-rates", p.CSRF(t), form("name", "City tax", "rate", "2%")).WantRedirect(t, "/portal/settings/tax-rates?done=added")
	for _, c := range []struct {
		name, rate, field, text string
		status                  int
	}{
		{"State tax", "100.5", "rate", "from 0 to 100", http.StatusBadRequest},
		{"State tax", "-1", "rate", "from 0 to 100", http.StatusBadRequest},
		{"State tax", "6.12345", "rate", "at most 4 decimal places", http.StatusBadRequest},
		{"State tax", "six", "rate", "from 0 to 100", http.StatusBadRequest},
		{"State tax", "", "rate", "from 0 to 100", http.StatusBadRequest},
		{"", "6", "name", "Enter a name", http.StatusBadRequest},
		{"sales TAX", "6", "name", "already has a tax rate named", http.StatusUnprocessableEntity},
	} {
		admin.Post("/portal/settings/tax-rates", p.CSRF(t), form("name", c.name, "rate", c.rate)).Want(t, c.status).
			ErrorBeside(t, c.field, c.text).Has(t, `value="`+c.rate+`"`)
	}
	list := admin.Get("/portal/settings/tax-rates?done=added").Want(t, http.StatusOK).Has(t, "The tax rate was added.", "8.25%", "2%")
	links := taxRateLink.FindAllStringSubmatch(list.Body, -1)
	if len(links) != 2 || links[0][2] != "City tax" || links[1][2] != "Sales tax" {
		t.Fatalf("rates %v, want City tax then Sales tax", links)
	}
	sales := links[1][1]

	edit := admin.Get(sales).Want(t, http.StatusOK).Has(t, `value="Sales tax"`, `value="8.25"`, "Remove Sales tax")
	admin.Post(sales, edit.CSRF(t), form("name", "Sales tax", "rate", "101")).Want(t, http.StatusBadRequest).ErrorBeside(t, "rate", "from 0 to 100")
	admin.Post(sales, edit.CSRF(t), form("name", "City tax", "rate", "8")).Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "name", "already has")
	admin.Post(sales, edit.CSRF(t), form("name", "State sales tax", "rate", "6.2500")).WantRedirect(t, sales+"?done=saved")
	admin.Get(sales+"?done=saved").Want(t, http.StatusOK).Has(t, "The tax rate was saved.", `value="State sales tax"`, `value="6.25"`)
	admin.Post(sales+"/remove", edit.CSRF(t), nil).WantRedirect(t, "/portal/settings/tax-rates?done=removed")
	after := admin.Get("/portal/settings/tax-rates?done=removed").Want(t, http.StatusOK).Has(t, "The tax rate was removed.", "City tax")
	if strings.Contains(after.Body, "State sales tax") {
		t.Error("the removed rate is still listed")
	}
	admin.Get(sales).Want(t, http.StatusNotFound)
	admin.Get("/portal/audit").Want(t, http.StatusOK).Has(t, "tax rate added", "tax rate changed", "Sales tax 8.25% → State sales tax 6.25%", "tax rate removed")

	// Members, whatever they hold, neither see nor use them.
	member, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PermissionsFor(auth.KindMerchant)...)
	home := member.Get("/portal/").Want(t, http.StatusOK)
	if strings.Contains(home.Body, `href="/portal/settings/tax-rates"`) {
		t.Error("a member is shown the tax rates")
	}
	city := links[0][1]
	member.Get("/portal/settings/tax-rates").Want(t, http.StatusForbidden).Has(t, "Owners and Admins")
	member.Get(city).Want(t, http.StatusForbidden)
	member.Post("/portal/settings/tax-rates", home.CSRF(t), form("name", "Theirs", "rate", "1")).Want(t, http.StatusForbidden)
	member.Post(city, home.CSRF(t), form("name", "Theirs", "rate", "1")).Want(t, http.StatusForbidden)
	member.Post(city+"/remove", home.CSRF(t), nil).Want(t, http.StatusForbidden)
	// Without the CSRF token: refused, whoever sends it.
	admin.Do("POST", city+"/remove", nil, nil).Want(t, http.StatusForbidden)
	admin.Do("POST", "/portal/settings/tax-rates", form("name", "Forged", "rate", "1"), nil).Want(t, http.StatusForbidden)

	// Another organization's rate is a 404 on its page and actions.
	otherOwner, _ := portaltest.SignedIn(t, env, uuid.MustParse(apitest.NewMerchant(t, env).Org), "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	theirs := otherOwner.Get("/portal/settings/tax-rates").Want(t, http.StatusOK)
	if strings.Contains(theirs.Body, "City tax") {
		t.Error("another organization sees the rates")
	}
	otherOwner.Get(city).Want(t, http.StatusNotFound)
	otherOwner.Post(city, theirs.CSRF(t), form("name", "Stolen", "rate", "1")).Want(t, http.StatusNotFound)
	otherOwner.Post(city+"/remove", theirs.CSRF(t), nil).Want(t, http.StatusNotFound)
	otherOwner.Get("/portal/settings/tax-rates/not-a-uuid").Want(t, http.StatusNotFound)
	admin.Get(city).Want(t, http.StatusOK).Has(t, `value="City tax"`, `value="2"`)
}
