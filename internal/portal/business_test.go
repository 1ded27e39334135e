package portal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoicepdf/pdftest"
	"github.com/payreq/payreq/internal/portaltest"
)

// pngOf is a w × h PNG in one colour.
func pngOf(t *testing.T, w, h int, c color.Color) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// chunk is a PNG chunk of kind with data, its CRC computed.
func chunk(kind string, data []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	out = append(out, kind...)
	out = append(out, data...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(kind), data...)))
}

// withText is p with a tEXt chunk holding text right after its header.
func withText(p []byte, text string) []byte {
	const ihdrEnd = 8 + 4 + 4 + 13 + 4
	out := append([]byte{}, p[:ihdrEnd]...)
	out = append(out, chunk("tEXt", []byte("Comment\x00"+text))...)
	return append(out, p[ihdrEnd:]...)
}

// bomb is a PNG of a few bytes whose header claims 20,000 × 20,000 pixels.
func bomb(t *testing.T) []byte {
	p := pngOf(t, 1, 1, color.Black)
	ihdr := append([]byte{}, p[16:16+13]...)
	binary.BigEndian.PutUint32(ihdr[0:], 20000)
	binary.BigEndian.PutUint32(ihdr[4:], 20000)
	return append(append(append([]byte{}, p[:8]...), chunk("IHDR", ihdr)...), p[8+4+4+13+4:]...)
}

var logoIn = regexp.MustCompile(`src="(/pay/logos/[0-9a-f]{64}\.png)"`)

func logoPath(t *testing.T, body string) string {
	t.Helper()
	m := logoIn.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no logo in the page:\n%s", body)
	}
	return m[1]
}

