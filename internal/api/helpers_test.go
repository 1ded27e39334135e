package api_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
)

// newKey makes an API key for org with exactly these permissions.
func newKey(t *testing.T, env *apitest.Env, org uuid.UUID, permissions ...string) auth.NewKey {
	t.Helper()
	k, err := env.App.Keys.Create(context.Background(), org, "test key "+strings.Join(permissions, ","), permissions)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// formBody encodes a token request as application/x-www-form-urlencoded.
func formBody(grant, id, secret string) string {
	v := url.Values{}
	for k, s := range map[string]string{"grant_type": grant, "client_id": id, "client_secret": secret} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

var formHeader = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}

func basicHeader(id, secret string) http.Header {
	return http.Header{
		"Content-Type":  {"application/x-www-form-urlencoded"},
		"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))},
	}
}

// tokenError decodes an OAuth error body.
func tokenError(t *testing.T, resp *apitest.Response) gen.TokenError {
	t.Helper()
	var e gen.TokenError
	resp.JSON(t, &e)
	return e
}

// wantProblem checks status and title of a problem document and returns it.
func wantProblem(t *testing.T, resp *apitest.Response, status int, title string) gen.Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	p := resp.Problem(t)
	if title != "" && p.Title != title {
		t.Errorf("title %q, want %q (detail: %s)", p.Title, title, p.Detail)
	}
	if int(p.Status) != status {
		t.Errorf("problem status %d, want %d", p.Status, status)
	}
	return p
}

// wantBearerChallenge checks the WWW-Authenticate header of a 401.
func wantBearerChallenge(t *testing.T, resp *apitest.Response) {
	t.Helper()
	if h := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
		t.Errorf("WWW-Authenticate %q, want a Bearer challenge", h)
	}
}
