package portal_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// An Owner invites by email; the invitation's link asks a new person for
// a name and a password and signs them in; a person who has a sign-in
// (in another organization) signs in to accept and then chooses between
// organizations. A used link is a 404.
func TestInvitations(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	org := seed.Merchant.OrganizationID
	owner, _ := portaltest.SignedIn(t, env, org, "Owner", auth.PaymentsView, auth.PaymentsCreate)
	members := owner.Get("/portal/members").Want(t, http.StatusOK)

	// Refusals: a bad email (400 beside it, the rest kept), a permission
	// the Owner lacks (403), nothing made.
	owner.Post("/portal/members", members.CSRF(t), url.Values{"email": {"not an email"}, "role": {"Member"}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "email", "email address")
	owner.Post("/portal/members", members.CSRF(t), url.Values{"email": {"x@example.com"}, "role": {"Member"}, "permissions": {auth.PaymentsRefund}}).
		Want(t, http.StatusForbidden)

	owner.Post("/portal/members", members.CSRF(t), url.Values{"email": {"new.person@example.com"}, "role": {"Member"}, "permissions": {auth.PaymentsView}}).
		WantRedirect(t, "/portal/members?done=invited")
	link := portaltest.Link(t, mail.Wait("new.person@example.com", "invited"))
	guest := portaltest.NewClient(t, env)
	form := guest.Get(link).Want(t, http.StatusOK).Has(t, "Choose your name and a password")
	guest.Post(link, form.CSRF(t), url.Values{"name": {"New Person"}, "password": {"short"}}).Want(t, http.StatusBadRequest).
		ErrorBeside(t, "password", "at least 12").Has(t, `value="New Person"`)
	guest.Post(link, form.CSRF(t), url.Values{"name": {"New Person"}, "password": {"a long enough password"}}).WantRedirect(t, "/portal/")
	guest.Get("/portal/").Want(t, http.StatusOK).Has(t, "Member")
	guest.Get(link).Want(t, http.StatusNotFound)

	// Someone with a sign-in elsewhere: invited to the reseller too.
	resellerOwner, _ := portaltest.SignedIn(t, env, seed.Reseller.OrganizationID, "Owner", auth.PortfolioView)
	rm := resellerOwner.Get("/portal/members")
	resellerOwner.Post("/portal/members", rm.CSRF(t), url.Values{"email": {"NEW.PERSON@example.com"}, "role": {"Admin"}, "permissions": {auth.PortfolioView}}).
		WantRedirect(t, "/portal/members?done=invited")
	link = portaltest.Link(t, mail.Wait("NEW.PERSON@example.com", "Northwind"))
	form = guest.Get(link).Want(t, http.StatusOK).Has(t, "Sign in as new.person@example.com")
	guest.Post(link, form.CSRF(t), url.Values{"password": {"a wrong password here"}}).Want(t, http.StatusBadRequest)
	guest.Post(link, form.CSRF(t), url.Values{"password": {"a long enough password"}}).WantRedirect(t, "/portal/")
	again := portaltest.NewClient(t, env)
	again.SignIn("new.person@example.com", "a long enough password").WantRedirect(t, "/portal/organizations")
	orgs := again.Get("/portal/organizations").Want(t, http.StatusOK)
	orgs.Has(t, "/portal/organizations/"+seed.Reseller.OrganizationID.String()+"/switch")
	again.Post("/portal/organizations/"+seed.Reseller.OrganizationID.String()+"/switch", orgs.CSRF(t), nil).WantRedirect(t, "/portal/")
	again.Get("/portal/members").Want(t, http.StatusOK) // an Admin of the reseller
	again.Post("/portal/organizations/"+seed.Merchant.OrganizationID.String()+"/switch", orgs.CSRF(t), nil).Want(t, http.StatusSeeOther)
	again.Post("/portal/organizations/00000000-0000-0000-0000-000000000000/switch", orgs.CSRF(t), nil).Want(t, http.StatusNotFound)
}

// Owners and Admins change roles and permissions and remove members;
// Admins neither make nor touch Owners; the last Owner stays (409); a
// removed member's sessions end and the keys they made keep working,
// listed as a former member's; another organization's member is a 404.
func TestManagingMembers(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	org := seed.Merchant.OrganizationID
	owner, ownerM := portaltest.SignedIn(t, env, org, "Owner", auth.PaymentsView, auth.PaymentsCreate, auth.AccountsView)
	admin, adminM := portaltest.SignedIn(t, env, org, "Admin", auth.PaymentsView, auth.AccountsView)
	page := admin.Get("/portal/members")
	path := "/portal/members/" + ownerM.MembershipID.String()
	if p := admin.Post(path, page.CSRF(t), url.Values{"role": {"Member"}}); p.Status != http.StatusForbidden {
		t.Fatalf("%d %s", p.Status, env.Log.String())
	}
	admin.Post(path+"/remove", page.CSRF(t), nil).Want(t, http.StatusForbidden)
	adminPath := "/portal/members/" + adminM.MembershipID.String()
	admin.Post(adminPath, page.CSRF(t), url.Values{"role": {"Owner"}, "permissions": {auth.PaymentsView}}).Want(t, http.StatusForbidden)

	// The admin makes a key, then is removed: the key keeps working.
	keys := admin.Get("/portal/keys")
	made := admin.Post("/portal/keys", keys.CSRF(t), url.Values{"name": {"Admin's key"}, "permissions": {auth.AccountsView},
		"idempotencyKey": {formKey(t, keys)}}).Want(t, http.StatusCreated)
	keyID, secret := keyIDIn.FindStringSubmatch(made.Body)[1], secretIn.FindStringSubmatch(made.Body)[1]

	op := owner.Get(adminPath).Want(t, http.StatusOK)
	owner.Post(adminPath, op.CSRF(t), url.Values{"role": {"Admin"}, "permissions": {auth.PaymentsView}}).WantRedirect(t, "/portal/members?done=changed")
	owner.Post(adminPath+"/remove", op.CSRF(t), nil).WantRedirect(t, "/portal/members?done=removed")
	admin.Get("/portal/members").WantRedirect(t, "/portal/sign-in") // its session ended
	tok := env.Token(keyID, secret)
	apitest.Want(t, "the removed admin's key", env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: tok}).StatusCode, http.StatusOK)
	owner.Get("/portal/keys").Has(t, "former member")

	// The last Owner stays: the only other Owners are the demo's, removed first.
	demoOwner, err := env.App.People.Owner(t.Context(), org)
	if err != nil {
		t.Fatal(err)
	}
	if demoOwner.ID != ownerM.MembershipID {
		owner.Post("/portal/members/"+demoOwner.ID.String()+"/remove", op.CSRF(t), nil).WantRedirect(t, "/portal/members?done=removed")
	}
	owner.Post("/portal/members/"+ownerM.MembershipID.String()+"/remove", op.CSRF(t), nil).Want(t, http.StatusConflict)
	owner.Post("/portal/members/"+ownerM.MembershipID.String(), op.CSRF(t), url.Values{"role": {"Member"}}).Want(t, http.StatusConflict)

	other, err := env.App.People.Owner(t.Context(), seed.Reseller.OrganizationID)
	if err != nil {
		t.Fatal(err)
	}
	owner.Get("/portal/members/"+other.ID.String()).Want(t, http.StatusNotFound)
	owner.Post("/portal/members/"+other.ID.String(), op.CSRF(t), url.Values{"role": {"Member"}}).Want(t, http.StatusNotFound)
	owner.Post("/portal/members/"+other.ID.String()+"/remove", op.CSRF(t), nil).Want(t, http.StatusNotFound)
	owner.Get("/portal/members/not-a-uuid").Want(t, http.StatusNotFound)
	owner.Get("/portal/audit").Has(t, "member removed", "role and permissions changed", "signed in")
}
