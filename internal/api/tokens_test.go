package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
)

// Each way of sending the credentials gets the same token answer, and the
// token works.
func TestTokenGrantForms(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	key := env.NewKey(t, seed.Merchant.OrganizationID, auth.PaymentsView, auth.LocationsView)

	cases := []struct {
		name   string
		body   any
		header http.Header
	}{
		{"form", formBody("client_credentials", key.KeyID, key.Secret), formHeader},
		{"json", map[string]string{"grant_type": "client_credentials", "client_id": key.KeyID, "client_secret": key.Secret}, nil},
		{"basic", "grant_type=client_credentials", basicHeader(key.KeyID, key.Secret)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: tc.body, Header: tc.header})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			var tok models.TokenResponse
			resp.JSON(t, &tok)
			apitest.Want(t, "token_type", tok.TokenType, "Bearer")
			apitest.Want(t, "expires_in", tok.ExpiresIn, 600)
			apitest.Want(t, "organization_id", tok.OrganizationId, seed.Merchant.OrganizationID)
			scope := strings.Fields(tok.Scope)
			slices.Sort(scope)
			if !slices.Equal(scope, []string{auth.LocationsView, auth.PaymentsView}) {
				t.Errorf("scope %q, want the key's permissions locations.view and payments.view", tok.Scope)
			}
			if r := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: tok.AccessToken}); r.StatusCode != http.StatusOK {
				t.Errorf("GET /locations with the new token: %d %s", r.StatusCode, r.Body)
			}
		})
	}
}

func TestTokenErrors(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	ctx := context.Background()
	seed := env.Seed()
	good := env.NewKey(t, seed.Merchant.OrganizationID, auth.LocationsView)
	revoked := env.NewKey(t, seed.Merchant.OrganizationID, auth.LocationsView)
	if _, err := env.App.Auth.RevokeKey(ctx, nil, revoked.OrganizationID, revoked.KeyID); err != nil {
		t.Fatal(err)
	}
	other := env.Seed()
	suspended := env.NewKey(t, other.Merchant.OrganizationID, auth.LocationsView)
	if err := env.App.Directory.SetOrganizationStatus(ctx, other.Merchant.OrganizationID, "suspended"); err != nil {
		t.Fatal(err)
	}
	const unknownID = "mk_000000000000000000000000"
	wrongSecret := "ms_" + strings.Repeat("x", 40)
	jsonBody := func(grant, id, secret string) map[string]string {
		m := map[string]string{}
		for k, v := range map[string]string{"grant_type": grant, "client_id": id, "client_secret": secret} {
			if v != "" {
				m[k] = v
			}
		}
		return m
	}

	cases := []struct {
		name      string
		body      any
		header    http.Header
		status    int
		code      models.TokenErrorError
		challenge string // WWW-Authenticate wanted; "" wants none
	}{
		{"unknown key", jsonBody("client_credentials", unknownID, wrongSecret), nil, 401, "invalid_client", ""},
		{"wrong secret", jsonBody("client_credentials", good.KeyID, wrongSecret), nil, 401, "invalid_client", ""},
		{"wrong secret, form", formBody("client_credentials", good.KeyID, wrongSecret), formHeader, 401, "invalid_client", ""},
		{"revoked key", jsonBody("client_credentials", revoked.KeyID, revoked.Secret), nil, 401, "invalid_client", ""},
		{"suspended organization", jsonBody("client_credentials", suspended.KeyID, suspended.Secret), nil, 401, "invalid_client", ""},
		{"basic, wrong secret", "grant_type=client_credentials", basicHeader(good.KeyID, wrongSecret), 401, "invalid_client", `Basic realm="payreq"`},
		{"basic, unknown key", "grant_type=client_credentials", basicHeader(unknownID, good.Secret), 401, "invalid_client", `Basic realm="payreq"`},
		{"missing grant_type", jsonBody("", good.KeyID, good.Secret), nil, 400, "invalid_request", ""},
		{"password grant", jsonBody("password", good.KeyID, good.Secret), nil, 400, "unsupported_grant_type", ""},
		{"authorization_code grant, form", formBody("authorization_code", good.KeyID, good.Secret), formHeader, 400, "unsupported_grant_type", ""},
		{"missing client_id", jsonBody("client_credentials", "", good.Secret), nil, 400, "invalid_request", ""},
		{"missing client_secret", jsonBody("client_credentials", good.KeyID, ""), nil, 400, "invalid_request", ""},
		{"missing both, form", formBody("client_credentials", "", ""), formHeader, 400, "invalid_request", ""},
		{"basic and body credentials", formBody("client_credentials", good.KeyID, good.Secret), basicHeader(good.KeyID, good.Secret), 400, "invalid_request", ""},
		{"body is not JSON", `{"grant_type":`, nil, 400, "invalid_request", ""},
		{"text/plain", "grant_type=client_credentials", http.Header{"Content-Type": {"text/plain"}}, 415, "invalid_request", ""},
		{"body over 1 MiB", strings.Repeat("a", 1<<20+1), formHeader, 413, "invalid_request", ""},
	}
	descriptions := map[int]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: tc.body, Header: tc.header})
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, resp.Body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			e := tokenError(t, resp)
			if e.Error != tc.code || e.ErrorDescription == "" {
				t.Errorf("error %q (%q), want %q with a description", e.Error, e.ErrorDescription, tc.code)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if tc.status == 401 {
				// Every invalid_client reads the same, so callers cannot
				// probe which key ids exist or which are revoked.
				if d, ok := descriptions[401]; ok && d != e.ErrorDescription {
					t.Errorf("invalid_client descriptions differ: %q and %q", d, e.ErrorDescription)
				}
				descriptions[401] = e.ErrorDescription
			}
		})
	}
}