func businessValues(kv ...string) url.Values {
	v := url.Values{"displayName": {"Northside Coffee Roasters"}, "accentColor": {"#1F5FBF"}, "supportEmail": {"help@northside.example"},
		"supportPhone": {"(503) 555-0142"}, "paymentTermsDays": {"30"}, "invoiceFooter": {"Thank you for your business. EIN 12-3456789."}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// An Owner sets the business settings: the logo (a PNG carrying a script
// in a text chunk) is kept re-encoded, clean and at most 512 px wide,
// served at an address of its hash, cached for a year; a new logo moves
// the address (the old one still answers, for emails sent with it); the
// change is in the audit log.
func TestBusinessSettings(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	org := seed.Merchant.OrganizationID
	owner, _ := portaltest.SignedIn(t, env, org, "Owner")
	page := owner.Get("/portal/settings/business").Want(t, http.StatusOK).Has(t, `enctype="multipart/form-data"`, "Business settings")
	if !strings.Contains(page.Body, `href="/portal/settings/business"`) {
		t.Error("no Business link in the navigation")
	}
	script := "<script>alert(document.cookie)</script>"
	logo := withText(pngOf(t, 1024, 512, color.NRGBA{0x1f, 0x5f, 0xbf, 0xff}), script)
	if _, err := png.Decode(bytes.NewReader(logo)); err != nil {
		t.Fatalf("the test's PNG: %v", err)
	}
	owner.PostFiles("/portal/settings/business", page.CSRF(t), businessValues(),
		map[string]portaltest.File{"logo": {Name: "logo.png", Data: logo}}).WantRedirect(t, "/portal/settings/business?done=saved")

	saved := owner.Get("/portal/settings/business?done=saved").Want(t, http.StatusOK).Has(t, "The business settings were saved.",
		`value="Northside Coffee Roasters"`, `value="#1f5fbf"`, `value="help@northside.example"`, `value="(503) 555-0142"`,
		`value="30"`, "Thank you for your business. EIN 12-3456789.", `width="512" height="256"`, "Remove the logo")
	path := logoPath(t, saved.Body)
	served := owner.Get(path).Want(t, http.StatusOK)
	if cc := served.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
		t.Errorf("Cache-Control %q", cc)
	}
	if ct := served.Header.Get("Content-Type"); ct != "image/png" {
		t.Errorf("Content-Type %q", ct)
	}
	if strings.Contains(served.Body, "script") || strings.Contains(served.Body, "tEXt") {
		t.Error("the kept logo still carries the text chunk")
	}
	cfg, err := png.DecodeConfig(strings.NewReader(served.Body))
	if err != nil || cfg.Width != 512 || cfg.Height != 256 {
		t.Errorf("kept logo %dx%d (%v), want 512x256", cfg.Width, cfg.Height, err)
	}

	// Another logo, another address; the old one stays.
	owner.PostFiles("/portal/settings/business", saved.CSRF(t), businessValues(),
		map[string]portaltest.File{"logo": {Name: "logo.png", Data: pngOf(t, 200, 100, color.Black)}}).
		WantRedirect(t, "/portal/settings/business?done=saved")
	again := owner.Get("/portal/settings/business").Want(t, http.StatusOK).Has(t, `width="200" height="100"`)
	if p := logoPath(t, again.Body); p == path {
		t.Error("a new logo kept its address")
	}
	owner.Get(path).Want(t, http.StatusOK)
	owner.Get("/pay/logos/"+strings.Repeat("0", 64)+".png").Want(t, http.StatusNotFound)

	// Sent again without a file: the logo stays; removing it takes it away.
	owner.PostFiles("/portal/settings/business", again.CSRF(t), businessValues(), map[string]portaltest.File{"logo": {Name: "", Data: nil}}).
		WantRedirect(t, "/portal/settings/business?done=saved")
	if b, _ := directory.BrandingOf(context.Background(), env.App.DB, org); b.Logo == nil {
		t.Error("a form sent without a file removed the logo")
	}
	owner.PostFiles("/portal/settings/business", again.CSRF(t), businessValues("removeLogo", "on"), nil).
		WantRedirect(t, "/portal/settings/business?done=saved")
	if b, _ := directory.BrandingOf(context.Background(), env.App.DB, org); b.Logo != nil || b.DisplayName != "Northside Coffee Roasters" ||
		b.PaymentTermsDays == nil || *b.PaymentTermsDays != 30 {
		t.Errorf("after removing the logo: %+v", b)
	}
	owner.Get("/portal/audit").Want(t, http.StatusOK).Has(t, "business settings changed",
		"display name, logo, accent colour, support email, support phone, payment terms, invoice footer")
}

// Every refusal is the form again at 400 with the message beside its
// field and what was typed kept, and nothing stored: an SVG, a PNG whose
// header claims 20,000 × 20,000 pixels (refused before decoding), a
// broken PNG, a file over 1 MB, a colour of contrast 3:1 (the ratio and
// the minimum named), and bad terms, email, phone and footer.
func TestBusinessSettingsRefusals(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	org := seed.Merchant.OrganizationID
	owner, _ := portaltest.SignedIn(t, env, org, "Admin")
	csrf := owner.Get("/portal/settings/business").Want(t, http.StatusOK).CSRF(t)
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	big := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 1<<20)...)
	for _, c := range []struct {
		name  string
		form  url.Values
		logo  []byte
		field string
		text  string
	}{
		{"an SVG", businessValues("displayName", "Typed Name"), svg, "logo", "must be a PNG or JPEG"},
		{"a decompression bomb", businessValues("displayName", "Typed Name"), bomb(t), "logo", "20000 × 20000 pixels; it may be at most 4000 × 4000"},
		{"a broken PNG", businessValues("displayName", "Typed Name"), pngOf(t, 10, 10, color.Black)[:60], "logo", "could not be read"},
		{"over 1 MB", businessValues("displayName", "Typed Name"), big, "logo", "at most 1 MB"},
		{"a colour of contrast 3:1", businessValues("displayName", "Typed Name", "accentColor", "#949494"), nil, "accentColor", "3.0:1; it must be at least 4.5:1"},
		{"a colour that is not one", businessValues("displayName", "Typed Name", "accentColor", "blue"), nil, "accentColor", "six hexadecimal digits"},
		{"terms of a year and more", businessValues("displayName", "Typed Name", "paymentTermsDays", "400"), nil, "paymentTermsDays", "0 to 365"},
		{"an email that is not one", businessValues("displayName", "Typed Name", "supportEmail", "help@"), nil, "supportEmail", "email address"},
		{"a phone of letters", businessValues("displayName", "Typed Name", "supportPhone", "call us"), nil, "supportPhone", "phone number"},
		{"a footer of 501 characters", businessValues("displayName", "Typed Name", "invoiceFooter", strings.Repeat("x", 501)), nil, "invoiceFooter", "at most 500"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var files map[string]portaltest.File
			if c.logo != nil {
				files = map[string]portaltest.File{"logo": {Name: "logo.png", Data: c.logo}}
			}
			p := owner.PostFiles("/portal/settings/business", csrf, c.form, files).Want(t, http.StatusBadRequest)
			p.ErrorBeside(t, c.field, c.text).Has(t, `value="Typed Name"`)
			b, err := directory.BrandingOf(context.Background(), env.App.DB, org)
			if err != nil || b.DisplayName != "" || b.Logo != nil || b.AccentColor != "" {
				t.Errorf("something was stored: %+v %v", b, err)
			}
		})
	}
	// Without its CSRF token, nothing.
	owner.PostFiles("/portal/settings/business", "forged", businessValues(), nil).Want(t, http.StatusForbidden)
	if b, _ := directory.BrandingOf(context.Background(), env.App.DB, org); b.DisplayName != "" {
		t.Error("a forged form was kept")
	}
}

