// Package faults runs payreq as real processes (`payreq serve`, built once
// for the package) on private PostgreSQL clusters of its own, and breaks
// things under load: the database stops, the process gets SIGTERM or
// SIGKILL, providers and the card processor stall. Each test bounds its
// time and cleans up its processes and clusters; nothing here touches the
// shared development cluster under .data.
package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/devdb"
	"github.com/payreq/payreq/internal/postgres"
)

var (
	workDir string // holds the binary and the clusters; removed at the end
	binary  string // payreq, built once

	sharedOnce sync.Once
	sharedDSN  string // the cluster of the tests that do not stop it
	sharedErr  error
	sharedDir  string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	// Under /tmp with o+x, so the postgres user reaches the clusters.
	if workDir, err = os.MkdirTemp("", "payreq-faults-"); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if err := os.Chmod(workDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	binary = filepath.Join(workDir, "payreq")
	// Under -race (make test) payreq is built with it too, so a race in the
	// server under these faults fails the test that provoked it.
	args := []string{"build", "-o", binary}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/payreq")...)
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: go build: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	if sharedDir != "" {
		if err := devdb.Stop(sharedDir); err != nil {
			fmt.Fprintln(os.Stderr, "faults: stop cluster:", err)
		}
	}
	return code
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// newCluster starts a private cluster that this test alone uses (and may
// stop and start); it is stopped and removed when the test ends.
func newCluster(t *testing.T) (dsn, dataDir string) {
	t.Helper()
	dataDir, err := os.MkdirTemp(workDir, "cluster-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := devdb.Stop(dataDir); err != nil {
			t.Error(err)
		}
		os.RemoveAll(dataDir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if dsn, err = devdb.Ensure(ctx, dataDir); err != nil {
		t.Fatal(err)
	}
	return dsn, dataDir
}

// newDatabase is a fresh database on the package's shared cluster (payreq
// serve migrates it).
func newDatabase(t *testing.T) string {
	t.Helper()
	sharedOnce.Do(func() {
		sharedDir = filepath.Join(workDir, "shared")
		if sharedErr = os.Mkdir(sharedDir, 0o755); sharedErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sharedDSN, sharedErr = devdb.Ensure(ctx, sharedDir)
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	name := "faults_" + strings.ReplaceAll(uuid.NewString()[:13], "-", "")
	admin := openDB(t, sharedDSN)
	if _, err := admin.Exec(`CREATE DATABASE ` + pq.QuoteIdentifier(name)); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(sharedDSN, "/payreq?", "/"+name+"?", 1)
}

func openDB(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func freeAddr(t *testing.T) string {
	t.Helper()
	// Below Linux's ephemeral ports (32768-60999), which the kernel hands to
	// outgoing connections: a process restarted on its deployment's address
	// found it taken by some connection's source port ("address already in
	// use"). devdb's clusters are on 20000-31999.
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+rand.IntN(10000)))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free port in 10000-19999 on 127.0.0.1")
	return ""
}

// deployment is what the instances of one payreq deployment share.
type deployment struct {
	DSN       string
	DataDir   string // secrets: signing key, pepper, encryption key
	PublicURL string
	Env       map[string]string // more PAYREQ_* settings for every instance
}

func newDeployment(t *testing.T, dsn string) *deployment {
	t.Helper()
	dir := t.TempDir()
	// One set of secrets for every instance, as payreq secrets init makes it.
	if _, err := app.InitSecrets(dir); err != nil {
		t.Fatal(err)
	}
	return &deployment{DSN: dsn, DataDir: dir, PublicURL: "http://" + freeAddr(t), Env: map[string]string{
		"PAYREQ_RATE_LIMIT": "1000000", "PAYREQ_RATE_BURST": "1000000",
		"PAYREQ_DELIVERY_POLL_INTERVAL": "100ms",
	}}
}

func (d *deployment) environ(extra map[string]string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"DATABASE_URL=" + d.DSN, "PAYREQ_DATA_DIR=" + d.DataDir, "PAYREQ_PUBLIC_URL=" + d.PublicURL,
		// Under -race a process sleeps a second before it exits (the race
		// runtime's atexit_sleep_ms), for each command and each stopped
		// instance; races found while it ran fail it as before.
		"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}
	for _, m := range []map[string]string{d.Env, extra} {
		for k, v := range m {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// cli runs a payreq command of the deployment and returns its stdout.
func (d *deployment) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = d.environ(nil)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("payreq %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// demoKeys is `payreq demo --json`'s merchant.
type demoKeys struct {
	Merchant struct {
		OrganizationID string `json:"organizationId"`
		KeyID          string `json:"keyId"`
		Secret         string `json:"secret"`
	} `json:"merchant"`
}

func (d *deployment) seed(t *testing.T) demoKeys {
	t.Helper()
	var k demoKeys
	if err := json.Unmarshal([]byte(d.cli(t, "demo", "--json", "--bare")), &k); err != nil {
		t.Fatal(err)
	}
	return k
}

// instance is one `payreq serve` process.
type instance struct {
	t    *testing.T
	name string
	URL  string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
	err  error // the exit, once done is closed
}

// start runs `payreq serve` and waits until it answers /healthz. The
// public URL's address is taken by the first instance to start with addr "".
func (d *deployment) start(t *testing.T, name string, extra map[string]string) *instance {
	t.Helper()
	addr := strings.TrimPrefix(d.PublicURL, "http://")
	if extra["PAYREQ_ADDR"] != "" {
		addr = extra["PAYREQ_ADDR"]
	}
	env := d.environ(extra)
	env = append(env, "PAYREQ_ADDR="+addr)
	in := &instance{t: t, name: name, URL: "http://" + addr, logs: &syncBuffer{}, done: make(chan struct{})}
	in.cmd = exec.Command(binary, "serve")
	in.cmd.Env = env
	in.cmd.Stdout, in.cmd.Stderr = in.logs, in.logs
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		in.err = in.cmd.Wait()
		close(in.done)
	}()
	t.Cleanup(func() {
		in.kill()
		if logs := in.logs.String(); strings.Contains(logs, "WARNING: DATA RACE") {
			t.Errorf("%s: the race detector found a data race:\n%s", name, logs[strings.Index(logs, "WARNING: DATA RACE"):])
		} else if t.Failed() {
			t.Logf("%s log (last 8 KiB):\n%s", name, tail(logs, 8<<10))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-in.done:
			t.Fatalf("%s exited at start: %v\n%s", name, in.err, in.logs.String())
		default:
		}
		resp, err := http.Get(in.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return in
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer /healthz within 30s:\n%s", name, in.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signal sends sig to the process.
func (in *instance) signal(sig syscall.Signal) {
	if err := in.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		in.t.Errorf("%s: signal %v: %v", in.name, sig, err)
	}
}

// wait waits up to d for the process to exit and returns how it exited.
func (in *instance) wait(d time.Duration) error {
	select {
	case <-in.done:
		return in.err
	case <-time.After(d):
		in.t.Errorf("%s did not exit within %v", in.name, d)
		in.kill()
		return errors.New("killed")
	}
}

// kill ends the process at once (SIGKILL) unless it has exited.
func (in *instance) kill() {
	select {
	case <-in.done:
		return
	default:
	}
	_ = in.cmd.Process.Kill()
	<-in.done
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// httpClient sends from a loopback source address of its own (the token
// limit is per address) and never follows redirects.
func httpClient(source string, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64},
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// answer is a response read whole, or the transport error instead.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error
	Took   time.Duration
}

func (a answer) String() string {
	if a.Err != nil {
		return a.Err.Error()
	}
	return fmt.Sprintf("%d %s", a.Status, tail(string(a.Body), 300))
}

// errNeverAccepted marks a request sent on a new connection that was reset
// or closed before any byte of an answer: the kernel had completed the
// handshake, but the process closed its listener (SIGTERM) before it
// accepted the connection, so it never read the request. Like a refused dial.
var errNeverAccepted = errors.New("connection closed before the process accepted it")

func send(c *http.Client, method, url, token string, body any, header http.Header) answer {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return answer{Err: err}
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return answer{Err: err}
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	var reused, answered atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn:              func(i httptrace.GotConnInfo) { reused.Store(i.Reused) },
		GotFirstResponseByte: func() { answered.Store(true) },
	}))
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		if !reused.Load() && !answered.Load() &&
			(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			err = fmt.Errorf("%w: %w", errNeverAccepted, err)
		}
		return answer{Err: err, Took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: b, Err: err, Took: time.Since(start)}
}

// token exchanges a key for an access token.
func token(t *testing.T, c *http.Client, baseURL, keyID, secret string) string {
	t.Helper()
	a := send(c, "POST", baseURL+"/oauth/token", "", map[string]string{
		"grant_type": "client_credentials", "client_id": keyID, "client_secret": secret}, nil)
	if a.Status != http.StatusOK {
		t.Fatalf("token: %v", a)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(a.Body, &tok); err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// firstMID is the id of the organization's first merchant account.
func firstMID(t *testing.T, c *http.Client, baseURL, tok string) string {
	t.Helper()
	a := send(c, "GET", baseURL+"/accounts", tok, nil, nil)
	if a.Status != http.StatusOK {
		t.Fatalf("accounts: %v", a)
	}
	var mids []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(a.Body, &mids); err != nil || len(mids) == 0 {
		t.Fatalf("accounts: %v %s", err, a.Body)
	}
	return mids[0].ID
}

// invoiceBody is a create request of 3 lines adding up to 30.00.
func invoiceBody(mid, number string, sendIt bool) map[string]any {
	line := func(desc string) map[string]any {
		return map[string]any{"description": desc, "quantity": "2", "unitCost": "5", "uom": nil, "commodityCode": nil, "upc": nil}
	}
	return map[string]any{
		"merchantAccountId": mid, "invoiceNumber": number, "amount": "30.00",
		"poNumber": nil, "customerName": "Dana Whitfield", "customerCompany": nil,
		"customerEmail": "dana@example.com", "customerPhone": nil, "delivery": nil, "memo": nil,
		"dueDate": nil, "lines": []any{line("Flour"), line("Sugar"), line("Butter")}, "send": sendIt,
	}
}

// created reads the id out of a create's answer.
func created(t *testing.T, a answer) string {
	t.Helper()
	var inv struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(a.Body, &inv); err != nil || inv.ID == "" {
		t.Errorf("create answer without an id: %v", a)
	}
	return inv.ID
}

// wantUnavailable checks a 503 problem: its type, title and Retry-After.
func wantUnavailable(t *testing.T, a answer) {
	t.Helper()
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
	if ct := a.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("503 with Content-Type %q", ct)
	}
	if err := json.Unmarshal(a.Body, &p); err != nil || !strings.HasSuffix(p.Type, "/problems/unavailable") ||
		p.Title != "Service unavailable" || p.Status != 503 {
		t.Errorf("503 body %s", a.Body)
	}
	if secs, err := strconv.Atoi(a.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("503 with Retry-After %q", a.Header.Get("Retry-After"))
	}
}

// eventually waits up to d for cond.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkInvoicesWhole checks that every invoice of the database is whole:
// its lines are all there, and a sent invoice has its message.
func checkInvoicesWhole(t *testing.T, db *sqlx.DB) {
	t.Helper()
	var broken []string
	err := db.Select(&broken, `SELECT i.id::text FROM invoices i
		WHERE i.line_count <> (SELECT count(*) FROM invoice_lines l WHERE l.invoice_id = i.id)
		   OR (i.sent_at IS NOT NULL) <> EXISTS (SELECT 1 FROM outbox o WHERE o.invoice_id = i.id AND o.kind <> 'receipt')`)
	if err != nil {
		t.Fatal(err)
	}
	if len(broken) > 0 {
		t.Errorf("%d invoices half-written: %v", len(broken), broken)
	}
}
