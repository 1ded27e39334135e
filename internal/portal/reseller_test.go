package portal_test

import (
	"context"
	"encoding/csv"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/web"
)

var (
	applicationLinkIn = regexp.MustCompile(`href="/portal/applications/([0-9a-f-]{36})"`)
	merchantRowIn     = regexp.MustCompile(`<tr><td[^>]*>([^<]*)</td><td[^>]*>([^<]*)</td><td[^>]*>([^<]*)</td></tr>`)
	nextLinkIn        = regexp.MustCompile(`<a href="([^"]*)" rel="next">`)
)

// apiGet reads path from the API with the reseller's demo key.
func apiGet(t *testing.T, env *apitest.Env, seed apitestSeed, path string, v any) {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Body)
	}
	resp.JSON(t, v)
}

// The portfolio shows what GET /organizations/{id}/portfolio answers: the
// reseller's merchants by name, each with its status and products; and
// the sign-up page's address with the copy button's script, which the
// page's policy allows, and no other.
func TestPortfolioPage(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	c, _ := portaltest.SignedIn(t, env, seed.Reseller.OrganizationID, "Member", auth.PortfolioView)
	p := c.Get("/portal/portfolio").Want(t, http.StatusOK)

	var merchants []models.PortfolioMerchant
	apiGet(t, env, seed, "/organizations/"+seed.Reseller.OrganizationID.String()+"/portfolio", &merchants)
	rows := merchantRowIn.FindAllStringSubmatch(p.Body, -1)
	if len(rows) != len(merchants) || len(rows) != 3 {
		t.Fatalf("%d rows, the API lists %d merchants:\n%s", len(rows), len(merchants), p.Body)
	}
	statusWords := map[models.PortfolioMerchantStatus]string{"onboarding": "Onboarding", "active": "Active", "suspended": "Suspended"}
	for i, m := range merchants {
		var products []string
		for _, pr := range m.Products {
			products = append(products, pr.Name)
		}
		want := []string{m.Name, statusWords[m.Status], strings.Join(products, ", ")}
		if got := []string{html.UnescapeString(rows[i][1]), rows[i][2], rows[i][3]}; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("row %d: %q, want %q", i, got, want)
		}
	}

	// The sign-up page's address, to select or copy.
	signUp := env.App.Config.PublicURL + "/apply/" + seed.Reseller.Slug
	p.Has(t, `<code class="secret" data-copy="Copy the address">`+signUp+`</code>`, `<a href="`+signUp+`">`)
	script := "/portal/assets/" + web.CopyScriptName
	p.Has(t, `<script src="`+script+`" defer></script>`)
	if csp := p.Header.Get("Content-Security-Policy"); csp != web.ContentSecurityPolicy+"; script-src "+env.URL+script {
		t.Errorf("policy %q: want the page's own and exactly its script", csp)
	}
	js := c.Get(script).Want(t, http.StatusOK)
	if ct := js.Header.Get("Content-Type"); ct != "text/javascript; charset=utf-8" || !strings.Contains(js.Body, "navigator.clipboard.writeText") {
		t.Errorf("the script: %s\n%s", ct, js.Body)
	}
	c.Get("/portal/assets/copy-000000000000.js").Want(t, http.StatusNotFound)
	// Pages without the link keep the policy without scripts.
	if csp := c.Get("/portal/account").Header.Get("Content-Security-Policy"); csp != web.ContentSecurityPolicy {
		t.Errorf("the account page's policy: %q", csp)
	}
}

