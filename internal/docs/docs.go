// Package docs publishes the contract: openapi.yaml and openapi.json as this
// deployment describes itself, and /docs, the API reference Redoc draws from
// them. Redoc's script is embedded, so the page works without any network
// beyond this service.
package docs

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/requestlog"
)

// assets/redoc.standalone.js is redoc's bundles/redoc.standalone.js from the
// npm version `make docs-assets` pins, byte for byte.
//
//go:embed assets/index.html assets/redoc.standalone.js
var assets embed.FS

// ContentSecurityPolicy of the reference page allows what Redoc needs and
// nothing more: its own script, the <style> elements styled-components
// writes, the spec from this origin, the search index's worker (started from
// a blob: URL) and the data: images of its CSS. TestReferenceRendersInChromium
// fails on any refusal but one: the attribution logo Redoc loads from its CDN,
// which it then leaves out.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; " +
	"connect-src 'self'; worker-src blob:; img-src data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Paths are the addresses this front serves.
var Paths = []string{"/openapi.json", "/openapi.yaml", "/docs", "/docs/redoc.standalone.js"}

// New builds the docs front: GET /openapi.yaml and /openapi.json (the
// embedded spec with publicURL as its one server) and GET /docs with
// Redoc's script. They are not API operations: no token, and not in
// openapi.yaml.
func New(publicURL string, log *slog.Logger, clientAddress echo.IPExtractor) (*echo.Echo, error) {
	specJSON, err := publishedJSON(publicURL)
	if err != nil {
		return nil, fmt.Errorf("docs: publish spec: %w", err)
	}
	specYAML, err := toYAML(specJSON)
	if err != nil {
		return nil, fmt.Errorf("docs: publish spec as YAML: %w", err)
	}
	page, err := assets.ReadFile("assets/index.html")
	if err != nil {
		return nil, fmt.Errorf("docs: %w", err)
	}
	redoc, err := assets.ReadFile("assets/redoc.standalone.js")
	if err != nil {
		return nil, fmt.Errorf("docs: %w", err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = clientAddress
	e.Use(requestlog.Middleware(log), requestlog.Recover)
	e.GET(Paths[0], newDocument(specJSON, "application/json", nil).serve)
	e.GET(Paths[1], newDocument(specYAML, "application/yaml", nil).serve)
	e.GET(Paths[2], newDocument(page, "text/html; charset=utf-8", http.Header{
		"Content-Security-Policy": {ContentSecurityPolicy},
		"X-Frame-Options":         {"DENY"},
		"Referrer-Policy":         {"no-referrer"},
	}).serve)
	e.GET(Paths[3], newDocument(redoc, "text/javascript; charset=utf-8", nil).serve)
	return e, nil
}

// document is a fixed answer with a strong ETag of its bytes.
type document struct {
	body   []byte
	header http.Header
}

func newDocument(body []byte, contentType string, header http.Header) document {
	h := http.Header{}
	for k, vs := range header {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	sum := sha256.Sum256(body)
	h.Set("Content-Type", contentType)
	h.Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
	// Unlike the API's no-store: a copy may be kept, but is checked each
	// time, which If-None-Match makes a 304.
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	return document{body: body, header: h}
}

func (d document) serve(c echo.Context) error {
	h := c.Response().Header()
	for k, vs := range d.header {
		h[k] = vs
	}
	// ServeContent answers If-None-Match (and Range) from the ETag above.
	http.ServeContent(c.Response(), c.Request(), "", time.Time{}, bytes.NewReader(d.body))
	return nil
}

// topLevel is the order people read a spec in; the embedded copy has its
// keys sorted, which would put components first.
var topLevel = []string{"openapi", "info", "servers", "security", "tags", "paths", "components"}

// publishedJSON is the embedded spec, unchanged but for its servers, which
// become this deployment's public URL.
func publishedJSON(publicURL string) ([]byte, error) {
	raw, err := gen.GetSpecJSON()
	if err != nil {
		return nil, err
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, err
	}
	if spec["servers"], err = json.Marshal([]map[string]string{{"url": publicURL}}); err != nil {
		return nil, err
	}
	rank := func(key string) int {
		if i := slices.Index(topLevel, key); i >= 0 {
			return i
		}
		return len(topLevel)
	}
	keys := slices.Sorted(maps.Keys(spec))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	var compact bytes.Buffer
	compact.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			compact.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		compact.Write(name)
		compact.WriteByte(':')
		compact.Write(spec[k])
	}
	compact.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// toYAML writes the same document as block YAML, keeping its key order.
func toYAML(specJSON []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(specJSON, &doc); err != nil {
		return nil, err
	}
	plainStyle(&doc)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// plainStyle drops the flow style and quotes that parsing JSON gave every
// node; the encoder then quotes only strings that would otherwise read as
// another type, and writes multi-line ones as literal blocks.
func plainStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plainStyle(c)
	}
}
