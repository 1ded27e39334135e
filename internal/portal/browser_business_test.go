package portal_test

import (
	"image/color"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// TestBusinessSettingsInChromium opens the business settings as an
// Owner in headless Chromium: empty, a colour of too little contrast
// refused beside its field, then saved with a logo chosen as a file; and a
// location's page. Each state must pass axe-core's WCAG 2.1 A and AA rules
// at 390 and 1280 px.
func TestBusinessSettingsInChromium(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	owner := portaltest.NewMember(t, env, uuid.MustParse(m.Org), "Owner")
	logo := filepath.Join(t.TempDir(), "logo.png")
	if err := os.WriteFile(logo, pngOf(t, 800, 200, color.NRGBA{0x12, 0x4a, 0x2f, 0xff}), 0o600); err != nil {
		t.Fatal(err)
	}
	b := browsertest.Start(t, env.URL, 3*time.Minute)
	c := chromium{t: t, b: b, base: env.URL}

	c.open("/portal/sign-in")
	c.run("sign in", chromedp.SendKeys("#email", owner.Email), chromedp.SendKeys("#password", owner.Password))
	c.submit(`main button[type="submit"]`)

	c.open("/portal/settings/business")
	c.has("business settings", "Accent colour", "Invoice footer")
	c.check("business settings, empty")

	c.run("type", chromedp.SendKeys("#displayName", "Northside Coffee Roasters"), chromedp.SendKeys("#accentColor", "#949494"))
	c.submit(`main form button[type="submit"]`)
	c.has("refused", "3.0:1", `value="Northside Coffee Roasters"`)
	c.check("business settings, a colour refused")

	c.run("fix and choose a logo", chromedp.SetValue("#accentColor", "#124a2f"), chromedp.SetUploadFiles("#logo", []string{logo}))
	c.submit(`main form button[type="submit"]`)
	c.has("saved", "The business settings were saved.", `width="512" height="128"`)
	c.check("business settings, saved with a logo")

	c.open("/portal/locations/" + m.Locs[0].Id.String())
	c.has("a location", "Receipt name", "Postal code")
	c.check("a location")
}
