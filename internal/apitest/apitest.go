// Package apitest runs the real server over HTTP against a test database and
// checks every response it sees against openapi.yaml, so the spec and the
// server cannot drift apart unnoticed.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/demo"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/server"
)

// Clock is a settable clock for tests.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a clock standing at now; pass one to several Envs so that,
// like instances of one deployment, they share the time.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Env is one running server on a test database.
type Env struct {
	T      testing.TB
	App    *app.App
	URL    string
	Clock  *Clock
	Log    *SyncBuffer
	Client *http.Client
	router routers.Router
	spec   *openapi3.T
}

// Options change how an Env is built.
type Options struct {
	// DataDir shares secrets (signing key, pepper) between Envs, as two
	// instances of one deployment do. Empty: a fresh temporary directory.
	DataDir string
	// PublicURL of the deployment (the tokens' issuer); two instances of one
	// deployment share it. Empty: the server's own address.
	PublicURL string
	// Configure adjusts the configuration before the server starts.
	Configure func(*config.Config)
	// Clock to use; nil: a clock starting at the real time.
	Clock *Clock
	// WrapProcessor wraps the simulator as the card processor, for tests
	// that record what it is asked or change what it answers.
	WrapProcessor func(processor.Processor) processor.Processor
	// ReadTimeout is the server's time to read a whole request, as
	// `payreq serve` has one; zero: none.
	ReadTimeout time.Duration
}

var nextAddress atomic.Uint32

// PDF documents (GET /payment-requests/{id} with Accept: application/pdf)
// are checked for their content type and status; a binary string schema
// says nothing of the bytes, which the tests read back themselves.
var registerPDF sync.Once

// SourceAddress gives each Env its own loopback source address (127.0.0.10,
// 127.0.0.11, …), so per-address limits of one test do not starve another.
func SourceAddress() string {
	n := nextAddress.Add(1)
	return fmt.Sprintf("127.0.%d.%d", 1+n/200, 10+n%200)
}

// New starts a server on the database dsn.
func New(t testing.TB, dsn string, opts Options) *Env {
	t.Helper()
	registerPDF.Do(func() { openapi3filter.RegisterBodyDecoder("application/pdf", openapi3filter.FileBodyDecoder) })
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Clock == nil {
		opts.Clock = &Clock{now: time.Now()}
	}
	ts := httptest.NewUnstartedServer(nil)
	cfg, err := config.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL = dsn
	cfg.DataDir = opts.DataDir
	cfg.Addr = ts.Listener.Addr().String()
	cfg.PublicURL = "http://" + cfg.Addr
	if opts.PublicURL != "" {
		cfg.PublicURL = opts.PublicURL
	}
	cfg.SigningKeyFile = opts.DataDir + "/signing-key.pem"
	cfg.PepperFile = opts.DataDir + "/pepper"
	cfg.EncryptionKeyFile = opts.DataDir + "/encryption-key"
	// Receivers in tests listen on 127.0.0.1 over plain http, as in make run.
	cfg.WebhookAllowPrivate = true
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	appOpts := app.Options{Now: opts.Clock.Now, GenerateSecrets: true}
	if opts.WrapProcessor != nil {
		appOpts.Processor = opts.WrapProcessor(processor.NewSimulator())
	}
	logs := &SyncBuffer{}
	svc, err := server.New(context.Background(), cfg, appOpts, cfg.Logger(logs))
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = svc.Handler
	ts.Config.ReadTimeout = opts.ReadTimeout
	ts.Config.MaxHeaderBytes = 64 << 10 // as payreq serve's
	framing.Configure(ts.Config)
	ts.Listener = framing.Listen(ts.Listener)
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		svc.Close()
	})
	spec, router, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	return &Env{
		T: t, App: svc.App, URL: ts.URL, Clock: opts.Clock, Log: logs,
		Client: ClientFrom(SourceAddress()),
		router: router, spec: spec,
	}
}

// The spec and its router, parsed once for every Env of a test binary:
// parsing openapi.yaml takes about half a second under the race detector,
// and the validation only reads them.
var (
	specOnce   sync.Once
	specLoaded *openapi3.T
	specRouter routers.Router
	specErr    error
)

func loadSpec() (*openapi3.T, routers.Router, error) {
	specOnce.Do(func() {
		spec, err := gen.GetSpec()
		if err != nil {
			specErr = err
			return
		}
		spec.Servers = nil
		specLoaded = spec
		specRouter, specErr = gorillamux.NewRouter(spec)
	})
	return specLoaded, specRouter, specErr
}

// ClientFrom is an HTTP client whose connections come from a given loopback address.
func ClientFrom(address string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(address)}, Timeout: 5 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64},
		Timeout:   30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Seed creates a demo merchant and reseller with their keys.
func (e *Env) Seed() demo.Result {
	e.T.Helper()
	res, err := demo.Seed(context.Background(), e.App.DB, e.App.Auth, e.App.Resellers, e.App.People)
	if err != nil {
		e.T.Fatal(err)
	}
	return res
}

// Response is a read and validated response.
type Response struct {
	*http.Response
	Body []byte
}

// JSON decodes the body into v.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Problem decodes a problem document.
func (r *Response) Problem(t testing.TB) models.Problem {
	var p models.Problem
	r.JSON(t, &p)
	return p
}

// Request is a request to send through Do.
type Request struct {
	Method  string
	Path    string
	Token   string // Bearer token, if any
	Body    any    // []byte or string as is; anything else as JSON
	Header  http.Header
	Client  *http.Client // nil: the Env's client
	Context context.Context
	// Chunked sends the body without a Content-Length, as a stream.
	Chunked bool
}

