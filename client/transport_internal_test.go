package payreq

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/payreq/payreq/gen"
)

// The paths the client sends without a token are exactly those of the
// operations in openapi.yaml that take no bearer token.
func TestPublicPathsFollowTheSpec(t *testing.T) {
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			security := spec.Security
			if op.Security != nil {
				security = *op.Security
			}
			bearer := false
			for _, req := range security {
				_, ok := req["bearerAuth"]
				bearer = bearer || ok
			}
			if sent := !slices.Contains(public, path); sent != bearer {
				t.Errorf("%s %s: openapi.yaml asks for a bearer token: %v; the client sends one: %v (see public in transport.go)", method, path, bearer, sent)
			}
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header string
		want   time.Duration
		ok     bool
	}{
		{"1", time.Second, true},
		{" 42 ", 42 * time.Second, true},
		{"0", 0, true},
		{"-3", 0, true},
		{now.Add(5 * time.Second).Format(http.TimeFormat), 5 * time.Second, true},
		{now.Add(-5 * time.Second).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"soon", 0, false},
	} {
		got, ok := retryAfter(tc.header, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestIsPublic(t *testing.T) {
	defer func(saved []string) { public = saved }(public)
	public = append(public, "/pay/{token}")
	for path, want := range map[string]bool{
		"/oauth/token": true, "/healthz": true, "/pay/abc": true,
		"/pay/": false, "/pay/abc/x": false, "/payment-requests": false, "/locations/1": false, "/": false,
	} {
		if got := isPublic(path); got != want {
			t.Errorf("isPublic(%q) = %v, want %v", path, got, want)
		}
	}
}
