package docs_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/apitest"
)

const chromium = "/usr/bin/chromium"

// redocAttribution is the logo Redoc's sidebar footer loads from Redocly's
// CDN. The page's policy refuses it, and Redoc then leaves it out.
const redocAttribution = "https://cdn.redoc.ly/redoc/logo-mini.svg"

// recordViolations runs before the page's own scripts and keeps every
// Content-Security-Policy violation, for the test to read.
const recordViolations = `window.__violations = [];
document.addEventListener('securitypolicyviolation', e =>
	window.__violations.push(e.effectiveDirective + ' ' + e.blockedURI));`

// TestReferenceRendersInChromium opens /docs as a reader would and finds
// every operation's summary on the page Redoc drew, with nothing fetched
// from anywhere but this service. The screenshot goes to the test's
// artifact directory: kept with go test -artifacts, else removed like
// t.TempDir.
func TestReferenceRendersInChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("this test needs Debian's Chromium at %s (%v): `make test` installs it (apt-get install -y chromium)", chromium, err)
	}
	summaries := operationSummaries(t)
	env := apitest.New(t, testDSN, apitest.Options{})
	origin, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
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
	defer cancelAlloc()

	var mu sync.Mutex
	var errs, foreign []string
	browser, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			u, err := url.Parse(ev.Request.URL)
			if err == nil && (u.Scheme == "data" || u.Scheme == "blob" || u.Host == origin.Host) {
				return
			}
			foreign = append(foreign, ev.Request.URL)
		case *network.EventLoadingFailed:
			if ev.BlockedReason != network.BlockedReasonCsp {
				errs = append(errs, fmt.Sprintf("loading %s failed: %s %s", ev.Type, ev.ErrorText, ev.BlockedReason))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			errs = append(errs, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				errs = append(errs, "console.error: "+strings.Join(args, " "))
			}
		case *log.EventEntryAdded:
			// CSP refusals are checked below, one by one.
			if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceSecurity {
				errs = append(errs, fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}))
	defer cancelBrowser()

	if _, err := chromedp.Call(browser, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: recordViolations}); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	if err := chromedp.Do(browser, chromedp.Navigate(env.URL+"/docs")); err != nil {
		t.Fatalf("open /docs: %v", err)
	}

	// Redoc fetches the spec and renders after the load event: wait until
	// every summary is on the page, or give up with those that are not.
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		text, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		text = strings.Join(strings.Fields(text), " ")
		missing = missing[:0]
		for _, s := range summaries {
			if !strings.Contains(text, s) {
				missing = append(missing, s)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	screenshot(t, browser, "docs.png")
	if len(missing) > 0 {
		t.Errorf("%d of %d operation summaries are not on the page: %q", len(missing), len(summaries), missing)
	} else if err := chromedp.Do(browser,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[id="operation/createPaymentRequest" i]').scrollIntoView()`),
		chromedp.Sleep(300*time.Millisecond), // Redoc follows the scroll in its menu
	); err != nil {
		t.Errorf("scroll to the create operation: %v", err)
	} else {
		screenshot(t, browser, "docs-create.png") // an operation, with its samples
	}

	violations, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`window.__violations`))
	if err != nil {
		t.Fatalf("read CSP violations: %v", err)
	}
	for _, v := range violations {
		if v != "img-src "+redocAttribution {
			t.Errorf("Content-Security-Policy refused %s", v)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range foreign {
		if u != redocAttribution {
			t.Errorf("the page asked for %s, outside this service", u)
		}
	}
	for _, e := range errs {
		t.Errorf("browser: %s", e)
	}
}

// operationSummaries are the summaries of every operation in the embedded
// spec, whitespace collapsed as in the page's text.
func operationSummaries(t *testing.T) []string {
	t.Helper()
	spec, err := gen.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	var summaries []string
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			s := strings.Join(strings.Fields(op.Summary), " ")
			if s == "" {
				t.Errorf("%s %s has no summary", method, path)
				continue
			}
			summaries = append(summaries, s)
		}
	}
	slices.Sort(summaries)
	if len(summaries) == 0 {
		t.Fatal("the spec has no operations")
	}
	return summaries
}

// screenshot saves what the reader sees, and logs where.
func screenshot(t *testing.T, browser context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(browser, chromedp.CaptureScreenshot())
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
