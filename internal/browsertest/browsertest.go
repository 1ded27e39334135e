// Package browsertest opens the running service's pages in Debian's headless
// Chromium, as a reader would, and keeps what a page must not do: throw, log
// an error, break its Content-Security-Policy, or fetch from anywhere but the
// service.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Path is where Debian's chromium package puts the browser.
const Path = "/usr/bin/chromium"

// reportViolations runs before each page's own scripts and hands every
// Content-Security-Policy violation to the Go side, so that none is lost when
// the page navigates away.
const reportViolations = `document.addEventListener('securitypolicyviolation', e =>
	window.__cspViolation(e.effectiveDirective + ' ' + e.blockedURI));`

// Browser is one tab of a fresh Chromium, closed when the test ends.
type Browser struct {
	// Tab is the context to run chromedp actions in.
	Tab context.Context

	origin string // host:port of the service

	mu                        sync.Mutex
	errs, violations, foreign []string
}

// Start launches Chromium on a fresh profile and opens a tab; serviceURL is the
// base URL the pages may fetch from. Every action must be done within timeout.
// Without Chromium the test fails, saying how to install it.
func Start(t testing.TB, serviceURL string, timeout time.Duration) *Browser {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		t.Fatalf("this test needs Debian's Chromium at %s (%v): `make test` installs it (apt-get install -y chromium)", Path, err)
	}
	u, err := url.Parse(serviceURL)
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{origin: u.Host}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(Path),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(b.record))
	t.Cleanup(cancelTab)
	b.Tab = tab

	err = chromedp.Do(tab, chromedp.ExposeFunc("__cspViolation", func(_ context.Context, v string) (chromedp.Void, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.violations = append(b.violations, v)
		return chromedp.Void{}, nil
	}))
	if err == nil {
		_, err = chromedp.Call(tab, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: reportViolations})
	}
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return b
}

// record keeps the events that tell of a page's errors and foreign requests.
func (b *Browser) record(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		u, err := url.Parse(ev.Request.URL)
		if err == nil && (u.Scheme == "data" || u.Scheme == "blob" || u.Host == b.origin) {
			return
		}
		b.foreign = append(b.foreign, ev.Request.URL)
	case *network.EventLoadingFailed:
		// A refusal by the policy is reported as a violation.
		if ev.BlockedReason != network.BlockedReasonCsp {
			b.errs = append(b.errs, fmt.Sprintf("loading %s failed: %s %s", ev.Type, ev.ErrorText, ev.BlockedReason))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.errs = append(b.errs, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			b.errs = append(b.errs, "console.error: "+strings.Join(args, " "))
		}
	case *log.EventEntryAdded:
		// The policy's refusals are reported as violations. Every page names
		// its icon (data:), so Chromium asks for no /favicon.ico.
		if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceSecurity {
			b.errs = append(b.errs, fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		}
	}
}

// Errors are the exceptions, console errors, error log entries (among them
// resources answered with an error status) and failed loads of every page so
// far.
func (b *Browser) Errors() []string { return b.copy(&b.errs) }

// Violations are the Content-Security-Policy violations of every page so far,
// each as its directive and the blocked URI ("img-src https://…").
func (b *Browser) Violations() []string { return b.copy(&b.violations) }

// Foreign are the URLs requested from anywhere but the service.
func (b *Browser) Foreign() []string { return b.copy(&b.foreign) }

func (b *Browser) copy(s *[]string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), *s...)
}

// Screenshot saves what the window shows as a PNG named name in the test's
// artifact directory (kept with go test -artifacts, else removed like
// t.TempDir), logs where and returns the path.
func (b *Browser) Screenshot(t testing.TB, name string) string {
	t.Helper()
	return b.save(t, name, chromedp.CaptureScreenshot())
}

// FullScreenshot is Screenshot of the whole page, beyond the window.
func (b *Browser) FullScreenshot(t testing.TB, name string) string {
	t.Helper()
	return b.save(t, name, chromedp.FullScreenshot(100))
}

func (b *Browser) save(t testing.TB, name string, capture chromedp.Action[[]byte]) string {
	t.Helper()
	png, err := chromedp.Run(b.Tab, capture)
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// axeScript is axe-core as `make test` installs it into .tools/node
// (NPM_TOOLS in the Makefile), from the repository root.
const axeScript = ".tools/node/node_modules/axe-core/axe.min.js"

// axeTags are the rules Axe runs: WCAG 2.1, levels A and AA.
const axeTags = `['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']`

// Axe runs axe-core on the open page with the window width px wide, and
// returns its WCAG 2.1 A and AA violations, one line each: the rule, what
// it asks and the elements that break it. The width stays for what follows.
func (b *Browser) Axe(t testing.TB, width int64) []string {
	t.Helper()
	root, err := repositoryRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, axeScript))
	if err != nil {
		t.Fatalf("axe-core is missing (%v): `make test` installs it", err)
	}
	if err := chromedp.Do(b.Tab, chromedp.EmulateViewport(width, 900)); err != nil {
		t.Fatalf("set the window to %d px: %v", width, err)
	}
	// Evaluated through the DevTools protocol, so the page's
	// Content-Security-Policy does not apply to axe's script.
	if _, err := chromedp.Run(b.Tab, chromedp.Evaluate[bool](string(src)+"; true")); err != nil {
		t.Fatalf("load axe-core: %v", err)
	}
	type violation struct {
		ID, Help string
		Nodes    []struct {
			Target json.RawMessage
		}
	}
	found, err := chromedp.Run(b.Tab, chromedp.Evaluate[[]violation](
		`axe.run(document, {runOnly: {type: 'tag', values: `+axeTags+`}}).then(r => r.violations)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe-core: %v", err)
	}
	var out []string
	for _, v := range found {
		var targets []string
		for _, n := range v.Nodes {
			targets = append(targets, string(n.Target))
		}
		out = append(out, fmt.Sprintf("%s (%s) at %d px: %s", v.ID, v.Help, width, strings.Join(targets, ", ")))
	}
	return out
}

// repositoryRoot is the nearest folder above the working directory that
// holds go.mod.
func repositoryRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
