// Package browsertest opens the running service's pages in Debian's headless
// Chromium, as a reader would, and keeps what a page must not do: throw, log
// an error, break its Content-Security-Policy, or fetch from anywhere but the
// service.
package browsertest

import (
	"context"
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
