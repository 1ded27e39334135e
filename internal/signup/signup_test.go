package signup_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/webhook"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// fixture is a server with a seeded reseller, its token and its slug.
type fixture struct {
	*apitest.Env
	org   uuid.UUID
	slug  string
	token string
}

func newFixture(t *testing.T, opts apitest.Options) *fixture {
	t.Helper()
	env := apitest.New(t, testDSN, opts)
	seed := env.Seed()
	if seed.Reseller.Slug == "" {
		t.Fatal("the demo reseller has no slug")
	}
	return &fixture{Env: env, org: seed.Reseller.OrganizationID, slug: seed.Reseller.Slug,
		token: env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)}
}

func (f *fixture) applications(t *testing.T) []models.Application {
	t.Helper()
	var apps []models.Application
	resp := f.Do(apitest.Request{Method: "GET", Path: "/applications?limit=100", Token: f.token})
	apitest.Want(t, "GET /applications", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &apps)
	return apps
}

// noSecrets fails the test when text holds a full number of the form.
func noSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range apitest.FormSecrets {
		if strings.Contains(text, s) {
			t.Errorf("%s holds the full number %s", what, s)
		}
	}
}

var thanksPath = regexp.MustCompile(`^/apply/([a-z0-9-]+)/thanks/([0-9a-f-]{36})$`)

func TestValidSubmissionIsAnApplicationWithOnlyLastFoursAndItsEvent(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	// The demo's events are fanned out before the endpoint exists.
	worker := f.Webhooks(webhook.WorkerConfig{AllowPrivate: true})
	apitest.Deliver(t, worker)
	rc := apitest.NewReceiver(t)
	var ep models.WebhookEndpointWithSecret
	resp := f.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: f.token,
		Body: map[string]any{"url": rc.URL, "eventTypes": []string{"application.submitted"}}})
	apitest.Want(t, "create endpoint", resp.StatusCode, http.StatusCreated)
	resp.JSON(t, &ep)
	before := len(f.applications(t))

	a := f.NewApplicant()
	form := a.Visit(t, "GET", "/apply/"+f.slug, nil)
	apitest.WantStatus(t, form, http.StatusOK)
	for _, want := range []string{"<h1>Northwind Payments ", `name="business.legalName"`, `name="owners.3.ssn"`,
		`name="bank.routingNumber"`, `name="consent"`, `name="signature"`, `name="csrf"`} {
		if !strings.Contains(form.Body, want) {
			t.Errorf("the form lacks %s", want)
		}
	}
	for h, want := range map[string]string{"Content-Security-Policy": "frame-ancestors 'none'", "Cache-Control": "no-store",
		"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
		if got := form.Header.Get(h); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q in it", h, got, want)
		}
	}

	sent := a.Send(t, f.slug, apitest.ApplicationForm())
	apitest.WantStatus(t, sent, http.StatusSeeOther)
	m := thanksPath.FindStringSubmatch(sent.Header.Get("Location"))
	if m == nil || m[1] != f.slug {
		t.Fatalf("303 to %q, want /apply/%s/thanks/{reference}", sent.Header.Get("Location"), f.slug)
	}
	id := uuid.MustParse(m[2])
	thanks := a.Visit(t, "GET", sent.Header.Get("Location"), nil)
	apitest.WantStatus(t, thanks, http.StatusOK)
	if !strings.Contains(thanks.Body, "Application received") || !strings.Contains(thanks.Body, id.String()) {
		t.Errorf("the thank-you page does not give the reference %s: %s", id, thanks.Body)
	}
	noSecrets(t, "the thank-you page", thanks.Body)

	// The reseller reads it: last fours only, the owners as given, signed.
	apps := f.applications(t)
	apitest.Want(t, "applications", len(apps), before+1)
	apitest.Want(t, "newest first", apps[0].Id, id)
	raw := f.Do(apitest.Request{Method: "GET", Path: "/applications/" + id.String(), Token: f.token})
	apitest.Want(t, "GET /applications/{id}", raw.StatusCode, http.StatusOK)
	noSecrets(t, "GET /applications/{id}", string(raw.Body))
	var got models.Application
	raw.JSON(t, &got)
	apitest.Want(t, "stage", got.Stage, models.ApplicationStageSubmitted)
	apitest.Want(t, "legal name", got.Business.LegalName, "Cedar Street Auto Repair LLC")
	apitest.Want(t, "tax id last four", got.Business.TaxIdLastFour, apitest.FormTaxID[5:])
	apitest.Want(t, "account last four", got.Bank.AccountLastFour, apitest.FormAccount[6:])
	apitest.Want(t, "routing number", got.Bank.RoutingNumber, apitest.FormRouting)
	apitest.WantText(t, "website left empty", got.Business.Website, "<nil>")
	if len(got.Owners) != 2 || got.Owners[0].SsnLastFour != apitest.FormSSN1[5:] || got.Owners[1].Name != "Tom Becker" ||
		got.Owners[1].SsnLastFour != apitest.FormSSN2[5:] || got.Owners[1].OwnershipPercent.Text('f') != "40.00" {
		t.Errorf("owners %+v, want the two of sections 1 and 3, last fours only", got.Owners)
	}
	apitest.WantText(t, "the signature in the history", got.History[0].Note,
		"Submitted on the sign-up page, signed electronically by "+apitest.FormSignedBy)

	// Its event, delivered to the endpoint, verified with the Standard
	// Webhooks library, carries the application as GET shows it.
	apitest.Deliver(t, worker)
	hooks := rc.Hooks()
	if len(hooks) != 1 {
		t.Fatalf("%d deliveries, want the one application.submitted", len(hooks))
	}
	wh, err := standardwebhooks.NewWebhook(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(hooks[0].Body, hooks[0].Header); err != nil {
		t.Fatalf("the Standard Webhooks library refuses the delivery: %v", err)
	}
	var event struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(hooks[0].Body, &event); err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "event type", event.Type, "application.submitted")
	var data models.Application
	if err := json.Unmarshal(event.Data, &data); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(got)
	again, _ := json.Marshal(data)
	apitest.Want(t, "event data is the application as GET shows it", string(again), string(want))
	noSecrets(t, "the event", string(hooks[0].Body))
	noSecrets(t, "the log", f.Log.String())
}

