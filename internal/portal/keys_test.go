package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/demo"
	"github.com/payreq/payreq/internal/portaltest"
)

type apitestSeed = demo.Result

var (
	keyIDIn  = regexp.MustCompile(`id="key-id">(mk_[0-9A-Za-z]{24})<`)
	secretIn = regexp.MustCompile(`id="key-secret" data-copy="Copy the secret">(ms_[0-9A-Za-z]{40})<`)
)

// An Admin makes a key in the portal with some of its permissions: the
// secret is shown once; the key takes a token at /oauth/token carrying
// exactly those permissions; revoked, it takes no new token and its token
// is refused within the check interval, and it stays listed as revoked
// with its date.
func TestKeyMadeInThePortalWorksUntilRevoked(t *testing.T) {
	t.Parallel()
	env, seed := newOwnEnv(t)
	org := seed.Merchant.OrganizationID
	c, _ := portaltest.SignedIn(t, env, org, "Admin", auth.PaymentsView, auth.AccountsView, auth.LocationsView)

	keys := c.Get("/portal/keys").Want(t, http.StatusOK)
	// Offered only what the Admin holds.
	for _, p := range auth.PermissionsFor(auth.KindMerchant) {
		offered := strings.Contains(keys.Body, `value="`+p+`"`)
		if want := slices.Contains([]string{auth.PaymentsView, auth.AccountsView, auth.LocationsView}, p); offered != want {
			t.Errorf("%s offered: %v, want %v", p, offered, want)
		}
	}
	form := url.Values{"name": {"Billing sync"}, "permissions": {auth.AccountsView, auth.PaymentsView}, "idempotencyKey": {formKey(t, keys)}}
	made := c.Post("/portal/keys", keys.CSRF(t), form).Want(t, http.StatusCreated).Has(t, "shown only this once", "Billing sync", `<script src="/portal/assets/copy`)
	keyID, secret := keyIDIn.FindStringSubmatch(made.Body), secretIn.FindStringSubmatch(made.Body)
	if keyID == nil || secret == nil {
		t.Fatalf("the answer lacks the key id or the secret:\n%s", made.Body)
	}
	// The form sent again (a double click, a reload): no second key; the
	// answer names the first, without its secret, and offers to revoke it.
	twice := c.Post("/portal/keys", keys.CSRF(t), form).Want(t, http.StatusOK).
		Has(t, "sent more than once", keyID[1], `href="/portal/keys/`+keyID[1]+`/revoke"`)
	if strings.Contains(twice.Body, secret[1]) || secretIn.MatchString(twice.Body) {
		t.Fatalf("the form sent again shows a secret:\n%s", twice.Body)
	}
	if list, err := env.App.Auth.Keys(t.Context(), org); err != nil || len(list) != 2 { // the seed's key and this one
		t.Fatalf("keys after the form sent twice: %d, %v", len(list), err)
	}
	other := url.Values{"name": {"Edited"}, "permissions": {auth.AccountsView}, "idempotencyKey": form["idempotencyKey"]}
	c.Post("/portal/keys", keys.CSRF(t), other).Want(t, http.StatusUnprocessableEntity).Has(t, "already made a key with other values", `value="Edited"`)
	if again := c.Get("/portal/keys"); strings.Contains(again.Body, secret[1]) || !strings.Contains(again.Body, keyID[1]) {
		t.Fatalf("the list shows the secret again, or lacks the key:\n%s", again.Body)
	}

	resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: map[string]string{
		"grant_type": "client_credentials", "client_id": keyID[1], "client_secret": secret[1]}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %s", resp.StatusCode, resp.Body)
	}
	var tok models.TokenResponse
	resp.JSON(t, &tok)
	if tok.Scope != "accounts.view payments.view" {
		t.Errorf("scope %q, want exactly the key's permissions", tok.Scope)
	}
	apitest.Want(t, "GET /accounts", env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: tok.AccessToken}).StatusCode, http.StatusOK)
	apitest.Want(t, "GET /locations (not given)", env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: tok.AccessToken}).StatusCode, http.StatusForbidden)

	listed := c.Get("/portal/keys").Has(t, "Billing sync", keyID[1], "Last used", "Active")
	if !regexp.MustCompile(`<time datetime="\d{4}-\d\d-\d\dT`).MatchString(listed.Body) {
		t.Errorf("no <time datetime> in the list:\n%s", listed.Body)
	}
	confirm := c.Get("/portal/keys/"+keyID[1]+"/revoke").Want(t, http.StatusOK).Has(t, "Revoke the key")
	c.Post("/portal/keys/"+keyID[1]+"/revoke", confirm.CSRF(t), nil).WantRedirect(t, "/portal/keys?done=revoked")

	again := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: map[string]string{
		"grant_type": "client_credentials", "client_id": keyID[1], "client_secret": secret[1]}})
	apitest.Want(t, "token after revocation", again.StatusCode, http.StatusUnauthorized)
	env.Clock.Advance(env.App.Config.RevocationCheckInterval + time.Second)
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: tok.AccessToken}), http.StatusUnauthorized, "API key revoked")
	c.Get("/portal/keys").Has(t, keyID[1], "Revoked <time datetime=")
	c.Get("/portal/audit").Has(t, "API key created", "API key revoked", keyID[1])
}