// The 31st token request in a minute from one address is refused; others'
// addresses are not affected; the next minute it works again.
func TestTokenRateLimit(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	// An address of its own (not the Env's), unused by other tests and by
	// earlier runs of this one (go test -count).
	limited := apitest.ClientFrom(apitest.SourceAddress())
	n := 0
	request := func(client *http.Client) *apitest.Response {
		// No proxy is trusted, so a forged X-Forwarded-For changes nothing.
		n++
		h := formHeader.Clone()
		h.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", n))
		return env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Client: client,
			Body: formBody("client_credentials", seed.Merchant.KeyID, seed.Merchant.Secret), Header: h})
	}
	for i := 1; i <= auth.TokenRequestsPerMinute; i++ {
		if resp := request(limited); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	resp := request(limited)
	wantTooManyTokenRequests(t, resp)

	if resp := request(env.Client); resp.StatusCode != http.StatusOK {
		t.Errorf("another address was refused too: %d %s", resp.StatusCode, resp.Body)
	}
	env.Clock.Advance(time.Minute)
	if resp := request(limited); resp.StatusCode != http.StatusOK {
		t.Errorf("a minute later: %d %s", resp.StatusCode, resp.Body)
	}
}

// Behind a trusted proxy the client address is the one X-Forwarded-For names.
func TestTokenRateLimitBehindTrustedProxy(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) {
		_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
		c.TrustedProxies = []*net.IPNet{loopback}
	}})
	seed := env.Seed()
	client, neighbour := apitest.SourceAddress(), apitest.SourceAddress() // as the proxy reports them
	request := func(clientAddress string) *apitest.Response {
		h := formHeader.Clone()
		h.Set("X-Forwarded-For", clientAddress)
		return env.Do(apitest.Request{Method: "POST", Path: "/oauth/token",
			Body: formBody("client_credentials", seed.Merchant.KeyID, seed.Merchant.Secret), Header: h})
	}
	for i := 1; i <= auth.TokenRequestsPerMinute; i++ {
		if resp := request(client); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	wantTooManyTokenRequests(t, request(client))
	if resp := request(neighbour); resp.StatusCode != http.StatusOK {
		t.Errorf("another client behind the same proxy: %d %s", resp.StatusCode, resp.Body)
	}
}

// Two instances of one deployment count token requests together.
func TestTokenRateLimitSharedAcrossInstances(t *testing.T) {
	dataDir, clock := t.TempDir(), apitest.NewClock(time.Now())
	one := apitest.New(t, testDSN, apitest.Options{DataDir: dataDir, Clock: clock})
	two := apitest.New(t, testDSN, apitest.Options{DataDir: dataDir, Clock: clock})
	seed := one.Seed()
	client := apitest.ClientFrom(apitest.SourceAddress())
	request := func(env *apitest.Env) *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Client: client,
			Body: formBody("client_credentials", seed.Merchant.KeyID, seed.Merchant.Secret), Header: formHeader})
	}
	for i := 1; i <= 15; i++ {
		if resp := request(one); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d on the first instance: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	for i := 16; i <= auth.TokenRequestsPerMinute; i++ {
		if resp := request(two); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d on the second instance: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	wantTooManyTokenRequests(t, request(two))
	wantTooManyTokenRequests(t, request(one))
}

func wantTooManyTokenRequests(t *testing.T, resp *apitest.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", resp.StatusCode, resp.Body)
	}
	if e := tokenError(t, resp); e.Error != "too_many_requests" {
		t.Errorf("error %q, want too_many_requests", e.Error)
	}
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 60 {
		t.Errorf("Retry-After %q, want 1 to 60 seconds", resp.Header.Get("Retry-After"))
	}
}