// The same form sent twice (a double click, a retry) makes one
// application, and both answers lead to it.
func TestDoubleSubmitMakesOneApplication(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	before := len(f.applications(t))
	a := f.NewApplicant()
	page := a.Visit(t, "GET", "/apply/"+f.slug, nil)
	form := apitest.ApplicationForm()
	form.Set("csrf", apitest.Hidden(t, page, "csrf"))
	form.Set("key", apitest.Hidden(t, page, "key"))
	first := a.Visit(t, "POST", "/apply/"+f.slug, form)
	second := a.Visit(t, "POST", "/apply/"+f.slug, form)
	apitest.WantStatus(t, first, http.StatusSeeOther)
	apitest.WantStatus(t, second, http.StatusSeeOther)
	apitest.Want(t, "the second answer", second.Header.Get("Location"), first.Header.Get("Location"))
	apitest.Want(t, "applications", len(f.applications(t)), before+1)

	// The same form with other details: refused, nothing made.
	form.Set("business.legalName", "Another Business LLC")
	apitest.WantStatus(t, a.Visit(t, "POST", "/apply/"+f.slug, form), http.StatusUnprocessableEntity)
	apitest.Want(t, "applications after a changed resend", len(f.applications(t)), before+1)

	// A key the page did not make is no key: never stored, never a 500.
	form.Set("key", "made up\x00")
	apitest.WantStatus(t, a.Visit(t, "POST", "/apply/"+f.slug, form), http.StatusSeeOther)
	apitest.Want(t, "applications after a form without a key", len(f.applications(t)), before+2)
}

