package api_test

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
)

// The access token is an RFC 9068 JWT signed with a key published at
// /.well-known/jwks.json.
func TestAccessTokenClaimsAndJWKS(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	key := env.NewKey(t, seed.Merchant.OrganizationID, auth.LocationsView, auth.AccountsView)
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
	apitest.Want(t, "alg", hdr.Algorithm(), jwa.EdDSA)
	apitest.Want(t, "typ", hdr.Type(), "at+jwt")
	apitest.Want(t, "kid set", hdr.KeyID() != "", true)
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
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)

	env.Clock.Advance(599 * time.Second)
	if resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token}); resp.StatusCode != http.StatusOK {
		t.Fatalf("599 s after issue: %d %s", resp.StatusCode, resp.Body)
	}
	env.Clock.Advance(2 * time.Second)
	resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token})
	apitest.WantProblem(t, resp, http.StatusUnauthorized, "Access token expired")
	wantBearerChallenge(t, resp)
	if h := resp.Header.Get("WWW-Authenticate"); !strings.Contains(h, `error="invalid_token"`) {
		t.Errorf("WWW-Authenticate %q, want error=\"invalid_token\"", h)
	}
}

// Anything but an intact token of this deployment is refused with 401.
func TestBearerTokenRefused(t *testing.T) {
	t.Parallel()
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
			apitest.WantProblem(t, resp, http.StatusUnauthorized, tc.title)
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

// Tokens made by an attacker, or by payreq's own key but wrong in one
// claim or header, are refused with 401; the forging works, as the
// control case shows, so each refusal is about its one difference.
func TestForgedTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := apitest.New(t, testDSN, apitest.Options{DataDir: dir})
	seed := env.Seed()
	pemKey, err := os.ReadFile(filepath.Join(dir, "signing-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemKey)
	if block == nil {
		t.Fatal("signing key is not PEM")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	private := parsed.(ed25519.PrivateKey)
	public := private.Public().(ed25519.PublicKey)
	publicDER, err := x509.MarshalPKIXPublicKey(public)
	if err != nil {
		t.Fatal(err)
	}
	publicPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: publicDER})
	jwks := env.Do(apitest.Request{Method: "GET", Path: "/.well-known/jwks.json"}).Body
	set, err := jwk.Parse(jwks)
	if err != nil {
		t.Fatal(err)
	}
	published, _ := set.Key(0)
	kid := published.KeyID()
	publicJWK, err := json.Marshal(published)
	if err != nil {
		t.Fatal(err)
	}

	now := env.Clock.Now().Truncate(time.Second)
	claims := func(change func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": env.App.Config.PublicURL, "aud": []string{auth.Audience}, "sub": seed.Merchant.KeyID,
			"client_id": seed.Merchant.KeyID, "org": seed.Merchant.OrganizationID.String(), "scope": "locations.view",
			"iat": now.Unix(), "exp": now.Add(auth.TokenLifetime).Unix(), "jti": uuid.NewString(),
		}
		if change != nil {
			change(c)
		}
		return c
	}
	header := func(change func(map[string]any)) map[string]any {
		h := map[string]any{"alg": "EdDSA", "typ": "at+jwt", "kid": kid}
		if change != nil {
			change(h)
		}
		return h
	}
	// sign makes a compact JWS from a header and claims, signed by alg
	// under key: "EdDSA" with an Ed25519 key, "HS256" with bytes, "none".
	sign := func(h, c map[string]any, key any) string {
		input := encodeSegment(t, h) + "." + encodeSegment(t, c)
		var sig []byte
		switch k := key.(type) {
		case ed25519.PrivateKey:
			sig = ed25519.Sign(k, []byte(input))
		case []byte:
			m := hmac.New(sha256.New, k)
			m.Write([]byte(input))
			sig = m.Sum(nil)
		}
		return input + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	hs256 := func(h map[string]any) { h["alg"] = "HS256" }
	without := func(name string) func(map[string]any) { return func(m map[string]any) { delete(m, name) } }
	set1 := func(name string, v any) func(map[string]any) { return func(m map[string]any) { m[name] = v } }

	cases := []struct {
		name  string
		token string
		title string // "" means the token works
	}{
		{"control: every claim right", sign(header(nil), claims(nil), private), ""},
		{"alg none, no signature", sign(header(set1("alg", "none")), claims(nil), nil), "Invalid access token"},
		{"HS256 keyed with the raw public key", sign(header(hs256), claims(nil), []byte(public)), "Invalid access token"},
		{"HS256 keyed with the public key's PEM", sign(header(hs256), claims(nil), publicPEM), "Invalid access token"},
		{"HS256 keyed with the published JWK", sign(header(hs256), claims(nil), publicJWK), "Invalid access token"},
		{"HS256 keyed with the JWKS document", sign(header(hs256), claims(nil), jwks), "Invalid access token"},
		{"expired", sign(header(nil), claims(func(c map[string]any) {
			c["iat"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(-time.Second).Unix()
		}), private), "Access token expired"},
		{"no exp", sign(header(nil), claims(without("exp")), private), "Invalid access token"},
		{"no jti", sign(header(nil), claims(without("jti")), private), "Invalid access token"},
		{"wrong aud", sign(header(nil), claims(set1("aud", []string{"another-api"})), private), "Invalid access token"},
		{"no aud", sign(header(nil), claims(without("aud")), private), "Invalid access token"},
		{"wrong iss", sign(header(nil), claims(set1("iss", "https://payreq.attacker.example")), private), "Invalid access token"},
		{"no iss", sign(header(nil), claims(without("iss")), private), "Invalid access token"},
		{"not yet valid", sign(header(nil), claims(set1("nbf", now.Add(time.Hour).Unix())), private), "Invalid access token"},
		{"typ JWT", sign(header(set1("typ", "JWT")), claims(nil), private), "Invalid access token"},
		{"no typ", sign(header(without("typ")), claims(nil), private), "Invalid access token"},
		{"unknown kid", sign(header(set1("kid", "another-key")), claims(nil), private), "Invalid access token"},
		{"no kid", sign(header(without("kid")), claims(nil), private), "Invalid access token"},
		{"org not a uuid", sign(header(nil), claims(set1("org", "everyone")), private), "Invalid access token"},
		{"signed by another Ed25519 key", sign(header(nil), claims(nil), ed25519.NewKeyFromSeed(make([]byte, 32))), "Invalid access token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: tc.token})
			if tc.title == "" {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %s", resp.StatusCode, resp.Body)
				}
				return
			}
			apitest.WantProblem(t, resp, http.StatusUnauthorized, tc.title)
			wantBearerChallenge(t, resp)
		})
	}
}