// Only Owners and Admins see and change the business settings and the
// locations' pages; another organization's location is a 404.
func TestBusinessSettingsPermissions(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	member, _ := portaltest.SignedIn(t, env, org, "Member", auth.PermissionsFor(auth.KindMerchant)...)
	home := member.Get("/portal/").Want(t, http.StatusOK)
	if strings.Contains(home.Body, `href="/portal/settings/business"`) {
		t.Error("a Member is shown the Business link")
	}
	member.Get("/portal/settings/business").Want(t, http.StatusForbidden).Has(t, "Owners and Admins")
	member.PostFiles("/portal/settings/business", home.CSRF(t), businessValues(), nil).Want(t, http.StatusForbidden)
	loc := "/portal/locations/" + m.Locs[0].Id.String()
	member.Get(loc).Want(t, http.StatusForbidden)
	member.Post(loc, home.CSRF(t), locationValues()).Want(t, http.StatusForbidden)
	if p := member.Get("/portal/locations").Want(t, http.StatusOK); strings.Contains(p.Body, `href="`+loc+`"`) {
		t.Error("a Member is offered the location's page")
	}
	if b, _ := directory.BrandingOf(context.Background(), env.App.DB, org); b.DisplayName != "" {
		t.Error("a Member's form was kept")
	}

	admin, _ := portaltest.SignedIn(t, env, org, "Admin")
	admin.Get("/portal/settings/business").Want(t, http.StatusOK)
	admin.Get(loc).Want(t, http.StatusOK)

	// Another merchant's Owner asks for this one's location.
	other, _ := portaltest.SignedIn(t, env, seed.Merchant.OrganizationID, "Owner")
	otherPage := other.Get("/portal/settings/business").Want(t, http.StatusOK)
	other.Get(loc).Want(t, http.StatusNotFound)
	other.Post(loc, otherPage.CSRF(t), locationValues()).Want(t, http.StatusNotFound)
	other.Get("/portal/locations/not-an-id").Want(t, http.StatusNotFound)
	if l, _ := env.App.Directory.Location(context.Background(), org, m.Locs[0].Id); l.AddressLine1 == "1 Other Street" {
		t.Error("another organization changed the location")
	}
}