func TestEachInvalidFieldIsRefusedBesideItWithNothingStored(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	before := len(f.applications(t))
	cases := []struct {
		name   string
		change func(url.Values)
		field  string // the field the message is beside
		want   string
	}{
		{"routing number failing the ABA checksum", func(v url.Values) { v.Set("bank.routingNumber", "111000026") },
			"bank.routingNumber", "Routing number must be a valid ABA routing number"},
		{"ownership adding up to 120", func(v url.Values) { v.Set("owners.2.ownershipPercent", "60") },
			"owners", "The owners must own at most 100% together: their ownership percents add up to 120."},
		{"SSN of 8 digits", func(v url.Values) { v.Set("owners.2.ssn", "62738495") },
			"owners.2.ssn", "Owner 3&#39;s Social Security number must be 9 digits, without spaces or dashes."},
		{"SSN with dashes", func(v url.Values) { v.Set("owners.0.ssn", "618-27-3645") },
			"owners.0.ssn", "Owner 1&#39;s Social Security number must be 9 digits"},
		{"tax id with the dash", func(v url.Values) { v.Set("business.taxId", "87-4512369") },
			"business.taxId", "Tax id (EIN) must be 9 digits, without spaces or dashes."},
		{"tax id of letters", func(v url.Values) { v.Set("business.taxId", "EIN874512") },
			"business.taxId", "Tax id (EIN) must be 9 digits"},
		{"consent missing", func(v url.Values) { v.Del("consent") },
			"consent", "Consent must be given to sign this application electronically."},
		{"signature missing", func(v url.Values) { v.Set("signature", "") }, "signature", "Your signature is required."},
		{"share not a number", func(v url.Values) { v.Set("owners.0.ownershipPercent", "sixty") },
			"owners.0.ownershipPercent", "Owner 1&#39;s share of the business must be a number from 0 to 100"},
		{"owner without a name", func(v url.Values) { v.Set("owners.2.name", "") }, "owners.2.name", "Owner 3&#39;s full name is required."},
		{"no owner", func(v url.Values) {
			for k := range v {
				if strings.HasPrefix(k, "owners.") {
					v.Del(k)
				}
			}
		}, "owners", "The owners must include at least one owner."},
		{"no type of business", func(v url.Values) { v.Set("business.entityType", "") }, "business.entityType", "Type of business is required."},
		{"email", func(v url.Values) { v.Set("business.email", "owner@") }, "business.email", "Email must be a valid email address"},
		{"a NUL in a name", func(v url.Values) { v.Set("business.legalName", "Cedar\x00") }, "business.legalName", "without control characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			form := apitest.ApplicationForm()
			tc.change(form)
			page := f.NewApplicant().Send(t, f.slug, form)
			apitest.WantStatus(t, page, http.StatusBadRequest)
			noSecrets(t, "the page", page.Body)
			beside := regexp.MustCompile(`<p class="error" id="` + regexp.QuoteMeta(tc.field) + `-error">([^<]*)</p>`).FindStringSubmatch(page.Body)
			if beside == nil || !strings.Contains(beside[1], tc.want) {
				t.Fatalf("beside %s: %q, want %q", tc.field, beside, tc.want)
			}
			if !strings.Contains(page.Body, `<a href="#`+tc.field+`">`) {
				t.Errorf("the summary does not link to %s", tc.field)
			}
			if !strings.HasPrefix(strings.SplitN(page.Body, "<title>", 2)[1], "Error: ") {
				t.Error("the title does not start with Error:")
			}
			// Values kept, but never the tax id, SSNs or account number,
			// which the page says were not kept.
			if tc.field != "business.legalName" && !strings.Contains(page.Body, `value="Cedar Street Auto Repair LLC"`) {
				t.Error("the legal name was not kept")
			}
			for _, secret := range []string{"business.taxId", "owners.0.ssn", "bank.accountNumber"} {
				if !strings.Contains(page.Body, `name="`+secret+`" value=""`) {
					t.Errorf("%s is not empty", secret)
				}
			}
			if !strings.Contains(page.Body, "were not kept: enter them again") {
				t.Error("the page does not say why the numbers are empty")
			}
		})
	}
	apitest.Want(t, "applications after the refusals", len(f.applications(t)), before)
	var events int
	if err := f.App.DB.Get(&events, `SELECT count(*) FROM events WHERE organization_id = $1 AND type = 'application.submitted'`, f.org); err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "application.submitted events (the demo's 5)", events, 5)
}

func TestUnknownSlugAndReferenceAreNotFound(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.NewApplicant()
	known := a.Send(t, f.slug, apitest.ApplicationForm())
	apitest.WantStatus(t, known, http.StatusSeeOther)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/apply/no-such-reseller"},
		{"POST", "/apply/no-such-reseller"},
		{"GET", "/apply/no-such-reseller/thanks/" + uuid.NewString()},
		{"GET", "/apply/" + f.slug + "/thanks/" + uuid.NewString()},
		{"GET", "/apply/" + f.slug + "/thanks/not-a-reference"},
		{"GET", "/apply/" + f.slug + "/elsewhere"},
		{"GET", "/apply/"},
		{"GET", "/apply/assets/style-000000000000.css"},
	} {
		page := a.Visit(t, tc.method, tc.path, url.Values{"business.taxId": {apitest.FormTaxID}})
		if page.StatusCode != http.StatusNotFound || !strings.Contains(page.Body, "Page not found") {
			t.Errorf("%s %s: %d, want the 404 page", tc.method, tc.path, page.StatusCode)
		}
		if ct := page.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("%s %s: %s, want HTML", tc.method, tc.path, ct)
		}
	}
	// Another reseller's application is no reference of this one's.
	other := f.Seed()
	m := thanksPath.FindStringSubmatch(known.Header.Get("Location"))
	if p := a.Visit(t, "GET", "/apply/"+other.Reseller.Slug+"/thanks/"+m[2], nil); p.StatusCode != http.StatusNotFound {
		t.Errorf("another reseller's reference: %d, want 404", p.StatusCode)
	}
	if p := a.Visit(t, "DELETE", "/apply/"+f.slug, nil); p.StatusCode != http.StatusMethodNotAllowed || p.Header.Get("Allow") != "GET, HEAD, POST" {
		t.Errorf("DELETE: %d, Allow %q", p.StatusCode, p.Header.Get("Allow"))
	}
}