// Applications are listed newest first as GET /applications lists them,
// filtered by stage, a page at a time with a link to the next; a query
// the list cannot take is a 400 with the form and its message.
func TestApplicationsPage(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	c, _ := portaltest.SignedIn(t, env, seed.Reseller.OrganizationID, "Member", auth.ApplicationsView)

	var all []models.Application
	apiGet(t, env, seed, "/applications", &all)
	ids := func(p portaltest.Page) []string {
		var out []string
		for _, m := range applicationLinkIn.FindAllStringSubmatch(p.Body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	want := func(apps []models.Application) []string {
		var out []string
		for _, a := range apps {
			out = append(out, a.Id.String())
		}
		return out
	}
	first := c.Get("/portal/applications").Want(t, http.StatusOK)
	if got := ids(first); len(all) != 5 || strings.Join(got, " ") != strings.Join(want(all), " ") {
		t.Fatalf("listed %v, the API %v", got, want(all))
	}
	if nextLinkIn.MatchString(first.Body) {
		t.Errorf("a next page after all five")
	}
	first.Has(t, "Applicant 1 LLC", "trading as Shop 1", "Needs information", "<time datetime=", `<option value="in_review">In review</option>`)

	// By stage, as the API filters.
	var inReview []models.Application
	apiGet(t, env, seed, "/applications?stage=in_review", &inReview)
	byStage := c.Get("/portal/applications?stage=in_review").Want(t, http.StatusOK).Has(t, `<option value="in_review" selected>`)
	if got := ids(byStage); len(inReview) != 1 || strings.Join(got, " ") != strings.Join(want(inReview), " ") {
		t.Errorf("in review: %v, the API %v", got, want(inReview))
	}
	c.Get("/portal/applications?stage=boarded").Want(t, http.StatusOK).Has(t, "No application at this stage.")

	// Two a page: three pages, every application once, in order.
	var paged []string
	next := "/portal/applications?limit=2"
	for pages := 0; next != ""; pages++ {
		if pages == 3 {
			t.Fatalf("more than three pages of two")
		}
		p := c.Get(next).Want(t, http.StatusOK)
		paged = append(paged, ids(p)...)
		next = ""
		if m := nextLinkIn.FindStringSubmatch(p.Body); m != nil {
			next = html.UnescapeString(m[1])
			if !strings.Contains(next, "limit=2") {
				t.Errorf("the next page's address %q loses the page size", next)
			}
		}
	}
	if strings.Join(paged, " ") != strings.Join(want(all), " ") {
		t.Errorf("paged %v, want %v", paged, want(all))
	}

	// What the list cannot take.
	c.Get("/portal/applications?stage=approved_maybe").Want(t, http.StatusBadRequest).ErrorBeside(t, "stage", "Choose one of the values offered")
	for _, q := range []string{"limit=0", "limit=101", "limit=%2B5", "cursor=made-up", "stage=%zz", "stage=approved&stage=declined"} {
		p := c.Get("/portal/applications?"+q).Want(t, http.StatusBadRequest)
		if !strings.Contains(p.Body, "<title>Error: Applications") || len(ids(p)) != 0 {
			t.Errorf("%s: the page does not say it failed, or lists anyway:\n%s", q, p.Body)
		}
	}
}

// The applications export as CSV, the stage filter applied, every page in
// one file, only last fours: the rows GET /applications lists for the same
// filter, newest first.
func TestApplicationsExportAsCSV(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	c, _ := portaltest.SignedIn(t, env, seed.Reseller.OrganizationID, "Member", auth.ApplicationsView)
	token := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	for _, stage := range []string{"", "in_review"} {
		var api []models.Application
		path := "/applications?limit=100"
		if stage != "" {
			path += "&stage=" + stage
		}
		env.Do(apitest.Request{Method: "GET", Path: path, Token: token}).JSON(t, &api)
		p := c.Get("/portal/applications?format=csv&stage="+stage).Want(t, http.StatusOK)
		rows, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
		if err != nil || len(rows) == 0 {
			t.Fatalf("stage %q: not CSV: %v\n%s", stage, err, p.Body)
		}
		if len(rows)-1 != len(api) || len(api) == 0 {
			t.Fatalf("stage %q: %d rows, the API lists %d", stage, len(rows)-1, len(api))
		}
		for i, a := range api {
			r := rows[i+1]
			if r[0] != a.Id.String() || r[1] != string(a.Stage) || r[7] != a.Business.TaxIdLastFour || r[11] != a.Bank.AccountLastFour {
				t.Errorf("stage %q row %d: %v, the API has %s %s", stage, i, r, a.Id, a.Stage)
			}
		}
	}
}

// The portfolio exports as CSV: the merchants GET
// /organizations/{id}/portfolio lists, by name, with their products' keys.
func TestPortfolioExportsAsCSV(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	c, _ := portaltest.SignedIn(t, env, seed.Reseller.OrganizationID, "Member", auth.PortfolioView)
	token := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	var api []models.PortfolioMerchant
	env.Do(apitest.Request{Method: "GET", Path: "/organizations/" + seed.Reseller.OrganizationID.String() + "/portfolio", Token: token}).JSON(t, &api)
	p := c.Get("/portal/portfolio?format=csv").Want(t, http.StatusOK)
	rows, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
	if err != nil || len(rows)-1 != len(api) || len(api) == 0 {
		t.Fatalf("%d rows (%v), the API lists %d:\n%s", len(rows)-1, err, len(api), p.Body)
	}
	for i, m := range api {
		var keys []string
		for _, pr := range m.Products {
			keys = append(keys, pr.Key)
		}
		if r := rows[i+1]; r[0] != m.Id.String() || r[1] != m.Name || r[2] != string(m.Status) || r[3] != strings.Join(keys, " ") {
			t.Errorf("row %d: %v, the API has %s %s %s %v", i, r, m.Id, m.Name, m.Status, keys)
		}
	}
}

// An application's page shows what GET /applications/{id} answers: only
// the last four digits of the tax id, the SSNs and the account number,
// never the whole; and its stage history, oldest first.
func TestApplicationPageMasksValues(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	org := seed.Reseller.OrganizationID
	ctx := context.Background()
	website := "https://north.example.com"
	id, err := env.App.Resellers.Submit(ctx, reseller.Submission{Reseller: org, Application: reseller.NewApplication{
		Business: reseller.Business{
			LegalName: "North & Sons LLC", DBAName: "North Tools", EntityType: "llc", TaxID: "871234567",
			Email: "books@north.example.com", Website: &website,
			Address: reseller.Address{Line1: "9 Pine Rd", City: "Bend", State: "OR", PostalCode: "97701"},
		},
		Owners: []reseller.Owner{
			{Name: "Ada North", Title: "Managing member", OwnershipPercent: "60", SSN: "512349876"},
			{Name: "Ben North", Title: "Member", OwnershipPercent: "40", SSN: "623451111"},
		},
		Bank: reseller.Bank{RoutingNumber: "111000025", AccountNumber: "000123454321"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"in_review", "needs_info"} {
		if err := env.App.Resellers.SetStage(ctx, id, s, "Note on "+s); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.ApplicationsView)
	p := c.Get("/portal/applications/"+id.String()).Want(t, http.StatusOK)

	var a models.Application
	apiGet(t, env, seed, "/applications/"+id.String(), &a)
	masked := func(last4 string) string {
		return `<span aria-hidden="true">••••</span><span class="visually-hidden">ending in </span>` + last4 + `</span>`
	}
	p.Has(t, "North &amp; Sons LLC", "North Tools", "Limited liability company (LLC)", "books@north.example.com",
		"https://north.example.com", "9 Pine Rd", "Bend, OR 97701", "Ada North", a.Owners[0].OwnershipPercent.String()+" %", "Ben North", a.Owners[1].OwnershipPercent.String()+" %",
		a.Bank.RoutingNumber, masked(a.Business.TaxIdLastFour), masked(a.Owners[0].SsnLastFour),
		masked(a.Owners[1].SsnLastFour), masked(a.Bank.AccountLastFour), "Needs information")
	for _, secret := range []string{"871234567", "512349876", "623451111", "000123454321"} {
		if strings.Contains(p.Body, secret) {
			t.Errorf("the page shows %s", secret)
		}
	}
	// History, oldest first, each with its time and note.
	history := regexp.MustCompile(`<li><strong>([^<]+)</strong>, <time datetime="[^"]+">[^<]+</time>(?:: ([^<]*))?</li>`).FindAllStringSubmatch(p.Body, -1)
	var got []string
	for _, h := range history {
		got = append(got, h[1]+"|"+h[2])
	}
	if want := []string{"Submitted|" + optional.Value(a.History[0].Note), "In review|Note on in_review", "Needs information|Note on needs_info"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("history %q, want %q", got, want)
	}
}

// Who sees the reseller's pages: members of the reseller holding the
// permission each needs. Others get 403 and no link to them; a merchant's
// members never get them; another reseller's application is a 404, and
// its portfolio is not shown; without a session, the sign-in.
func TestResellerPagesPermissionsAndOrganizations(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	other := env.Seed() // another reseller, with its own merchants and applications
	org := seed.Reseller.OrganizationID
	ctx := context.Background()
	mine, _, err := env.App.Resellers.Applications(ctx, org, nil, 1, "")
	if err != nil || len(mine) != 1 {
		t.Fatal(len(mine), err)
	}
	theirs, _, err := env.App.Resellers.Applications(ctx, other.Reseller.OrganizationID, nil, 1, "")
	if err != nil || len(theirs) != 1 {
		t.Fatal(len(theirs), err)
	}
	portfolio, applications := "/portal/portfolio", "/portal/applications"
	application := "/portal/applications/" + mine[0].ID.String()
	type who struct {
		name  string
		org   uuid.UUID
		role  string
		perms []string
	}
	members := []who{
		{"a reseller's Member with both", org, "Member", []string{auth.PortfolioView, auth.ApplicationsView}},
		{"a reseller's Member with portfolio.view", org, "Member", []string{auth.PortfolioView}},
		{"a reseller's Member with applications.view", org, "Member", []string{auth.ApplicationsView}},
		{"a reseller's Owner with neither", org, "Owner", []string{auth.EventsView, auth.WebhooksManage}},
		{"a merchant's Owner with every permission", seed.Merchant.OrganizationID, "Owner", auth.PermissionsFor(auth.KindMerchant)},
	}
	for _, m := range members {
		t.Run(m.name, func(t *testing.T) {
			c, _ := portaltest.SignedIn(t, env, m.org, m.role, m.perms...)
			home := c.Get("/portal/").Want(t, http.StatusOK)
			for _, pg := range []struct {
				path, permission string
			}{{portfolio, auth.PortfolioView}, {applications, auth.ApplicationsView}, {application, auth.ApplicationsView}} {
				holds := m.org == org && slices.Contains(m.perms, pg.permission)
				p := c.Get(pg.path)
				if holds {
					p.Want(t, http.StatusOK)
				} else {
					p.Want(t, http.StatusForbidden).Has(t, pg.permission)
				}
				if link := `href="` + pg.path + `"`; pg.path != application && strings.Contains(home.Body, link) != holds {
					t.Errorf("a link to %s on the home page: %v, want %v", pg.path, !holds, holds)
				}
			}
		})
	}

	// Another reseller's application, an unknown one, not an id: 404.
	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.PortfolioView, auth.ApplicationsView)
	for _, id := range []string{theirs[0].ID.String(), uuid.NewString(), "not-an-id"} {
		c.Get("/portal/applications/"+id).Want(t, http.StatusNotFound)
	}
	// Neither lists show another reseller's.
	if p := c.Get(applications); strings.Contains(p.Body, theirs[0].ID.String()) {
		t.Errorf("the list shows another reseller's application")
	}
	theirMerchants, err := env.App.Resellers.Merchants(ctx, other.Reseller.OrganizationID)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Get(portfolio).Want(t, http.StatusOK)
	for _, m := range theirMerchants {
		if strings.Contains(p.Body, m.Name) {
			t.Errorf("the portfolio shows another reseller's merchant %s", m.Name)
		}
	}
	// Without a session: the sign-in.
	guest := portaltest.NewClient(t, env)
	for _, path := range []string{portfolio, applications, application} {
		guest.Get(path).WantRedirect(t, "/portal/sign-in")
	}
}