// What a key may not be given is refused with 403 and nothing is made; a
// bad name is a 400 beside the field, the other values kept; a Member
// makes no key; another organization's key is a 404.
func TestKeyRefusals(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	org := seed.Merchant.OrganizationID
	admin, _ := portaltest.SignedIn(t, env, org, "Admin", auth.PaymentsView)
	count := func() int {
		keys, err := env.App.Auth.Keys(t.Context(), org)
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	before := count()
	page := admin.Get("/portal/keys")
	key := formKey(t, page)
	for _, perms := range [][]string{{auth.PaymentsCreate}, {auth.PortfolioView}, {auth.PaymentsView, "payments.everything"}} {
		admin.Post("/portal/keys", page.CSRF(t), url.Values{"name": {"Too much"}, "permissions": perms, "idempotencyKey": {key}}).
			Want(t, http.StatusForbidden)
	}
	bad := admin.Post("/portal/keys", page.CSRF(t), url.Values{"name": {strings.Repeat("n", 65)}, "permissions": {auth.PaymentsView},
		"idempotencyKey": {key}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "name", "1 to 64")
	if !strings.Contains(bad.Body, `value="`+auth.PaymentsView+`" checked`) {
		t.Errorf("the permissions chosen were not kept:\n%s", bad.Body)
	}
	admin.Post("/portal/keys", page.CSRF(t), url.Values{"name": {"None"}, "idempotencyKey": {key}}).Want(t, http.StatusBadRequest).
		ErrorBeside(t, "permissions", "at least one")
	admin.Post("/portal/keys", page.CSRF(t), url.Values{"name": {"No key"}, "permissions": {auth.PaymentsView}}).
		Want(t, http.StatusBadRequest).Has(t, "This form is incomplete", `value="No key"`)
	// No CSRF token, a wrong one, another origin: 403.
	admin.Do("POST", "/portal/keys", url.Values{"name": {"Forged"}, "permissions": {auth.PaymentsView}}, nil).Want(t, http.StatusForbidden)
	admin.Post("/portal/keys", "forged", url.Values{"name": {"Forged"}, "permissions": {auth.PaymentsView}}).Want(t, http.StatusForbidden)
	admin.Do("POST", "/portal/keys", url.Values{"csrf": {page.CSRF(t)}, "name": {"Forged"}, "permissions": {auth.PaymentsView}},
		http.Header{"Origin": {"https://evil.example.com"}}).Want(t, http.StatusForbidden)
	admin.Do("POST", "/portal/keys", url.Values{"csrf": {page.CSRF(t)}, "name": {"Forged"}, "permissions": {auth.PaymentsView}},
		http.Header{"Sec-Fetch-Site": {"cross-site"}}).Want(t, http.StatusForbidden)
	if n := count(); n != before {
		t.Fatalf("%d keys made by refused requests", n-before)
	}

	member, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	member.Get("/portal/keys").Want(t, http.StatusForbidden)
	home := member.Get("/portal/").Want(t, http.StatusOK)
	if strings.Contains(home.Body, `href="/portal/keys"`) || strings.Contains(home.Body, `href="/portal/members"`) {
		t.Errorf("a Member is shown links to keys or members:\n%s", home.Body)
	}
	member.Post("/portal/keys", home.CSRF(t), url.Values{"name": {"Mine"}, "permissions": {auth.PaymentsView}}).Want(t, http.StatusForbidden)

	otherKey := env.NewKey(t, seed.Reseller.OrganizationID, auth.PortfolioView)
	admin.Get("/portal/keys/"+otherKey.KeyID+"/revoke").Want(t, http.StatusNotFound)
	admin.Post("/portal/keys/"+otherKey.KeyID+"/revoke", page.CSRF(t), nil).Want(t, http.StatusNotFound)
	admin.Post("/portal/keys/not-a-key/revoke", page.CSRF(t), nil).Want(t, http.StatusNotFound)
	if k, err := env.App.Auth.Key(t.Context(), otherKey.KeyID); err != nil || k.RevokedAt != nil {
		t.Fatalf("another organization's key was revoked: %v %v", k.RevokedAt, err)
	}
	if n := count(); n != before {
		t.Fatalf("%d keys made by refused requests", n-before)
	}
}