// Do sends a request and validates the response against openapi.yaml,
// failing the test on any difference (status, headers, body).
func (e *Env) Do(r Request) *Response {
	e.T.Helper()
	var body io.Reader
	var raw []byte
	switch b := r.Body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			e.T.Fatal(err)
		}
	}
	if raw != nil {
		body = bytes.NewReader(raw)
		if r.Chunked {
			body = struct{ io.Reader }{body} // hides the length from net/http
		}
	}
	ctx := r.Context
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, e.URL+r.Path, body)
	if err != nil {
		e.T.Fatal(err)
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	if raw != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	client := r.Client
	if client == nil {
		client = e.Client
	}
	resp, err := client.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := e.validate(req, raw, resp, got); err != nil {
		e.T.Errorf("%s %s → %d does not match openapi.yaml: %v\nbody: %s", r.Method, r.Path, resp.StatusCode, err, got)
	}
	return &Response{Response: resp, Body: got}
}

// validate checks a response against the operation the request matched. A
// request matching no operation (unknown path or method) must get a
// problem document with a 404 or 405.
func (e *Env) validate(req *http.Request, reqBody []byte, resp *http.Response, body []byte) error {
	clone := req.Clone(context.Background())
	// Routed by the path as sent, as outside validators route it: an id
	// holding %2F is a value of that operation's id, not a path of its own.
	clone.URL = &url.URL{Path: req.URL.EscapedPath(), RawQuery: req.URL.RawQuery}
	clone.Host = ""
	if reqBody != nil {
		clone.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	route, params, err := e.router.FindRoute(clone)
	if err != nil {
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			return fmt.Errorf("no operation matches, yet the status is %d", resp.StatusCode)
		}
		return e.validateProblem(resp, body)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: clone, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: resp.StatusCode,
		Header: resp.Header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		return err
	}
	for name, h := range responseHeaders(route.Operation, resp.StatusCode) {
		if h.Value != nil && h.Value.Required && resp.Header.Get(name) == "" {
			return fmt.Errorf("required header %s missing", name)
		}
	}
	return nil
}

func responseHeaders(op *openapi3.Operation, status int) openapi3.Headers {
	r := op.Responses.Status(status)
	if r == nil || r.Value == nil {
		return nil
	}
	return r.Value.Headers
}

func (e *Env) validateProblem(resp *http.Response, body []byte) error {
	return e.validateSchema("Problem", resp, "application/problem+json", body)
}

// validateSchema checks an answer's media type and its body against one
// schema of openapi.yaml's components.
func (e *Env) validateSchema(name string, resp *http.Response, mediaType string, body []byte) error {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, mediaType) {
		return fmt.Errorf("content type %q, want %s", ct, mediaType)
	}
	schema := e.spec.Components.Schemas[name].Value
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return schema.VisitJSON(v)
}

// Token exchanges a key for an access token through the token endpoint.
func (e *Env) Token(keyID, secret string) string {
	e.T.Helper()
	resp := e.Do(Request{Method: "POST", Path: "/oauth/token", Body: map[string]string{
		"grant_type": "client_credentials", "client_id": keyID, "client_secret": secret,
	}})
	if resp.StatusCode != http.StatusOK {
		e.T.Fatalf("token: %d %s", resp.StatusCode, resp.Body)
	}
	var tok models.TokenResponse
	resp.JSON(e.T, &tok)
	return tok.AccessToken
}

// SyncBuffer is a bytes.Buffer safe for the server's concurrent log writes.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything logged so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Wire sends raw, a request as bytes on the wire, on a new connection,
// half-closing the connection after it when halfClose is set (a client
// that cut its body off). It reads one answer, checks it against
// openapi.yaml unless the path is a pay or sign-up page's (a request HTTP itself
// refuses, such as one with a control character in a header, matches no
// operation: its answer must be a problem document), and reports whether
// the server closed the connection after the answer rather than reading on.
func (e *Env) Wire(raw string, halfClose bool) (resp *Response, closed bool) {
	e.T.Helper()
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		req = nil
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		e.T.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		e.T.Fatal(err)
	}
	if halfClose {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			e.T.Fatal(err)
		}
	}
	// Long enough for any answer.
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		e.T.Fatal(err)
	}
	br := bufio.NewReader(conn)
	r, err := http.ReadResponse(br, req)
	if err != nil {
		e.T.Fatalf("no answer to %.40q: %v", raw, err)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		e.T.Fatal(err)
	}
	switch {
	case req == nil && strings.HasPrefix(raw, "POST /oauth/token") && r.StatusCode < 500:
		if err := e.validateSchema("TokenError", r, "application/json", body); err != nil {
			e.T.Errorf("%.40q → %d is not an OAuth error: %v\nbody: %s", raw, r.StatusCode, err, body)
		}
	case req == nil:
		if err := e.validateProblem(r, body); err != nil {
			e.T.Errorf("%.40q → %d is not a problem document: %v\nbody: %s", raw, r.StatusCode, err, body)
		}
	case !strings.HasPrefix(req.URL.Path, "/pay/") && !strings.HasPrefix(req.URL.Path, "/apply/"):
		if err := e.validate(req, nil, r, body); err != nil {
			e.T.Errorf("%s %s → %d does not match openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, r.StatusCode, err, body)
		}
	}
	// A server that keeps the connection open after the answer is seen by
	// this read running into its deadline, well before the idle timeout
	// would close the connection.
	if err := conn.SetReadDeadline(time.Now().Add(framing.IdleTimeout / 2)); err != nil {
		e.T.Fatal(err)
	}
	_, err = br.ReadByte()
	return &Response{Response: r, Body: body}, errors.Is(err, io.EOF)
}
