package api_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
)

// The access token is an RFC 9068 JWT signed with a key published at
// /.well-known/jwks.json.
func TestAccessTokenClaimsAndJWKS(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	key := newKey(t, env, seed.Merchant.OrganizationID, auth.LocationsView, auth.AccountsView)
	before := env.Clock.Now().Truncate(time.Second)
	token := env.Token(key.KeyID, key.Secret)

	resp := env.Do(apitest.Request{Method: "GET", Path: "/.well-known/jwks.json"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /.well-known/jwks.json: %d %s", resp.StatusCode, resp.Body)
	}
	set, err := jwk.Parse(resp.Body)
	if err != nil {
		t.Fatalf("JWKS does not parse: %v\n%s", err, resp.Body)
	}

	msg, err := jws.Parse([]byte(token))
	if err != nil || len(msg.Signatures()) != 1 {
		t.Fatalf("token is not a compact JWS with one signature: %v", err)
	}
	hdr := msg.Signatures()[0].ProtectedHeaders()
	if hdr.Algorithm() != jwa.EdDSA || hdr.Type() != "at+jwt" || hdr.KeyID() == "" {
		t.Errorf("header alg %q typ %q kid %q, want EdDSA, at+jwt and a kid", hdr.Algorithm(), hdr.Type(), hdr.KeyID())
	}
	pub, ok := set.LookupKeyID(hdr.KeyID())
	if !ok {
		t.Fatalf("kid %q is not in the JWKS: %s", hdr.KeyID(), resp.Body)
	}
	payload, err := jws.Verify([]byte(token), jws.WithKey(jwa.EdDSA, pub))
	if err != nil {
		t.Fatalf("signature does not verify with the JWKS key: %v", err)
	}

	var claims struct {
		Iss      string `json:"iss"`
		Aud      any    `json:"aud"`
		Sub      string `json:"sub"`
		ClientID string `json:"client_id"`
		Org      string `json:"org"`
		Scope    string `json:"scope"`
		Iat      int64  `json:"iat"`
		Exp      int64  `json:"exp"`
		Jti      string `json:"jti"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	aud := claims.Aud
	if list, ok := aud.([]any); ok && len(list) == 1 {
		aud = list[0]
	}
	checks := []struct {
		claim     string
		got, want any
	}{
		{"iss", claims.Iss, env.App.Config.PublicURL},
		{"aud", aud, "payreq-api"},
		{"sub", claims.Sub, key.KeyID},
		{"client_id", claims.ClientID, key.KeyID},
		{"org", claims.Org, seed.Merchant.OrganizationID.String()},
		{"scope", claims.Scope, "accounts.view locations.view"},
		{"iat", claims.Iat, before.Unix()},
		{"exp", claims.Exp, claims.Iat + 600},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("claim %s = %v, want %v", c.claim, c.got, c.want)
		}
	}
	if claims.Jti == "" {
		t.Error("claim jti is missing")
	}
	if again := env.Token(key.KeyID, key.Secret); again == token {
		t.Error("two token requests gave the same token; jti must differ")
	}
}

// A token works until its exp; after that it gets 401 "Access token expired".
func TestAccessTokenExpiry(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)

	env.Clock.Advance(599 * time.Second)
	if resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token}); resp.StatusCode != http.StatusOK {
		t.Fatalf("599 s after issue: %d %s", resp.StatusCode, resp.Body)
	}
	env.Clock.Advance(2 * time.Second)
	resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token})
	wantProblem(t, resp, http.StatusUnauthorized, "Access token expired")
	wantBearerChallenge(t, resp)
	if h := resp.Header.Get("WWW-Authenticate"); !strings.Contains(h, `error="invalid_token"`) {
		t.Errorf("WWW-Authenticate %q, want error=\"invalid_token\"", h)
	}
}

// Anything but an intact token of this deployment is refused with 401.
func TestBearerTokenRefused(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	other := env.Seed()
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a compact JWS", token)
	}
	header, payload := decodeSegment(t, parts[0]), decodeSegment(t, parts[1])

	// One character of the payload changed.
	flipped := []byte(parts[1])
	mid := len(flipped) / 2
	if flipped[mid] == 'A' {
		flipped[mid] = 'B'
	} else {
		flipped[mid] = 'A'
	}
	// The org claim swapped for another organization's, signature kept.
	otherOrg := map[string]any{}
	for k, v := range payload {
		otherOrg[k] = v
	}
	otherOrg["org"] = other.Merchant.OrganizationID.String()
	// alg none with the same claims and no signature.
	none := map[string]any{}
	for k, v := range header {
		none[k] = v
	}
	none["alg"] = "none"
	// A token of another deployment (its own signing key).
	foreign := apitest.New(t, testDSN, apitest.Options{})
	foreignSeed := foreign.Seed()
	foreignToken := foreign.Token(foreignSeed.Merchant.KeyID, foreignSeed.Merchant.Secret)

	cases := []struct {
		name          string
		authorization string // "" sends no Authorization header
		title         string
	}{
		{"no header", "", "Missing access token"},
		{"empty bearer", "Bearer ", "Missing access token"},
		{"basic instead of bearer", "Basic " + base64.StdEncoding.EncodeToString([]byte(seed.Merchant.KeyID+":"+seed.Merchant.Secret)), "Missing access token"},
		{"not a JWT", "Bearer not-a-token", "Invalid access token"},
		{"payload character flipped", "Bearer " + parts[0] + "." + string(flipped) + "." + parts[2], "Invalid access token"},
		{"org claim changed", "Bearer " + parts[0] + "." + encodeSegment(t, otherOrg) + "." + parts[2], "Invalid access token"},
		{"signature removed", "Bearer " + parts[0] + "." + parts[1] + ".", "Invalid access token"},
		{"alg none", "Bearer " + encodeSegment(t, none) + "." + parts[1] + ".", "Invalid access token"},
		{"signed by another deployment", "Bearer " + foreignToken, "Invalid access token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := apitest.Request{Method: "GET", Path: "/locations"}
			if tc.authorization != "" {
				req.Header = http.Header{"Authorization": {tc.authorization}}
			}
			resp := env.Do(req)
			wantProblem(t, resp, http.StatusUnauthorized, tc.title)
			wantBearerChallenge(t, resp)
		})
	}
	// The intact token still works: the refusals above are about the changes.
	if resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token}); resp.StatusCode != http.StatusOK {
		t.Errorf("intact token: %d %s", resp.StatusCode, resp.Body)
	}
}

func decodeSegment(t *testing.T, s string) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("segment %q: %v", s, err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("segment %s: %v", raw, err)
	}
	return m
}

func encodeSegment(t *testing.T, m map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}
