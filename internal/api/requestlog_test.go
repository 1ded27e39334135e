package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

// logLine finds the request log line with this request id.
func logLine(t *testing.T, env *apitest.Env, requestID string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(env.Log.String(), "\n") {
		if line == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["request_id"] == requestID {
			return m
		}
	}
	t.Fatalf("no log line with request_id %q in:\n%s", requestID, env.Log.String())
	return nil
}

func TestRequestIDAndLog(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	key := seed.Merchant

	// A token through each channel that carries the secret.
	env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: "grant_type=client_credentials", Header: basicHeader(key.KeyID, key.Secret)})
	env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: formBody("client_credentials", key.KeyID, key.Secret), Header: formHeader})
	token := env.Token(key.KeyID, key.Secret)

	resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token,
		Header: http.Header{"X-Request-Id": {"client-chosen-id-42"}}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /locations: %d %s", resp.StatusCode, resp.Body)
	}
	if got := resp.Header.Get("X-Request-Id"); got != "client-chosen-id-42" {
		t.Errorf("X-Request-Id %q, want the one sent back", got)
	}
	line := logLine(t, env, "client-chosen-id-42")
	want := map[string]any{"method": "GET", "path": "/locations", "status": float64(200), "key_id": key.KeyID}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	if _, ok := line["duration_ms"]; !ok {
		t.Errorf("log line has no duration_ms: %v", line)
	}

	var generated []string
	for range 2 {
		resp := env.Do(apitest.Request{Method: "GET", Path: "/healthz"})
		id := resp.Header.Get("X-Request-Id")
		if id == "" {
			t.Fatal("no X-Request-Id generated")
		}
		generated = append(generated, id)
		if l := logLine(t, env, id); l["path"] != "/healthz" {
			t.Errorf("log path %v, want /healthz", l["path"])
		}
	}
	if generated[0] == generated[1] {
		t.Errorf("two requests got the same generated id %q", generated[0])
	}
	// An id that is not safe to log or echo is replaced.
	resp = env.Do(apitest.Request{Method: "GET", Path: "/healthz", Header: http.Header{"X-Request-Id": {"bad id\twith\"quotes"}}})
	if got := resp.Header.Get("X-Request-Id"); !regexp.MustCompile(`^[A-Za-z0-9._:-]+$`).MatchString(got) {
		t.Errorf("unsafe X-Request-Id echoed as %q", got)
	}

	// A refused token is logged as a 401, without the token.
	env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token + "x",
		Header: http.Header{"X-Request-Id": {"refused-token"}}})
	if l := logLine(t, env, "refused-token"); l["status"] != float64(401) {
		t.Errorf("refused token logged with status %v, want 401", l["status"])
	}

	log := env.Log.String()
	for what, secret := range map[string]string{"secret": key.Secret, "access token": token, "token signature": token[strings.LastIndex(token, ".")+1:]} {
		if strings.Contains(log, secret) {
			t.Errorf("the log contains the %s", what)
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	for _, path := range []string{"/healthz", "/readyz"} {
		resp := env.Do(apitest.Request{Method: "GET", Path: path})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Body)
		}
		var h models.Health
		resp.JSON(t, &h)
		if h.Status != "ok" {
			t.Errorf("GET %s: status %q, want ok", path, h.Status)
		}
	}
}

// Without its database the process is alive but not ready.
func TestReadinessWithoutDatabase(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	if err := env.App.DB.Close(); err != nil {
		t.Fatal(err)
	}
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/readyz"}), http.StatusServiceUnavailable, "")
	if resp := env.Do(apitest.Request{Method: "GET", Path: "/healthz"}); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz without the database: %d %s", resp.StatusCode, resp.Body)
	}
}
