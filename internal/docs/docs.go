// Package docs publishes the contract: openapi.yaml and openapi.json as this
// deployment describes itself, and /docs, the API reference Redoc draws from
// them. Redoc's script is embedded, so the page works without any network
// beyond this service.
package docs

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

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
// repository's openapi.yaml with publicURL as its one server) and GET /docs with
// Redoc's script. They are not API operations: no token, and not in
// openapi.yaml.
func New(publicURL string, log *slog.Logger, clientAddress echo.IPExtractor) (*echo.Echo, error) {
	pubYAML, pubJSON, err := published(publicURL)
	if err != nil {
		return nil, fmt.Errorf("docs: publish spec: %w", err)
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
	e.GET(Paths[0], newDocument(pubJSON, "application/json", nil).serve)
	e.GET(Paths[1], newDocument(pubYAML, "application/yaml", nil).serve)
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

// openapi.yaml is the repository's openapi.yaml, copied by `make generate`
// (check-generated fails when the copy differs).
//
//go:embed openapi.yaml
var specYAML []byte

// specNode is openapi.yaml parsed, once per process: a third of a second
// of CPU under the race detector, which every server the tests start paid.
var specNode = sync.OnceValues(func() (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(specYAML, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("openapi.yaml is not one mapping")
	}
	return &doc, nil
})

// published is the repository's openapi.yaml as this deployment serves it:
// unchanged but for its servers, which become publicURL alone. The YAML
// keeps every other byte; the JSON holds the same document in the same key
// order. (The spec oapi-codegen embeds is re-encoded: sorted keys,
// capitalised operationIds, no `example: null`.)
func published(publicURL string) (yamlDoc, jsonDoc []byte, err error) {
	servers, err := yaml.Marshal(map[string]any{"servers": []map[string]string{{"url": publicURL}}})
	if err != nil {
		return nil, nil, err
	}
	yamlDoc, err = replaceTopLevel(specYAML, "servers", servers)
	if err != nil {
		return nil, nil, err
	}
	// The JSON: the parsed spec with its servers' value swapped for
	// publicURL's (a copy of the top mapping; the shared nodes are only read).
	doc, err := specNode()
	if err != nil {
		return nil, nil, err
	}
	var serversDoc yaml.Node
	if err := yaml.Unmarshal(servers, &serversDoc); err != nil {
		return nil, nil, err
	}
	top := *doc.Content[0]
	top.Content = slices.Clone(top.Content)
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "servers" {
			top.Content[i+1] = serversDoc.Content[0].Content[1]
		}
	}
	var compact bytes.Buffer
	if err := writeJSON(&compact, &top); err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, nil, err
	}
	out.WriteByte('\n')
	return yamlDoc, out.Bytes(), nil
}

// replaceTopLevel replaces the block of a top-level key (its line and the
// indented lines after it) with block, as text.
func replaceTopLevel(doc []byte, key string, block []byte) ([]byte, error) {
	lines := bytes.SplitAfter(doc, []byte("\n"))
	start := slices.IndexFunc(lines, func(l []byte) bool { return bytes.HasPrefix(l, []byte(key+":")) })
	if start < 0 {
		return nil, fmt.Errorf("no top-level %s", key)
	}
	end := start + 1
	for end < len(lines) && (len(bytes.TrimSpace(lines[end])) == 0 || lines[end][0] == ' ' || lines[end][0] == '-') {
		end++
	}
	out := slices.Concat(lines[:start], [][]byte{block}, lines[end:])
	return bytes.Join(out, nil), nil
}

// writeJSON writes a YAML document as compact JSON, keys in their order.
func writeJSON(w *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(w, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(w, n.Alias)
	case yaml.MappingNode, yaml.SequenceNode:
		open, end, step := byte('['), byte(']'), 1
		if n.Kind == yaml.MappingNode {
			open, end, step = '{', '}', 2
		}
		w.WriteByte(open)
		for i := 0; i < len(n.Content); i += step {
			if i > 0 {
				w.WriteByte(',')
			}
			if step == 2 {
				key, _ := json.Marshal(n.Content[i].Value)
				w.Write(key)
				w.WriteByte(':')
			}
			if err := writeJSON(w, n.Content[i+step-1]); err != nil {
				return err
			}
		}
		w.WriteByte(end)
		return nil
	}
	switch n.ShortTag() {
	case "!!null":
		w.WriteString("null")
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return err
		}
		w.WriteString(strconv.FormatBool(b))
		return nil
	case "!!int", "!!float":
		if json.Valid([]byte(n.Value)) {
			w.WriteString(n.Value) // the number as written: 1.50 stays 1.50
			return nil
		}
		return fmt.Errorf("line %d: the number %q has no JSON form", n.Line, n.Value)
	}
	// Strings, and what YAML would read as a timestamp (2025-03-01): in
	// an OpenAPI document that is the text it is written as.
	b, err := json.Marshal(n.Value)
	if err != nil {
		return err
	}
	w.Write(b)
	return nil
}