// A token of a key whose row is deleted stops working (within the
// revocation check interval for a key already seen), and the key gets no
// new token.
func TestTokenOfDeletedKey(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	seen := env.NewKey(t, seed.Merchant.OrganizationID, auth.LocationsView)
	unseen := env.NewKey(t, seed.Merchant.OrganizationID, auth.LocationsView)
	seenToken, unseenToken := env.Token(seen.KeyID, seen.Secret), env.Token(unseen.KeyID, unseen.Secret)
	if resp := getLocations(env, seenToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("before the delete: %d %s", resp.StatusCode, resp.Body)
	}
	for _, id := range []string{seen.KeyID, unseen.KeyID} {
		if _, err := env.App.DB.Exec(`DELETE FROM api_keys WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}

	resp := getLocations(env, unseenToken)
	apitest.WantProblem(t, resp, http.StatusUnauthorized, "API key revoked")
	wantBearerChallenge(t, resp)

	env.Clock.Advance(env.App.Config.RevocationCheckInterval + time.Second)
	resp = getLocations(env, seenToken)
	apitest.WantProblem(t, resp, http.StatusUnauthorized, "API key revoked")
	wantBearerChallenge(t, resp)

	again := env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: formBody("client_credentials", seen.KeyID, seen.Secret), Header: formHeader})
	if again.StatusCode != http.StatusUnauthorized || tokenError(t, again).Error != "invalid_client" {
		t.Errorf("token for a deleted key: %d %s", again.StatusCode, again.Body)
	}
}