func TestSuspendedResellerTakesNoApplications(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.NewApplicant()
	open := a.Visit(t, "GET", "/apply/"+f.slug, nil)
	csrf, key := apitest.Hidden(t, open, "csrf"), apitest.Hidden(t, open, "key")
	before := len(f.applications(t))
	if _, err := f.App.DB.Exec(`UPDATE organizations SET status = 'suspended' WHERE id = $1`, f.org); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.App.DB.Exec(`UPDATE organizations SET status = 'active' WHERE id = $1`, f.org) })

	page := a.Visit(t, "GET", "/apply/"+f.slug, nil)
	apitest.WantStatus(t, page, http.StatusOK)
	if !strings.Contains(page.Body, "is not taking applications") || strings.Contains(page.Body, "<form") {
		t.Errorf("a suspended reseller's page: %s", page.Body)
	}
	form := apitest.ApplicationForm()
	form.Set("csrf", csrf)
	form.Set("key", key)
	sent := a.Visit(t, "POST", "/apply/"+f.slug, form)
	apitest.WantStatus(t, sent, http.StatusUnprocessableEntity)
	if !strings.Contains(sent.Body, "is not taking applications") {
		t.Errorf("the 422 page: %s", sent.Body)
	}
	noSecrets(t, "the 422 page", sent.Body)
	// Read as the database has it: the reseller's key no longer works.
	var n int
	if err := f.App.DB.Get(&n, `SELECT count(*) FROM applications WHERE reseller_id = $1`, f.org); err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "applications", n, before)
}

// At most 5 submissions an hour from one address, an IPv6 address's /64
// counted as one; then 429 with Retry-After, nothing stored.
func TestSubmissionsPerAddressAreLimited(t *testing.T) {
	clock := apitest.NewClock(time.Now())
	f := newFixture(t, apitest.Options{Clock: clock, Configure: func(c *config.Config) {
		c.TrustedProxies = []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0), Mask: net.CIDRMask(8, 32)}}
	}})
	before := len(f.applications(t))
	prefix := fmt.Sprintf("2001:db8:%x:%x::", time.Now().UnixNano()&0xffff, os.Getpid()&0xffff)
	from := func(host string) *apitest.Applicant {
		a := f.NewApplicant()
		a.Header.Set("X-Forwarded-For", prefix+host)
		return a
	}
	// Five from addresses of one /64, each form valid or not.
	for i := range 5 {
		form := apitest.ApplicationForm()
		if i%2 == 1 {
			form.Set("bank.routingNumber", "111000026")
		}
		page := from(strconv.Itoa(i+1)).Send(t, f.slug, form)
		if page.StatusCode != http.StatusSeeOther && page.StatusCode != http.StatusBadRequest {
			t.Fatalf("submission %d: %d", i+1, page.StatusCode)
		}
	}
	limited := from("ffff").Send(t, f.slug, apitest.ApplicationForm())
	apitest.WantStatus(t, limited, http.StatusTooManyRequests)
	if secs, err := strconv.Atoi(limited.Header.Get("Retry-After")); err != nil || secs < 1 || secs > 3600 {
		t.Errorf("Retry-After %q, want seconds within the hour", limited.Header.Get("Retry-After"))
	}
	if !strings.Contains(limited.Body, "Too many applications") || !strings.Contains(limited.Body, "Nothing was sent") {
		t.Errorf("the 429 page: %s", limited.Body)
	}
	apitest.Want(t, "applications", len(f.applications(t)), before+3)

	// Another /64 is another address; an hour later the first may send again.
	apitest.WantStatus(t, f.NewApplicant().Send(t, f.slug, apitest.ApplicationForm()), http.StatusSeeOther)
	clock.Advance(time.Hour + time.Second)
	apitest.WantStatus(t, from("1").Send(t, f.slug, apitest.ApplicationForm()), http.StatusSeeOther)
}

