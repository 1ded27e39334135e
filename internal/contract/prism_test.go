package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// prismErrors prefixes the problem type of every answer prism makes itself.
const prismErrors = "https://stoplight.io/prism/errors#"

// prism is `prism proxy --errors` in front of one server. With --errors it
// refuses a request that breaks openapi.yaml itself (401 or 422) and replaces
// an answer that breaks it with a 500; a lesser violation (an error status
// the operation does not list) only gets an sl-violations header and a log
// line. It also replaces an upstream 501 with a mock answer of its own.
type prism struct {
	URL     string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	client  *http.Client
	ids     atomic.Int64

	mu      sync.Mutex
	refused map[string]int // refusals asked for with refuses, by kind
}

// startPrism starts prism on port in front of upstream and waits until a
// request through it reaches the server.
func startPrism(t *testing.T, upstream string, port int) *prism {
	t.Helper()
	root := repoRoot(t)
	bin := filepath.Join(root, ".tools", "node", "node_modules", ".bin", "prism")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("prism is not installed at %s: `make test` installs it", bin)
	}
	spec := prismSpec(t, root)
	checkPrismCompilesEverySchema(t, root, spec)

	p := &prism{
		URL:     fmt.Sprintf("http://127.0.0.1:%d", port),
		logPath: filepath.Join(t.TempDir(), "prism.log"),
		exited:  make(chan struct{}),
		client: &http.Client{
			Timeout:       15 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		refused: map[string]int{},
	}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "proxy", "--errors", spec, upstream, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start prism: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("prism's log (%s):\n%s", p.logPath, p.logTail(80))
		}
	})

	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := p.client.Get(p.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("prism exited before it listened on %s:\n%s", p.URL, p.logTail(40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prism did not answer on %s within 30 s:\n%s", p.URL, p.logTail(40))
		}
	}
}

// prismSpec writes the copy of openapi.yaml that prism reads. Prism adds null
// to the enum of a nullable schema itself, so an enum that already lists null
// (as OpenAPI 3.0.3 asks) then holds it twice, ajv refuses the schema, and
// prism silently skips every body that uses it: Invoice and
// CreatePaymentRequest (stoplightio/prism#1931). The copy drops null from
// those enums, which prism puts back; nothing else differs.
func prismSpec(t *testing.T, root string) string {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(root, "openapi.yaml"))
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	raw, err := doc.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	dropNullFromNullableEnums(tree)
	out, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func dropNullFromNullableEnums(node any) {
	switch n := node.(type) {
	case map[string]any:
		if enum, ok := n["enum"].([]any); ok && n["nullable"] == true {
			kept := []any{}
			for _, v := range enum {
				if v != nil {
					kept = append(kept, v)
				}
			}
			n["enum"] = kept
		}
		for _, v := range n {
			dropNullFromNullableEnums(v)
		}
	case []any:
		for _, v := range n {
			dropNullFromNullableEnums(v)
		}
	}
}

// checkPrismCompilesEverySchema fails when prism cannot compile a request or
// response schema of spec: prism would then skip validating those bodies
// without a word, and this test would check nothing there.
func checkPrismCompilesEverySchema(t *testing.T, root, spec string) {
	t.Helper()
	cmd := exec.Command("node", filepath.Join("testdata", "prism-schemas.js"), spec)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(root, ".tools", "node", "node_modules"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prism cannot validate every body of openapi.yaml (%v):\n%s", err, out)
	}
}

// call is one request.
type call struct {
	method, path string
	token        string // Bearer token, if any
	body         any    // string: sent as is; anything else as JSON
	header       http.Header
}

func (c call) String() string { return c.method + " " + c.path }

// answer is what came back for a call.
type answer struct {
	call   call
	status int
	header http.Header
	body   []byte
}

// want fails the test unless the answer has this status.
func (a answer) want(t *testing.T, status int) answer {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s → %d, want %d: %s", a.call, a.status, status, a.body)
	}
	return a
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("%s: decode %s: %v", a.call, a.body, err)
	}
}