func locationValues(kv ...string) url.Values {
	v := url.Values{"receiptName": {""}, "addressLine1": {"1 Other Street"}, "addressLine2": {"Unit 2"}, "city": {"Portland"},
		"state": {"OR"}, "postalCode": {"97209"}, "phone": {"(503) 555-0199"}, "email": {"pearl@northside.example"}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// A location's page changes its receipt name, address and contacts, with
// each refusal beside its field and the values kept; the change is
// audited; the locations list shows it.
func TestLocationPage(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	owner, _ := portaltest.SignedIn(t, env, org, "Owner", auth.LocationsView)
	loc := "/portal/locations/" + m.Locs[0].Id.String()
	list := owner.Get("/portal/locations").Want(t, http.StatusOK).Has(t, `href="`+loc+`"`)
	p := owner.Get(loc).Want(t, http.StatusOK).Has(t, m.Locs[0].Name, `value="`+m.Locs[0].AddressLine1+`"`)
	_ = list

	owner.Post(loc, p.CSRF(t), locationValues("email", "pearl@", "city", "", "addressLine1", "9 Typed Road")).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "email", "email address").ErrorBeside(t, "city", "required").
		Has(t, `value="9 Typed Road"`)
	owner.Post(loc, p.CSRF(t), locationValues("receiptName", "Northside Pearl")).WantRedirect(t, loc+"?done=saved")
	owner.Get(loc+"?done=saved").Want(t, http.StatusOK).Has(t, "The location was saved.", `value="Northside Pearl"`, `value="Unit 2"`)
	owner.Get("/portal/locations").Want(t, http.StatusOK).Has(t, "Northside Pearl", "1 Other Street, Unit 2, Portland, OR 97209",
		"(503) 555-0199", "pearl@northside.example")
	owner.Get("/portal/audit").Want(t, http.StatusOK).Has(t, "location changed", "receipt name, address, phone, email")
}

// The branding shows on the pay page (the name, the logo, the accent
// colour's stylesheet, cached for good) and in the invoice's PDF (the
// name, the footer, the logo drawn); the business's support contacts
// stand in for a location without its own.
func TestBrandingOnPayPageAndPDF(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	owner, _ := portaltest.SignedIn(t, env, org, "Owner")
	csrf := owner.Get("/portal/settings/business").Want(t, http.StatusOK).CSRF(t)
	owner.PostFiles("/portal/settings/business", csrf, businessValues(),
		map[string]portaltest.File{"logo": {Name: "logo.png", Data: pngOf(t, 300, 120, color.NRGBA{0x80, 0x20, 0x10, 0xff})}}).
		WantRedirect(t, "/portal/settings/business?done=saved")
	// The location's receipt name would come first, and its contacts.
	var mid = m.MIDs[0]
	owner.Post("/portal/locations/"+mid.LocationId.String(), csrf, locationValues("phone", "", "email", "")).
		WantRedirect(t, "/portal/locations/"+mid.LocationId.String()+"?done=saved")

	inv := m.MustCreate(t, m.Body("BRAND-1", "42.00"))
	pay := env.Visit(t, "GET", apitest.PayPath(t, inv), nil, nil)
	apitest.WantStatus(t, pay, http.StatusOK)
	for _, s := range []string{"<h1>Northside Coffee Roasters</h1>", `href="/pay/accent/1f5fbf.css"`, "(503) 555-0142",
		"help@northside.example", "Thank you for your business. EIN 12-3456789."} {
		if !strings.Contains(pay.Body, s) {
			t.Errorf("the pay page lacks %q:\n%s", s, pay.Body)
		}
	}
	logo := logoPath(t, pay.Body)
	if got := env.Visit(t, "GET", logo, nil, nil); got.StatusCode != http.StatusOK {
		t.Errorf("the pay page's logo: %d", got.StatusCode)
	}
	css := env.Visit(t, "GET", "/pay/accent/1f5fbf.css", nil, nil)
	apitest.WantStatus(t, css, http.StatusOK)
	if !strings.Contains(css.Body, "#1f5fbf") || css.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Errorf("accent stylesheet %q, Cache-Control %q", css.Body, css.Header.Get("Cache-Control"))
	}
	apitest.WantStatus(t, env.Visit(t, "GET", "/pay/accent/red.css", nil, nil), http.StatusNotFound)

	doc := env.Visit(t, "GET", apitest.PayPath(t, inv)+"/invoice.pdf", nil, nil)
	apitest.WantStatus(t, doc, http.StatusOK)
	text := pdftest.Read(t, []byte(doc.Body)).Text
	for _, s := range []string{"Northside Coffee Roasters", "Thank you for your business. EIN 12-3456789.", "(503) 555-0142"} {
		if !strings.Contains(text, s) {
			t.Errorf("the PDF lacks %q:\n%s", s, text)
		}
	}
	if !strings.Contains(doc.Body, "/Subtype /Image") {
		t.Error("the PDF draws no logo")
	}
}