// A form that did not come from the page, or came from another site, is
// refused with 403 and nothing is stored.
func TestFormsNotFromThePageAreRefused(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	before := len(f.applications(t))
	// opened is an applicant who opened the page: its cookie, its token.
	opened := func() (*apitest.Applicant, string, url.Values) {
		a := f.NewApplicant()
		page := a.Visit(t, "GET", "/apply/"+f.slug, nil)
		form := apitest.ApplicationForm()
		form.Set("key", apitest.Hidden(t, page, "key"))
		return a, apitest.Hidden(t, page, "csrf"), form
	}
	cases := []struct {
		name   string
		token  func(csrf string) string
		header http.Header
		fresh  bool // sent by another browser, without the cookie
	}{
		{name: "no token", token: func(string) string { return "" }},
		{name: "a wrong token", token: func(csrf string) string { return strings.Repeat("x", len(csrf)) }},
		{name: "a token without its cookie", fresh: true},
		{name: "another site (Sec-Fetch-Site)", header: http.Header{"Sec-Fetch-Site": {"cross-site"}}},
		{name: "a sibling site (Sec-Fetch-Site)", header: http.Header{"Sec-Fetch-Site": {"same-site"}}},
		{name: "another origin", header: http.Header{"Origin": {"https://evil.example"}}},
		{name: "the same origin but no token", token: func(string) string { return "" }, header: http.Header{"Sec-Fetch-Site": {"same-origin"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, csrf, form := opened()
			if tc.token != nil {
				csrf = tc.token(csrf)
			}
			if csrf != "" {
				form.Set("csrf", csrf)
			}
			if tc.fresh {
				a = f.NewApplicant()
			}
			if tc.header != nil {
				a.Header = tc.header
			}
			got := a.Visit(t, "POST", "/apply/"+f.slug, form)
			apitest.WantStatus(t, got, http.StatusForbidden)
			if !strings.Contains(got.Body, "This form was not accepted") {
				t.Errorf("the 403 page: %s", got.Body)
			}
			noSecrets(t, "the 403 page", got.Body)
		})
	}
	apitest.Want(t, "applications", len(f.applications(t)), before)

	// From the page itself, as a browser sends it, it is taken.
	a, csrf, form := opened()
	form.Set("csrf", csrf)
	a.Header = http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {"null"}}
	apitest.WantStatus(t, a.Visit(t, "POST", "/apply/"+f.slug, form), http.StatusSeeOther)
}

// Forged posts (another site's page making the applicant's browser post
// the form) are refused before they count: five of them from the
// applicant's network, the limit's worth, leave the applicant's own
// submission from that network taken.
func TestForgedPostsDoNotCountAgainstTheLimit(t *testing.T) {
	f := newFixture(t, apitest.Options{Configure: func(c *config.Config) {
		c.TrustedProxies = []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0), Mask: net.CIDRMask(8, 32)}}
	}})
	network := fmt.Sprintf("2001:db8:%x:%x::", time.Now().UnixNano()&0xffff, (os.Getpid()+1)&0xffff)
	applicant := f.NewApplicant()
	applicant.Header.Set("X-Forwarded-For", network+"1")
	page := applicant.Visit(t, "GET", "/apply/"+f.slug, nil)
	// The other site's page has no token, and the browser says where the
	// post comes from.
	applicant.Header.Set("Sec-Fetch-Site", "cross-site")
	for i := range 6 {
		form := apitest.ApplicationForm()
		form.Set("key", apitest.Hidden(t, page, "key"))
		if forged := applicant.Visit(t, "POST", "/apply/"+f.slug, form); forged.StatusCode != http.StatusForbidden {
			t.Fatalf("forged post %d: %d", i+1, forged.StatusCode)
		}
	}
	applicant.Header.Set("Sec-Fetch-Site", "same-origin")
	form := apitest.ApplicationForm()
	form.Set("key", apitest.Hidden(t, page, "key"))
	form.Set("csrf", apitest.Hidden(t, page, "csrf"))
	apitest.WantStatus(t, applicant.Visit(t, "POST", "/apply/"+f.slug, form), http.StatusSeeOther)
}