// problemTitle is the title of a problem document, or the error of an OAuth error body.
func (a answer) problemTitle(t *testing.T) string {
	t.Helper()
	var p struct{ Title, Error string }
	a.json(t, &p)
	return p.Title + p.Error
}

// do sends c through prism and fails the test, naming the request, when prism
// found the request or the answer breaking openapi.yaml, or when the answer
// is not the server's own.
func (p *prism) do(t *testing.T, c call) answer {
	t.Helper()
	id := fmt.Sprintf("contract-%d", p.ids.Add(1))
	a := send(t, p.client, p.URL, c, id)
	violations := a.header.Get("Sl-Violations")
	if violations != "" {
		t.Errorf("%s → %d breaks openapi.yaml: %s", c, a.status, violations)
	}
	if kind := prismError(a); kind != "" {
		if violations == "" {
			t.Errorf("%s → %d: prism answered itself (%s): %s", c, a.status, kind, a.body)
		}
	} else if got := a.header.Get("X-Request-Id"); got != id {
		t.Errorf("%s → %d is not the server's answer (X-Request-Id %q, sent %q); prism mocks an answer when the server says 501", c, a.status, got, id)
	}
	return a
}

// refuses sends c, a request that breaks openapi.yaml, through prism and
// wants prism to refuse it itself with kind (UNAUTHORIZED,
// UNPROCESSABLE_ENTITY). The server never sees it; the caller checks the
// server's own answer without prism.
func (p *prism) refuses(t *testing.T, c call, kind string) {
	t.Helper()
	a := send(t, p.client, p.URL, c, fmt.Sprintf("contract-%d", p.ids.Add(1)))
	if got := prismError(a); got != kind {
		t.Errorf("%s → %d: want prism to refuse it (%s), got: %s", c, a.status, kind, a.body)
		return
	}
	p.mu.Lock()
	p.refused[kind]++
	p.mu.Unlock()
}

// prismError is the kind of an answer prism made itself, or "".
func prismError(a answer) string {
	if !strings.HasPrefix(a.header.Get("Content-Type"), "application/problem+json") {
		return ""
	}
	var doc struct{ Type string }
	if json.Unmarshal(a.body, &doc) != nil {
		return ""
	}
	kind, ok := strings.CutPrefix(doc.Type, prismErrors)
	if !ok {
		return ""
	}
	return kind
}

var (
	logProblem = regexp.MustCompile(`Violation|\s(warning|error|fatal)\s`)
	logRefusal = regexp.MustCompile(`Request terminated with error: ` + regexp.QuoteMeta(prismErrors) + `([A-Z_]+):`)
)

// checkLog stops prism and fails the test for every violation, warning or
// error in its log, apart from the refusals asked for with refuses.
func (p *prism) checkLog(t *testing.T) {
	t.Helper()
	p.stop()
	p.mu.Lock()
	wanted := maps.Clone(p.refused)
	p.mu.Unlock()
	log, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if !logProblem.MatchString(line) {
			continue
		}
		if m := logRefusal.FindStringSubmatch(line); m != nil && wanted[m[1]] > 0 {
			wanted[m[1]]--
			continue
		}
		t.Errorf("prism: %s", strings.TrimSpace(line))
	}
}

// stop ends prism, flushing its log.
func (p *prism) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *prism) logTail(n int) string {
	log, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// send sends c to base with X-Request-Id id and reads the answer.
func send(t *testing.T, client *http.Client, base string, c call, id string) answer {
	t.Helper()
	var body io.Reader
	switch b := c.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(c.method, base+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if _, isString := c.body.(string); body != nil && !isString {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("X-Request-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: read: %v", c, err)
	}
	return answer{call: c, status: resp.StatusCode, header: resp.Header, body: got}
}

// freePort is a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// repoRoot is the directory holding go.mod, above the package directory go
// test runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if dir == filepath.Dir(dir) {
			t.Fatalf("no go.mod in %s or above it", wd)
		}
	}
}
