package portal_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/payreq/payreq/internal/browsertest"
)

// chromium drives the tab of a browser test against the portal at base.
type chromium struct {
	t    *testing.T
	b    *browsertest.Browser
	base string
}

// run runs actions, failing the test with what it was doing.
func (c chromium) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(c.b.Tab, actions...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

func (c chromium) read(a chromedp.Action[string]) string {
	c.t.Helper()
	s, err := chromedp.Run(c.b.Tab, a)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// html is the page as the browser holds it now.
func (c chromium) html() string {
	c.t.Helper()
	return c.read(chromedp.OuterHTML("html"))
}

// check runs axe-core's WCAG 2.1 A and AA rules at 390 and 1280 px.
func (c chromium) check(state string) {
	c.t.Helper()
	for _, w := range []int64{390, 1280} {
		for _, v := range c.b.Axe(c.t, w) {
			c.t.Errorf("%s: %s", state, v)
		}
	}
}

func (c chromium) open(path string) {
	c.t.Helper()
	c.run("open "+path, chromedp.Navigate(c.base+path))
}

// submit clicks what sends a form (or follows a link) and waits for the
// page it leads to.
func (c chromium) submit(sel string) {
	c.t.Helper()
	if _, err := chromedp.RunResponse(c.b.Tab, chromedp.Click(sel)); err != nil {
		c.t.Fatalf("click %s: %v", sel, err)
	}
}

// has fails the test unless the page holds every one of texts.
func (c chromium) has(state string, texts ...string) {
	c.t.Helper()
	page := c.html()
	for _, s := range texts {
		if !strings.Contains(page, s) {
			c.t.Fatalf("%s: the page lacks %q:\n%s", state, s, page)
		}
	}
}