// An address over its token limit is refused from memory until its window
// ends: nothing more is written, and the refusal needs no database (here a
// table lock that would hold any write).
func TestTokenLimitRefusedFromMemory(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) { c.RequestTimeout = time.Second }})
	seed := env.Seed()
	address := apitest.SourceAddress()
	limited := apitest.ClientFrom(address)
	request := func() *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Client: limited,
			Body: formBody("client_credentials", seed.Merchant.KeyID, seed.Merchant.Secret), Header: formHeader})
	}
	for i := 1; i <= auth.TokenRequestsPerMinute; i++ {
		if resp := request(); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	for range 20 {
		wantTooManyTokenRequests(t, request())
	}
	var counted int
	if err := env.App.DB.Get(&counted, `SELECT coalesce(sum(requests), 0) FROM token_requests WHERE address = $1`, address); err != nil {
		t.Fatal(err)
	}
	if counted != auth.TokenRequestsPerMinute {
		t.Errorf("%d requests written for the address, want %d: none past the limit", counted, auth.TokenRequestsPerMinute)
	}

	tx, err := env.App.DB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE token_requests IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	wantTooManyTokenRequests(t, request())
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	env.Clock.Advance(time.Minute)
	if resp := request(); resp.StatusCode != http.StatusOK {
		t.Errorf("once its window ended: %d %s", resp.StatusCode, resp.Body)
	}
}

// An IPv6 client is limited by its /64, which one subscriber holds whole:
// another address of the same /64 shares the limit, another /64 does not.
func TestTokenLimitPerIPv6Network(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) {
		_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
		c.TrustedProxies = []*net.IPNet{loopback}
	}})
	seed := env.Seed()
	network := fmt.Sprintf("2001:db8:%x:%x:", rand.Uint32N(1<<16), rand.Uint32N(1<<16)) // unused by earlier runs
	request := func(clientAddress string) *apitest.Response {
		h := formHeader.Clone()
		h.Set("X-Forwarded-For", clientAddress)
		return env.Do(apitest.Request{Method: "POST", Path: "/oauth/token",
			Body: formBody("client_credentials", seed.Merchant.KeyID, seed.Merchant.Secret), Header: h})
	}
	for i := 1; i <= auth.TokenRequestsPerMinute; i++ {
		if resp := request(network + ":" + strconv.Itoa(i)); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	wantTooManyTokenRequests(t, request(network+"ffff:ffff:ffff:ffff"))
	if resp := request(strings.Replace(network, "2001:db8:", "2001:db9:", 1) + ":1"); resp.StatusCode != http.StatusOK {
		t.Errorf("another /64: %d %s", resp.StatusCode, resp.Body)
	}
}

// Members the token endpoint does not know are ignored whatever they hold
// (RFC 6749 §3.2): a number no decimal of the service could be, in a JSON
// body as in a form. A known member that is not a string stays a 400.
func TestTokenIgnoresUnknownMembersWhateverTheyHold(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	key := env.NewKey(t, seed.Merchant.OrganizationID, auth.PaymentsView)
	creds := `"grant_type":"client_credentials","client_id":"` + key.KeyID + `","client_secret":"` + key.Secret + `"`
	for _, extra := range []string{
		`"n":1e400`,
		`"n":1.5e-106`,
		`"n":` + strings.Repeat("9", 45),
		`"n":-0.` + strings.Repeat("0", 60) + `1`,
		`"deep":{"list":[1e400,{"x":` + strings.Repeat("1", 50) + `}]}`,
	} {
		t.Run(extra, func(t *testing.T) {
			resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: "{" + creds + "," + extra + "}"})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
		})
	}
	resp := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Header: formHeader,
		Body: formBody("client_credentials", key.KeyID, key.Secret) + "&n=1e400"})
	apitest.Want(t, "form with n=1e400", resp.StatusCode, http.StatusOK)
	resp = env.Do(apitest.Request{Method: "POST", Path: "/oauth/token",
		Body: `{"grant_type":"client_credentials","client_id":"` + key.KeyID + `","client_secret":1e400}`})
	apitest.Want(t, "client_secret 1e400", resp.StatusCode, http.StatusBadRequest)
	apitest.Want(t, "its error", tokenError(t, resp).Error, models.TokenErrorErrorInvalidRequest)
}
