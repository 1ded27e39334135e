package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/docs"
)

// get sends a request without a token through the plain client: these
// routes are not in openapi.yaml, so env.Do would take them for unknown ones.
func get(t *testing.T, env *apitest.Env, path string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, env.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := env.Client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

var strongETag = regexp.MustCompile(`^"[0-9a-f]{32}"$`)

// checkRevalidation checks the ETag of a 200 and that If-None-Match turns
// the next request into a 304 while the ETag matches.
func checkRevalidation(t *testing.T, env *apitest.Env, path string, resp *http.Response) {
	t.Helper()
	etag := resp.Header.Get("ETag")
	if !strongETag.MatchString(etag) {
		t.Fatalf("ETag %q, want a strong one", etag)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("Cache-Control %q, want no-cache", got)
	}
	for _, tc := range []struct {
		ifNoneMatch string
		status      int
	}{
		{etag, http.StatusNotModified},
		{`"0000", ` + etag, http.StatusNotModified},
		{"W/" + etag, http.StatusNotModified}, // If-None-Match compares weakly (RFC 9110)
		{"*", http.StatusNotModified},
		{`"0000"`, http.StatusOK},
	} {
		again, body := get(t, env, path, http.Header{"If-None-Match": {tc.ifNoneMatch}})
		if again.StatusCode != tc.status {
			t.Errorf("If-None-Match: %s → %d, want %d", tc.ifNoneMatch, again.StatusCode, tc.status)
			continue
		}
		if got := again.Header.Get("ETag"); got != etag {
			t.Errorf("If-None-Match: %s → ETag %q, want %q", tc.ifNoneMatch, got, etag)
		}
		if tc.status == http.StatusNotModified && len(body) != 0 {
			t.Errorf("304 with a body of %d bytes", len(body))
		}
	}
}

// The served documents are the repository's openapi.yaml, unchanged but
// for servers: the same operationIds, examples (null ones too), `required:
// false` and key order as the file integrators may generate from.
func TestSpecIsPublished(t *testing.T) {
	const publicURL = "https://payreq.example.com"
	env := apitest.New(t, testDSN, apitest.Options{PublicURL: publicURL})
	file, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want yaml.Node
	if err := yaml.Unmarshal(file, &want); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ path, contentType string }{
		{"/openapi.yaml", "application/yaml"},
		{"/openapi.json", "application/json"},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			resp, body := get(t, env, tc.path, nil) // no token: the contract is public
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if tc.contentType == "application/json" && !json.Valid(body) {
				t.Error("body is not JSON")
			}
			spec, err := openapi3.NewLoader().LoadFromData(body)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if err := spec.Validate(openapi3.NewLoader().Context); err != nil {
				t.Errorf("invalid spec: %v", err)
			}
			if len(spec.Servers) != 1 || spec.Servers[0].URL != publicURL {
				t.Errorf("servers %+v, want only %s", spec.Servers, publicURL)
			}
			if op := spec.Paths.Find("/oauth/token").Post; op.OperationID != "createToken" {
				t.Errorf("operationId %q, want createToken as in openapi.yaml", op.OperationID)
			}
			// YAML is a superset of JSON: both parse as YAML, and then every
			// key, value and order but servers' is the file's.
			var got yaml.Node
			if err := yaml.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			var diffs []string
			compareNodes(want.Content[0], got.Content[0], "", &diffs)
			if len(diffs) > 0 {
				t.Errorf("the served document differs from openapi.yaml beyond servers:\n%s", strings.Join(diffs[:min(len(diffs), 10)], "\n"))
			}
			if tc.contentType == "application/yaml" {
				wantText := regexp.MustCompile(`(?ms)^servers:\n(?:[ -].*?\n)+`).ReplaceAll(file, nil)
				gotText := regexp.MustCompile(`(?ms)^servers:\n(?:[ -].*?\n)+`).ReplaceAll(body, nil)
				if !bytes.Equal(gotText, wantText) {
					t.Error("the served YAML is not the file's text beyond servers")
				}
			}
			checkRevalidation(t, env, tc.path, resp)
		})
	}
}

// compareNodes lists where two YAML trees differ, leaving servers out:
// mapping keys in order, sequences, and scalars by value (a JSON string
// and a YAML plain scalar of the same text are the same; so are the JSON
// and YAML spellings of null and of numbers).
func compareNodes(want, got *yaml.Node, path string, diffs *[]string) {
	if want.Kind != got.Kind {
		*diffs = append(*diffs, fmt.Sprintf("%s: kind %v, want %v", path, got.Kind, want.Kind))
		return
	}
	switch want.Kind {
	case yaml.MappingNode:
		wantKeys, gotKeys := mapKeys(want), mapKeys(got)
		if !slices.Equal(wantKeys, gotKeys) {
			*diffs = append(*diffs, fmt.Sprintf("%s: keys %q, want %q", path, gotKeys, wantKeys))
			return
		}
		for i := 0; i < len(want.Content); i += 2 {
			if key := want.Content[i].Value; path != "" || key != "servers" {
				compareNodes(want.Content[i+1], got.Content[i+1], path+"/"+key, diffs)
			}
		}
	case yaml.SequenceNode:
		if len(want.Content) != len(got.Content) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %d items, want %d", path, len(got.Content), len(want.Content)))
			return
		}
		for i := range want.Content {
			compareNodes(want.Content[i], got.Content[i], fmt.Sprintf("%s/%d", path, i), diffs)
		}
	default:
		if want.Value != got.Value || scalarKind(want) != scalarKind(got) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s %q, want %s %q", path, got.ShortTag(), got.Value, want.ShortTag(), want.Value))
		}
	}
}

func mapKeys(n *yaml.Node) []string {
	var keys []string
	for i := 0; i < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	return keys
}

// scalarKind is a scalar's type as JSON has it: a date YAML reads as a
// timestamp is a string in JSON.
func scalarKind(n *yaml.Node) string {
	if n.ShortTag() == "!!timestamp" {
		return "!!str"
	}
	return n.ShortTag()
}

var scriptTag = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`)

func TestReferencePage(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})

	resp, page := get(t, env, "/docs", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, page)
	}
	for name, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": docs.ContentSecurityPolicy,
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	checkRevalidation(t, env, "/docs", resp)

	// The policy allows no inline script, so the page has none.
	scripts := scriptTag.FindAllSubmatch(page, -1)
	if len(scripts) != 1 {
		t.Fatalf("%d script elements, want Redoc's only", len(scripts))
	}
	if attrs, body := string(scripts[0][1]), strings.TrimSpace(string(scripts[0][2])); body != "" || !strings.Contains(attrs, `src="docs/redoc.standalone.js"`) {
		t.Errorf("script element %q, want only Redoc's, by src", scripts[0][0])
	}
	if !bytes.Contains(page, []byte(`<redoc spec-url="openapi.json"`)) {
		t.Error("the page does not point Redoc at openapi.json")
	}

	resp, script := get(t, env, "/docs/redoc.standalone.js", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("script: status %d", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Type"); got != "text/javascript; charset=utf-8" {
		t.Errorf("script: Content-Type %q", got)
	}
	if !bytes.Contains(script[:600], []byte("redoc.standalone.js.LICENSE.txt")) {
		t.Errorf("script does not start like Redoc's bundle: %.100q", script)
	}
	checkRevalidation(t, env, "/docs/redoc.standalone.js", resp)
}
