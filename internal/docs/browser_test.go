package docs_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/browsertest"
)

// redocAttribution is the logo Redoc's sidebar footer loads from Redocly's
// CDN. The page's policy refuses it, and Redoc then leaves it out.
const redocAttribution = "https://cdn.redoc.ly/redoc/logo-mini.svg"

// TestReferenceRendersInChromium opens /docs as a reader would and finds
// every operation's summary on the page Redoc drew, with nothing fetched
// from anywhere but this service. The screenshot goes to the test's
// artifact directory: kept with go test -artifacts, else removed like
// t.TempDir.
func TestReferenceRendersInChromium(t *testing.T) {
	summaries := operationSummaries(t)
	env := apitest.New(t, testDSN, apitest.Options{})
	b := browsertest.Start(t, env.URL, 2*time.Minute)
	if err := chromedp.Do(b.Tab, chromedp.Navigate(env.URL+"/docs")); err != nil {
		t.Fatalf("open /docs: %v", err)
	}

	// Redoc fetches the spec and renders after the load event: wait until
	// every summary is on the page, or give up with those that are not.
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		text, err := chromedp.Run(b.Tab, chromedp.Evaluate[string](`document.body.innerText`))
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
	b.Screenshot(t, "docs.png")
	if len(missing) > 0 {
		t.Errorf("%d of %d operation summaries are not on the page: %q", len(missing), len(summaries), missing)
	} else if err := chromedp.Do(b.Tab,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[id="operation/createPaymentRequest" i]').scrollIntoView()`),
		chromedp.Sleep(300*time.Millisecond), // Redoc follows the scroll in its menu
	); err != nil {
		t.Errorf("scroll to the create operation: %v", err)
	} else {
		b.Screenshot(t, "docs-create.png") // an operation, with its samples
	}

	for _, v := range b.Violations() {
		if v != "img-src "+redocAttribution {
			t.Errorf("Content-Security-Policy refused %s", v)
		}
	}
	for _, u := range b.Foreign() {
		if u != redocAttribution {
			t.Errorf("the page asked for %s, outside this service", u)
		}
	}
	for _, e := range b.Errors() {
		t.Errorf("browser: %s", e)
	}
}

// operationSummaries are the summaries of every operation in the embedded
// spec, whitespace collapsed as in the page's text.
func operationSummaries(t *testing.T) []string {
	t.Helper()
	spec, err := gen.GetSpec()
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
