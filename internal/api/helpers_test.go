package api_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

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
func tokenError(t *testing.T, resp *apitest.Response) models.TokenError {
	t.Helper()
	var e models.TokenError
	resp.JSON(t, &e)
	return e
}

// wantBearerChallenge checks the WWW-Authenticate header of a 401.
func wantBearerChallenge(t *testing.T, resp *apitest.Response) {
	t.Helper()
	if h := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
		t.Errorf("WWW-Authenticate %q, want a Bearer challenge", h)
	}
}
