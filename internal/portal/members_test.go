package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// An Owner invites by email; the invitation's link asks a new person for
// a name and a password and signs them in; a person who has a sign-in
// (in another organization) signs in the ordinary way to accept and then
// chooses between organizations. A used link is a 404.
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
	acceptInvitationBySigningIn(t, env, link, seed.Reseller.OrganizationID, "new.person@example.com", "a long enough password", owner)
	again := portaltest.NewClient(t, env)
	again.SignIn("new.person@example.com", "a long enough password").WantRedirect(t, "/portal/organizations")
	orgs := again.Get("/portal/organizations").Want(t, http.StatusOK)
	orgs.Has(t, "/portal/organizations/"+seed.Reseller.OrganizationID.String()+"/switch")
	again.Post("/portal/organizations/"+seed.Reseller.OrganizationID.String()+"/switch", orgs.CSRF(t), nil).WantRedirect(t, "/portal/")
	members = again.Get("/portal/members").Want(t, http.StatusOK) // an Admin of the reseller
	again.Post("/portal/organizations/"+seed.Merchant.OrganizationID.String()+"/switch", members.CSRF(t), nil).Want(t, http.StatusSeeOther)
	orgs = again.Get("/portal/organizations")
	again.Post("/portal/organizations/00000000-0000-0000-0000-000000000000/switch", orgs.CSRF(t), nil).Want(t, http.StatusNotFound)
}

// Owners and Admins change roles and permissions and remove members;
// Admins neither make nor touch Owners; the last Owner stays (422); a
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
	owner.Post("/portal/members/"+ownerM.MembershipID.String()+"/remove", op.CSRF(t), nil).Want(t, http.StatusUnprocessableEntity)
	owner.Post("/portal/members/"+ownerM.MembershipID.String(), op.CSRF(t), url.Values{"role": {"Member"}}).Want(t, http.StatusUnprocessableEntity)

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

// acceptInvitationBySigningIn takes the invitation at link for email, a
// person with a sign-in: the link sends to the ordinary sign-in and back
// (a wrong password there is a failed sign-in like any), and the page
// then asks only to accept; other, signed in as someone else, is told so
// and cannot take it. Nothing checks a password on the invitation itself.
func acceptInvitationBySigningIn(t *testing.T, env *apitest.Env, link string, org uuid.UUID, email, password string, other *portaltest.Client) {
	t.Helper()
	accepted := func() bool {
		var used bool
		if err := env.App.DB.Get(&used, `SELECT m.accepted_at IS NOT NULL FROM memberships m JOIN people p ON p.id = m.person_id
			WHERE lower(p.email) = lower($1) AND m.organization_id = $2 AND m.removed_at IS NULL`, email, org); err != nil {
			t.Fatal(err)
		}
		return used
	}
	failures := func() int {
		var n int
		if err := env.App.DB.Get(&n, `SELECT count(*) FROM sign_in_failures WHERE email = lower($1)`, email); err != nil {
			t.Fatal(err)
		}
		return n
	}
	signIn := "/portal/sign-in?next=" + url.QueryEscape(link)
	c := portaltest.NewClient(t, env)
	c.Get(link).WantRedirect(t, signIn)
	// A password posted to the invitation is not looked at.
	c.Post(link, c.Get(signIn).CSRF(t), url.Values{"password": {password}}).WantRedirect(t, signIn)
	if accepted() {
		t.Fatal("a password posted to the invitation accepted it")
	}
	form := c.Get(signIn).Want(t, http.StatusOK).Has(t, `name="next" value="`+link+`"`)
	before := failures()
	c.Post("/portal/sign-in", form.CSRF(t), url.Values{"email": {email}, "password": {"a wrong password here"}, "next": {link}}).
		Want(t, http.StatusUnauthorized).Has(t, `name="next" value="`+link+`"`)
	if failures() != before+1 {
		t.Errorf("a wrong password on the way to the invitation: %d failures, want %d", failures(), before+1)
	}
	c.Post("/portal/sign-in", form.CSRF(t), url.Values{"email": {email}, "password": {password}, "next": {link}}).WantRedirect(t, link)
	page := c.Get(link).Want(t, http.StatusOK).Has(t, "Accept the invitation", "You are signed in as")
	if strings.Contains(page.Body, `type="password"`) {
		t.Errorf("the invitation asks a signed-in person for a password:\n%s", page.Body)
	}

	// Signed in as someone else: told whom it is for, refused, unchanged.
	theirs := other.Get(link).Want(t, http.StatusOK).Has(t, "This invitation is for", "Sign out")
	other.Post(link, theirs.CSRF(t), nil).Want(t, http.StatusForbidden).Has(t, "you are signed in as")
	if accepted() {
		t.Fatal("another person accepted the invitation")
	}

	c.Post(link, page.CSRF(t), nil).WantRedirect(t, "/portal/")
	if !accepted() {
		t.Fatal("the invitation was not accepted")
	}
	c.Get(link).Want(t, http.StatusNotFound)
}

// A person with a second factor invited to another organization signs in
// in both steps on the way (the invitation kept across them), then accepts.
func TestInvitationThroughBothSteps(t *testing.T) {
	t.Parallel()
	env, seed := newOwnEnv(t)
	c, m := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Owner", auth.PaymentsView)
	setup := c.Get("/portal/account/two-factor").Want(t, http.StatusOK)
	secret := between(setup.Body, `id="secret">`, "<")
	code := func() string {
		s, err := totp.GenerateCodeCustom(secret, env.Clock.Now(), totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c.Post("/portal/account/two-factor", setup.CSRF(t), url.Values{"code": {code()}}).Want(t, http.StatusOK)
	env.Clock.Advance(time.Minute)
	reseller, err := env.App.People.Owner(t.Context(), seed.Reseller.OrganizationID)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := env.App.People.Invite(t.Context(), people.Actor{Membership: &reseller}, seed.Reseller.OrganizationID,
		people.NewMember{Email: m.Email, Role: "Member", Permissions: []string{auth.PortfolioView}})
	if err != nil {
		t.Fatal(err)
	}
	link := strings.TrimPrefix(inv.InvitationURL, env.App.Config.PublicURL)
	b := portaltest.NewClient(t, env)
	b.Get(link).WantRedirect(t, "/portal/sign-in?next="+url.QueryEscape(link))
	form := b.Get("/portal/sign-in?next=" + url.QueryEscape(link))
	b.Post("/portal/sign-in", form.CSRF(t), url.Values{"email": {m.Email}, "password": {m.Password}, "next": {link}}).
		WantRedirect(t, "/portal/sign-in/two-factor?next="+url.QueryEscape(link))
	b.Get(link).WantRedirect(t, "/portal/sign-in?next="+url.QueryEscape(link)) // the second step first
	step := b.Get("/portal/sign-in/two-factor?next="+url.QueryEscape(link)).Has(t, `name="next" value="`+link+`"`)
	b.Post("/portal/sign-in/two-factor", step.CSRF(t), url.Values{"code": {code()}, "next": {link}}).WantRedirect(t, link)
	page := b.Get(link).Want(t, http.StatusOK)
	b.Post(link, page.CSRF(t), nil).WantRedirect(t, "/portal/")
	b.Get("/portal/portfolio").Want(t, http.StatusOK)
}
