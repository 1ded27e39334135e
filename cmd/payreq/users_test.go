package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/portaltest"
)

// payreq users create invites: --json prints the invitation's URL, which
// opens the portal's page to choose a password. payreq users remove ends
// a membership, refusing the last Owner (exit 2); the keys the removed
// member made keep working.
func TestUsersCreateInvitesAndUsersRemoveKeepsKeys(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var org struct{ ID string }
	c.jsonOf(&org, "orgs", "create", "--kind", "merchant", "--name", "Larch Lumber", "--json")
	var first struct {
		ID, Email, Role, InvitationURL string
		Permissions                    []string
	}
	c.jsonOf(&first, "users", "create", "--org", org.ID, "--name", "Lee Larch", "--email", "lee@larch.example.com", "--role", "Owner", "--json")
	if !strings.Contains(first.InvitationURL, "/portal/invitations/") || first.Role != "Owner" || len(first.Permissions) == 0 {
		t.Fatalf("users create --json: %+v", first)
	}
	env := apitest.New(t, testDSN, apitest.Options{DataDir: c.dataDir})
	accept := func(invitation string) {
		t.Helper()
		u, err := url.Parse(invitation)
		if err != nil {
			t.Fatal(err)
		}
		b := portaltest.NewClient(t, env)
		page := b.Get(u.Path).Want(t, http.StatusOK)
		b.Post(u.Path, page.CSRF(t), url.Values{"name": {"Lee Larch"}, "password": {"larch trees grow tall"}}).WantRedirect(t, "/portal/")
	}
	accept(first.InvitationURL)

	var key struct{ KeyID, Secret string }
	c.jsonOf(&key, "keys", "create", "--org", org.ID, "--name", "Mill", "--permissions", "accounts.view", "--json")

	if line := c.usage("users", "remove", "--org", org.ID, "--email", "lee@larch.example.com"); !strings.Contains(line, "Owner") {
		t.Errorf("removing the last Owner: %q, want it to say an Owner stays", line)
	}
	c.usage("users", "remove", "--org", org.ID, "--email", "nobody@larch.example.com")
	c.usage("users", "remove", "--org", org.ID)
	var second struct{ InvitationURL string }
	c.jsonOf(&second, "users", "create", "--org", org.ID, "--name", "Kim", "--email", "kim@larch.example.com", "--role", "Owner", "--json")
	accept(second.InvitationURL)
	if out := c.ok("users", "remove", "--org", org.ID, "--email", "LEE@larch.example.com"); !strings.Contains(out, "keep working") {
		t.Errorf("users remove printed %q", out)
	}
	tok := env.Token(key.KeyID, key.Secret)
	apitest.Want(t, "the removed Owner's key", env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: tok}).StatusCode, http.StatusOK)
	if out := c.ok("users", "remove", "--help"); !strings.Contains(out, "last Owner") {
		t.Errorf("users remove --help: %q", out)
	}
}
