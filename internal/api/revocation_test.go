package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
)

const checkInterval = 20 * time.Second

func withCheckInterval(c *config.Config) { c.RevocationCheckInterval = checkInterval }

func getLocations(env *apitest.Env, token string) *apitest.Response {
	return env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token})
}

// A revoked key gets no new token at once; its tokens keep working until
// the revocation check interval has passed, then get 401 "API key revoked".
func TestRevokedKey(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: withCheckInterval})
	seed := env.Seed()
	key := env.NewKey(t, seed.Merchant.OrganizationID, auth.LocationsView)
	token := env.Token(key.KeyID, key.Secret)
	if resp := getLocations(env, token); resp.StatusCode != http.StatusOK {
		t.Fatalf("before revocation: %d %s", resp.StatusCode, resp.Body)
	}

	if _, err := env.App.Auth.RevokeKey(context.Background(), nil, key.OrganizationID, key.KeyID); err != nil {
		t.Fatal(err)
	}
	resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: formBody("client_credentials", key.KeyID, key.Secret), Header: formHeader})
	if resp.StatusCode != http.StatusUnauthorized || tokenError(t, resp).Error != "invalid_client" {
		t.Fatalf("new token for a revoked key: %d %s, want 401 invalid_client", resp.StatusCode, resp.Body)
	}

	env.Clock.Advance(checkInterval - time.Second)
	if resp := getLocations(env, token); resp.StatusCode != http.StatusOK {
		t.Fatalf("within the check interval: %d %s", resp.StatusCode, resp.Body)
	}
	env.Clock.Advance(2 * time.Second)
	resp = getLocations(env, token)
	apitest.WantProblem(t, resp, http.StatusUnauthorized, "API key revoked")
	wantBearerChallenge(t, resp)

	// Another key of the organization is not affected.
	if resp := getLocations(env, env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)); resp.StatusCode != http.StatusOK {
		t.Errorf("another key of the organization: %d %s", resp.StatusCode, resp.Body)
	}
}

// A suspended organization gets no token; its tokens get 403 "Organization
// suspended" after the check interval; reinstated, it works again.
func TestSuspendedOrganization(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: withCheckInterval})
	ctx := context.Background()
	seed := env.Seed()
	org := seed.Merchant.OrganizationID
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)
	if resp := getLocations(env, token); resp.StatusCode != http.StatusOK {
		t.Fatalf("before suspension: %d %s", resp.StatusCode, resp.Body)
	}

	if err := env.App.Directory.SetOrganizationStatus(ctx, org, "suspended"); err != nil {
		t.Fatal(err)
	}
	resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: formBody("client_credentials", seed.Merchant.KeyID, seed.Merchant.Secret), Header: formHeader})
	if resp.StatusCode != http.StatusUnauthorized || tokenError(t, resp).Error != "invalid_client" {
		t.Fatalf("new token for a suspended organization: %d %s, want 401 invalid_client", resp.StatusCode, resp.Body)
	}
	if resp := getLocations(env, token); resp.StatusCode != http.StatusOK {
		t.Fatalf("within the check interval: %d %s", resp.StatusCode, resp.Body)
	}
	env.Clock.Advance(checkInterval + time.Second)
	apitest.WantProblem(t, getLocations(env, token), http.StatusForbidden, "Organization suspended")

	if err := env.App.Directory.SetOrganizationStatus(ctx, org, "active"); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(checkInterval + time.Second)
	if resp := getLocations(env, token); resp.StatusCode != http.StatusOK {
		t.Errorf("reinstated, the issued token: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := getLocations(env, env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)); resp.StatusCode != http.StatusOK {
		t.Errorf("reinstated, a new token: %d %s", resp.StatusCode, resp.Body)
	}
}

// Two instances of one deployment: a key revoked through one is refused by
// the other within the check interval.
func TestRevocationSharedAcrossInstances(t *testing.T) {
	dataDir, clock := t.TempDir(), apitest.NewClock(time.Now())
	opts := apitest.Options{DataDir: dataDir, Clock: clock, Configure: func(c *config.Config) {
		withCheckInterval(c)
		c.PublicURL = "http://payreq.test" // one deployment: one issuer
	}}
	one := apitest.New(t, testDSN, opts)
	two := apitest.New(t, testDSN, opts)
	seed := one.Seed()
	key := one.NewKey(t, seed.Merchant.OrganizationID, auth.LocationsView)
	token := one.Token(key.KeyID, key.Secret)
	for _, env := range []*apitest.Env{one, two} {
		if resp := getLocations(env, token); resp.StatusCode != http.StatusOK {
			t.Fatalf("before revocation: %d %s", resp.StatusCode, resp.Body)
		}
	}

	if _, err := one.App.Auth.RevokeKey(context.Background(), nil, key.OrganizationID, key.KeyID); err != nil {
		t.Fatal(err)
	}
	resp := two.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: formBody("client_credentials", key.KeyID, key.Secret), Header: formHeader})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("new token from the other instance: %d %s, want 401", resp.StatusCode, resp.Body)
	}
	clock.Advance(checkInterval + time.Second)
	for i, env := range []*apitest.Env{one, two} {
		resp := getLocations(env, token)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("instance %d after the interval: %d %s, want 401", i+1, resp.StatusCode, resp.Body)
		}
		apitest.WantProblem(t, resp, http.StatusUnauthorized, "API key revoked")
	}
}
