package portal_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// layoutFaults is a script listing what the open page does wrong at its
// width: the document wider than the window, a table wider than its box,
// a word or an amount laid out on two lines (broken inside itself; ids,
// addresses and anything longer than a line may break), an amount column's cell out of view.
const layoutFaults = `(() => {
  const out = [], w = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > w) out.push('the document is ' + document.documentElement.scrollWidth + ' px wide in a window of ' + w);
  for (const box of document.querySelectorAll('.table-wrap'))
    if (box.scrollWidth > box.clientWidth + 1) out.push('a table is ' + box.scrollWidth + ' px wide in a box of ' + box.clientWidth);
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n; (n = walk.nextNode());) {
    const el = n.parentElement;
    if (!el.closest('td, th, dd, dt, nav, .tiles') || el.closest('code, pre, .visually-hidden, thead') || !el.getClientRects().length) continue;
    const words = /[^\s\-–]+/g;
    for (let m; (m = words.exec(n.data));) {
      if (/[@\/:_]/.test(m[0]) || m[0].length > 24) continue;
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      const lines = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
      if (lines.size > 1) out.push('"' + m[0] + '" breaks inside itself');
    }
  }
  for (const table of document.querySelectorAll('.table-wrap table')) {
    const box = table.closest('.table-wrap').getBoundingClientRect();
    const row = table.querySelector('tbody tr');
    for (const td of row ? row.querySelectorAll('td.num') : []) {
      const r = td.getBoundingClientRect();
      if (!td.textContent.trim()) continue;
      if (r.width === 0 || r.left < 0 || r.right > Math.min(w, box.right) + 1)
        out.push('the ' + (td.dataset.label || 'amount') + ' cell is out of view (' + Math.round(r.left) + '–' + Math.round(r.right) + ' px)');
    }
  }
  return out;
})()`

// TestPortalOnPhonesInChromium opens the main pages of a merchant with
// data (invoices in several states, a draft with taxed lines, a sale part
// refunded, a deposit, a webhook, members) at 320, 390 and 1280 px: no page is wider than
// the window, no table wider than its box, no word breaks inside itself,
// every amount is in view, axe-core finds nothing. On a phone the menu is
// a button that opens without the script, and the filters are folded.
func TestPortalOnPhonesInChromium(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	d := newMerchantDay(t, env, "PH-1001")
	m := d.m
	owner := portaltest.NewMember(t, env, d.org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	portaltest.NewMember(t, env, d.org, "Member", auth.PaymentsView)
	for i, name := range []string{"Bartholomew Featherstonehaugh", "Approved Member Refunded", "Ada Park"} {
		b := m.Body(fmt.Sprintf("PH-100%d", i+2), "1234.56", apitest.Line("3", "400"), apitest.Line("1", "34.56"))
		b["customerName"], b["customerEmail"] = name, strings.ToLower(strings.Fields(name)[0])+"@example.com"
		m.MustCreate(t, b)
	}
	// A draft (the demo's newest is one) of a customer whose email is
	// longer than a 320 px phone's column, its lines taxed and not.
	taxed := apitest.Line("3", "68")
	taxed["description"], taxed["taxRate"] = "House espresso, 5 lb bag", "8.875"
	plain := apitest.Line("1", "120")
	plain["description"] = "Grinder service"
	db := m.Body("PH-1005", "342.11", taxed, plain)
	db["draft"], db["customerName"], db["customerCompany"] = true, "Priya Raman", "Hawthorne Dental"
	db["customerEmail"] = "office@hawthornedental.example.com"
	draft := m.MustCreate(t, db)
	r := env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + d.sale + "/refund", Token: m.Token,
		Body: map[string]any{"amount": "5.00", "reason": "One cup was chipped"}})
	apitest.Want(t, "refund", r.StatusCode, http.StatusCreated)

	b := browsertest.Start(t, env.URL, 5*time.Minute)
	c := chromium{t: t, b: b, base: env.URL}
	c.open("/portal/sign-in")
	c.run("sign in", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", owner.Password))
	c.submit(`main button[type="submit"]`)

	pages := []struct{ name, path string }{
		{"home", "/portal/"},
		{"invoices", "/portal/invoices"},
		{"invoice", "/portal/invoices/" + d.invoice},
		{"draft", "/portal/invoices/" + draft.Id.String()},
		{"invoice-new", "/portal/invoices/new"},
		{"customers", "/portal/customers"},
		{"card-payments", "/portal/card-payments"},
		{"card-payment", "/portal/card-payments/" + d.sale},
		{"deposits", "/portal/deposits"},
		{"deposit", "/portal/deposits/" + d.deposit},
		{"events", "/portal/events"},
		{"webhook", "/portal/webhooks/" + d.endpoint},
		{"members", "/portal/members"},
		{"keys", "/portal/keys"},
		{"audit", "/portal/audit"},
	}
	for _, p := range pages {
		c.open(p.path)
		for _, w := range []int64{320, 390, 1280} {
			for _, v := range b.Axe(t, w) {
				t.Errorf("%s: %s", p.name, v)
			}
			for _, f := range c.faults() {
				t.Errorf("%s at %d px: %s", p.name, w, f)
			}
			if w != 320 {
				b.FullScreenshot(t, fmt.Sprintf("%s-%d.png", p.name, w))
			}
		}
	}

	// On a phone the navigation is behind its button, which opens it
	// without the script; on a wide screen it is shown, the button not.
	c.open("/portal/card-payments")
	c.run("a phone", chromedp.EmulateViewport(390, 900))
	if shown(t, c, `nav a[href="/portal/deposits"]`) || shown(t, c, `form[role="search"]`) {
		t.Error("at 390 px the menu or the filters are open before they are asked for")
	}
	c.run("open the menu", chromedp.Click(`.top summary`))
	c.run("open the filters", chromedp.Click(`details.fold summary`))
	if !shown(t, c, `nav a[href="/portal/deposits"]`) || !shown(t, c, `form[role="search"]`) {
		t.Error("at 390 px the menu or the filters do not open from their buttons")
	}
	c.open("/portal/card-payments?kind=refund")
	c.run("a phone", chromedp.EmulateViewport(390, 900))
	if !shown(t, c, `form[role="search"]`) {
		t.Error("filters in use are folded away")
	}
	c.open("/portal/card-payments")
	c.run("a wide screen", chromedp.EmulateViewport(1280, 900))
	if !shown(t, c, `nav a[href="/portal/deposits"]`) || !shown(t, c, `form[role="search"]`) || shown(t, c, `.top summary`) {
		t.Error("at 1280 px the menu and the filters are not simply shown")
	}

	for _, v := range b.Violations() {
		t.Errorf("Content-Security-Policy refused %s", v)
	}
	for _, e := range b.Errors() {
		t.Errorf("browser: %s", e)
	}
}

// faults are layoutFaults' findings on the open page.
func (c chromium) faults() []string {
	c.t.Helper()
	out, err := chromedp.Run(c.b.Tab, chromedp.Evaluate[[]string](layoutFaults))
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// shown says whether the first element sel matches is shown (not in a
// closed <details>, not display: none).
func shown(t *testing.T, c chromium, sel string) bool {
	t.Helper()
	ok, err := chromedp.Run(c.b.Tab, chromedp.Evaluate[bool](`(() => { const e = document.querySelector('`+sel+`');
		return !!e && e.checkVisibility() && e.getBoundingClientRect().height > 0; })()`))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
