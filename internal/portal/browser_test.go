package portal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// screenshotsDir is where the README's screenshots live; the test writes
// them there when PAYREQ_WRITE_SCREENSHOTS=1 (make screenshots), and into
// its artifact directory otherwise.
const screenshotsDir = "../../docs/portal"

// TestPortalInChromium signs in as an Owner in headless Chromium, makes a
// key (its secret shown once), revokes it, invites a member, sets up a
// second factor, and opens every page in its states (errors included):
// each must pass axe-core's WCAG 2.1 A and AA rules at 390 and 1280 px,
// run no failing script, keep its Content-Security-Policy and fetch
// nothing from elsewhere (TestPagesWeighAtMost60KB weighs the pages).
func TestPortalInChromium(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	seed := env.Seed()
	mail := portaltest.StartMailbox(t, env)
	org := seed.Merchant.OrganizationID
	owner := portaltest.NewMember(t, env, org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	b := browsertest.Start(t, env.URL, 3*time.Minute)

	c := chromium{t: t, b: b, base: env.URL}
	run, read, text, check, open, submit := c.run, c.read, c.html, c.check, c.open, c.submit

	// Signing in: the empty form, a wrong password, then right.
	open("/portal/sign-in")
	check("sign-in")
	capture(t, b, "sign-in.png")
	run("fill", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", "not the password!"))
	submit(`button[type="submit"]`)
	if !strings.Contains(text(), "The email or the password is not right.") {
		t.Fatalf("a wrong password: %s", text())
	}
	check("sign-in, wrong password")
	run("fill", chromedp.SetValue("#password", owner.Password))
	submit(`main button[type="submit"]`)
	check("home")

	// A key: made, its secret shown once, then revoked.
	open("/portal/keys")
	check("keys, none yet")
	run("no browser checks", chromedp.SetAttributeValue(`main form[action="/portal/keys"]`, "novalidate", ""))
	submit(`main form[action="/portal/keys"] button`)
	check("keys, a name missing")
	const formKey = `document.querySelector('main form[action="/portal/keys"] input[name="idempotencyKey"]')`
	run("fill", chromedp.SendKeys("#name", "Accounting sync"), chromedp.Click(`#perm-payments\.view`))
	sentKey := read(chromedp.Evaluate[string](formKey + `.value`))
	submit(`main form[action="/portal/keys"] button`)
	secret := read(chromedp.Text("#key-secret"))
	if !strings.HasPrefix(secret, "ms_") {
		t.Fatalf("no secret shown: %s", text())
	}
	check("key made")
	capture(t, b, "key-made.png")
	// The same form sent again (its key the first sending's, as a double
	// click sends it): no second key, and no secret shown.
	open("/portal/keys")
	read(chromedp.Evaluate[string](formKey + `.value = "` + sentKey + `"`))
	run("fill as before", chromedp.SendKeys("#name", "Accounting sync"), chromedp.Click(`#perm-payments\.view`))
	submit(`main form[action="/portal/keys"] button`)
	if page := text(); !strings.Contains(page, "sent more than once") || strings.Contains(page, secret) {
		t.Fatalf("the form sent again: %s", page)
	}
	check("key made, the form sent again")
	open("/portal/keys")
	if strings.Contains(text(), secret) {
		t.Fatal("the secret is shown again")
	}
	check("keys")
	capture(t, b, "keys.png")
	submit(`a[href$="/revoke"]`)
	check("revoke a key")
	submit(`main form button.danger`)
	if !strings.Contains(text(), "Revoked") {
		t.Fatalf("the key is not shown revoked: %s", text())
	}
	check("keys, one revoked")

	// Members: an invitation, refused then sent; a member's page.
	open("/portal/members")
	run("fill", chromedp.SendKeys("#email", "not an email"))
	run("no browser check", chromedp.SetAttributeValue("#email", "type", "text"))
	submit(`main form[action="/portal/members"] button`)
	check("members, a bad email")
	run("fill", chromedp.SetValue("#email", "dana@example.com"), chromedp.Click(`#perm-payments\.view`))
	submit(`main form[action="/portal/members"] button`)
	check("members")
	capture(t, b, "members.png")
	submit(`tbody a`)
	check("a member")
	open("/portal/audit")
	check("audit log")
	capture(t, b, "audit.png")
	open("/portal/account")
	check("account")
	run("fill", chromedp.SendKeys("#currentPassword", "wrong"), chromedp.SendKeys("#password", "short"))
	submit(`main form button`)
	check("account, errors")

	// A second factor, set up with a code computed here.
	open("/portal/account/two-factor")
	check("two-factor setup")
	key := read(chromedp.Text("#secret"))
	run("no browser checks", chromedp.SetAttributeValue(`main form`, "novalidate", ""))
	submit(`main form button`)
	check("two-factor setup, no code")
	code, err := totp.GenerateCodeCustom(key, env.Clock.Now(), totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	run("fill", chromedp.SendKeys("#code", code))
	submit(`main form button`)
	check("recovery codes")
	open("/portal/organizations")
	check("organizations")
	open("/portal/nowhere")
	check("not found")

	// Signed out: the second step, the reset pages, the invitation.
	open("/portal/")
	submit(`.who button`)
	env.Clock.Advance(time.Minute)
	run("fill", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", owner.Password))
	submit(`main button[type="submit"]`)
	check("second step")
	open("/portal/password-reset")
	check("reset request")
	run("fill", chromedp.SendKeys("#email", "dana@example.com"))
	submit(`main form button`)
	check("reset requested")
	invitation := portaltest.Link(t, mail.Wait("dana@example.com", "invited"))
	open(invitation)
	check("invitation")
	run("no browser checks", chromedp.SetAttributeValue(`main form`, "novalidate", ""))
	submit(`main form button`)
	check("invitation, errors")
	reset := portaltest.Link(t, mail.Wait("dana@example.com", "Reset"))
	open(reset)
	check("reset")

	for _, v := range b.Violations() {
		t.Errorf("Content-Security-Policy refused %s", v)
	}
	for _, e := range b.Errors() {
		if !strings.Contains(e, "status of 4") { // the refusals answered 400, 401, 403, 404 on purpose
			t.Errorf("browser: %s", e)
		}
	}
	for _, u := range b.Foreign() {
		t.Errorf("fetched from elsewhere: %s", u)
	}
}

// capture saves the window as a README screenshot (PAYREQ_WRITE_SCREENSHOTS=1)
// or as the test's artifact.
func capture(t *testing.T, b *browsertest.Browser, name string) {
	t.Helper()
	captureAt(t, b, name, 720)
}

// captureDownTo is capture from the page's top, the window as tall as the
// element sel needs to end in it.
func captureDownTo(t *testing.T, b *browsertest.Browser, name, sel string) {
	t.Helper()
	if err := chromedp.Do(b.Tab, chromedp.EmulateViewport(1024, 720)); err != nil {
		t.Fatal(err)
	}
	bottom, err := chromedp.Run(b.Tab, chromedp.Evaluate[int64](`document.activeElement.blur(); window.scrollTo(0, 0);
		Math.ceil(document.querySelector('`+sel+`').getBoundingClientRect().bottom) + 16`))
	if err != nil {
		t.Fatal(err)
	}
	captureAt(t, b, name, max(bottom, 720))
}

func captureAt(t *testing.T, b *browsertest.Browser, name string, height int64) {
	t.Helper()
	if err := chromedp.Do(b.Tab, chromedp.EmulateViewport(1024, height)); err != nil {
		t.Fatal(err)
	}
	path := b.Screenshot(t, name)
	if os.Getenv("PAYREQ_WRITE_SCREENSHOTS") != "1" || path == "" {
		return
	}
	png, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(screenshotsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotsDir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResellerPortalInChromium signs in as a reseller's Owner and opens its
// portfolio, its applications (all, by stage, none at a stage, a stage
// refused) and an application, each passing axe-core at 390 and 1280 px;
// the sign-up page's address is copied with the button,
// and without JavaScript it is there to select, with no button.
func TestResellerPortalInChromium(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	seed := env.Seed()
	owner := portaltest.NewMember(t, env, seed.Reseller.OrganizationID, "Owner", auth.PermissionsFor(auth.KindReseller)...)
	b := browsertest.Start(t, env.URL, 3*time.Minute)
	tab := b.Tab
	c := chromium{t: t, b: b, base: env.URL}
	run, text, check, open := c.run, c.html, c.check, c.open

	open("/portal/sign-in")
	run("sign in", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", owner.Password))
	if _, err := chromedp.RunResponse(tab, chromedp.Click(`main button[type="submit"]`)); err != nil {
		t.Fatal(err)
	}

	signUp := env.App.Config.PublicURL + "/apply/" + seed.Reseller.Slug
	open("/portal/portfolio")
	check("portfolio")
	capture(t, b, "portfolio.png")
	// The copy button puts the address on the clipboard, and says so.
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(tab, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted, Origin: env.URL}); err != nil {
			t.Fatal(err)
		}
	}
	run("copy", chromedp.Click(`.copy button`), chromedp.WaitVisible(`.copy-status`))
	if err := chromedp.Do(tab, chromedp.Poll[chromedp.Void](`document.querySelector('.copy-status').textContent === 'Copied.'`, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatalf("the copy button did not say it copied: %v\n%s", err, text())
	}
	copied, err := chromedp.Run(tab, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil || copied != signUp {
		t.Errorf("the clipboard holds %q (%v), want %q", copied, err, signUp)
	}
	check("portfolio, the address copied")
	// Without JavaScript: the address, no button.
	if _, err := chromedp.Call(tab, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	open("/portal/portfolio")
	if html := text(); strings.Contains(html, `class="copy"`) || !strings.Contains(html, `data-copy="Copy the address">`+signUp+`</code>`) {
		t.Errorf("without JavaScript: a button, or no address:\n%s", html)
	}
	if _, err := chromedp.Call(tab, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false}); err != nil {
		t.Fatal(err)
	}

	open("/portal/applications")
	check("applications")
	capture(t, b, "applications.png")
	run("choose a stage", chromedp.SetValue("#stage", "in_review"))
	if _, err := chromedp.RunResponse(tab, chromedp.Click(`main form button`)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text(), `<option value="in_review" selected="">`) {
		t.Errorf("the stage chosen is not shown:\n%s", text())
	}
	check("applications in review")
	open("/portal/applications?stage=boarded")
	check("applications, none at a stage")
	open("/portal/applications?stage=nonsense")
	check("applications, a stage refused")
	open("/portal/applications")
	if _, err := chromedp.RunResponse(tab, chromedp.Click(`tbody a`)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text(), "Stage history") {
		t.Fatalf("not an application's page:\n%s", text())
	}
	check("an application")
	capture(t, b, "application.png")

	for _, v := range b.Violations() {
		t.Errorf("Content-Security-Policy refused %s", v)
	}
	for _, e := range b.Errors() {
		if !strings.Contains(e, "status of 400") { // the stage refused on purpose
			t.Errorf("browser: %s", e)
		}
	}
	for _, u := range b.Foreign() {
		t.Errorf("fetched from elsewhere: %s", u)
	}
}
