package api_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/vault"
)

// resellerEnv is a server with one seeded demo (a reseller whose portfolio
// holds three merchants, five applications) and the reseller's token.
type resellerEnv struct {
	*apitest.Env
	org   uuid.UUID
	token string
	// merchantToken is the demo merchant's token.
	merchantToken string
	merchantOrg   uuid.UUID
}

func newResellerEnv(t *testing.T) *resellerEnv {
	t.Helper()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	return &resellerEnv{
		Env: env, org: seed.Reseller.OrganizationID,
		token:         env.Token(seed.Reseller.KeyID, seed.Reseller.Secret),
		merchantToken: env.Token(seed.Merchant.KeyID, seed.Merchant.Secret),
		merchantOrg:   seed.Merchant.OrganizationID,
	}
}

func (e *resellerEnv) get(t *testing.T, path string, want int) *apitest.Response {
	t.Helper()
	resp := e.Do(apitest.Request{Method: "GET", Path: path, Token: e.token})
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d %s, want %d", path, resp.StatusCode, resp.Body, want)
	}
	return resp
}

// addApplication stores an application through the domain, as
// `payreq applications add` does, one clock second after the last.
func (e *resellerEnv) addApplication(t *testing.T, org uuid.UUID, name string) uuid.UUID {
	t.Helper()
	e.Clock.Advance(time.Second)
	id, err := e.App.Resellers.Submit(context.Background(), reseller.Submission{Reseller: org, Application: reseller.NewApplication{
		Business: reseller.Business{
			LegalName: name + " LLC", EntityType: "llc", TaxID: "870000001", Email: "owner@example.com",
			Address: reseller.Address{Line1: "1 Main St", City: "Austin", State: "TX", PostalCode: "78701"},
		},
		Owners: []reseller.Owner{{Name: "Owner of " + name, Title: "Member", OwnershipPercent: "50", SSN: "600000001"}},
		Bank:   reseller.Bank{RoutingNumber: "111000025", AccountNumber: "99887766"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *resellerEnv) setStage(t *testing.T, id uuid.UUID, stage, note string) {
	t.Helper()
	e.Clock.Advance(time.Second)
	if err := e.App.Resellers.SetStage(context.Background(), id, stage, note); err != nil {
		t.Fatal(err)
	}
}

// nextLink returns the path and query of the Link rel="next" address, or "".
func (e *resellerEnv) nextLink(t *testing.T, resp *apitest.Response) string {
	t.Helper()
	link := resp.Header.Get("Link")
	if link == "" {
		return ""
	}
	m := regexp.MustCompile(`^<([^>]+)>; rel="next"$`).FindStringSubmatch(link)
	if m == nil || !strings.HasPrefix(m[1], e.URL+"/applications?") {
		t.Fatalf("Link %q is not <%s/applications?…>; rel=\"next\"", link, e.URL)
	}
	return strings.TrimPrefix(m[1], e.URL)
}

func problemErrors(t *testing.T, resp *apitest.Response) map[string][]string {
	t.Helper()
	p := resp.Problem(t)
	if p.Errors == nil {
		t.Fatalf("400 without errors: %s", resp.Body)
	}
	return *p.Errors
}

func TestPortfolioOrderedByNameWithProducts(t *testing.T) {
	env := newResellerEnv(t)
	var merchants []models.PortfolioMerchant
	env.get(t, "/organizations/"+env.org.String()+"/portfolio", http.StatusOK).JSON(t, &merchants)

	type want struct {
		prefix   string
		status   models.PortfolioMerchantStatus
		products []models.Product
	}
	wants := []want{
		{"Alder Street Books ", models.PortfolioMerchantStatusOnboarding, []models.Product{{Key: "online", Name: "Online checkout"}}},
		{"Blue Fern Coffee ", models.PortfolioMerchantStatusActive, []models.Product{{Key: "invoicing", Name: "Invoicing"}, {Key: "terminal", Name: "Card terminal"}}},
		{"Cedar Hardware ", models.PortfolioMerchantStatusSuspended, []models.Product{{Key: "invoicing", Name: "Invoicing"}, {Key: "online", Name: "Online checkout"}, {Key: "terminal", Name: "Card terminal"}}},
	}
	if len(merchants) != len(wants) {
		t.Fatalf("%d merchants, want %d: %+v", len(merchants), len(wants), merchants)
	}
	for i, w := range wants {
		m := merchants[i]
		if !strings.HasPrefix(m.Name, w.prefix) || m.Status != w.status {
			t.Fatalf("merchant %d: %s (%s), want %s… (%s): not ordered by name", i, m.Name, m.Status, w.prefix, w.status)
		}
		if !slices.Equal(m.Products, w.products) {
			t.Errorf("products of %s: %+v, want %+v", m.Name, m.Products, w.products)
		}
		if m.LogoUrl == nil || !strings.Contains(*m.LogoUrl, m.Id.String()) {
			t.Errorf("logoUrl of %s: %v", m.Name, m.LogoUrl)
		}
	}
	if merchants[1].Id != env.merchantOrg {
		t.Errorf("Blue Fern Coffee has id %s, want the demo merchant %s", merchants[1].Id, env.merchantOrg)
	}
}

func TestPortfolioOfAnotherOrganizationAndMerchantKeysAreForbidden(t *testing.T) {
	env := newResellerEnv(t)
	other := env.Seed().Reseller.OrganizationID

	for _, id := range []uuid.UUID{other, env.merchantOrg, uuid.Must(uuid.NewRandom())} {
		resp := env.get(t, "/organizations/"+id.String()+"/portfolio", http.StatusForbidden)
		p := resp.Problem(t)
		apitest.Want(t, "title", p.Title, "Not your organization")
		apitest.Want(t, "type is forbidden", strings.HasSuffix(p.Type, "/problems/forbidden"), true)
		apitest.Want(t, "detail names the caller's organization", strings.Contains(p.Detail, env.org.String()), true)
	}
	env.get(t, "/organizations/not-a-uuid/portfolio", http.StatusBadRequest)

	for _, path := range []string{
		"/organizations/" + env.merchantOrg.String() + "/portfolio",
		"/applications",
		"/applications/" + uuid.Must(uuid.NewRandom()).String(),
	} {
		resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: env.merchantToken})
		if resp.StatusCode != http.StatusForbidden || resp.Problem(t).Title != "Permission required" {
			t.Errorf("merchant key GET %s: %d %s, want 403 Permission required", path, resp.StatusCode, resp.Body)
		}
	}
}

func TestApplicationsNewestFirstWithStageFilter(t *testing.T) {
	env := newResellerEnv(t)
	older := env.addApplication(t, env.org, "Older")
	newer := env.addApplication(t, env.org, "Newer")

	var all []models.Application
	env.get(t, "/applications", http.StatusOK).JSON(t, &all)
	if len(all) != 7 {
		t.Fatalf("%d applications, want the 5 of the demo and 2 more", len(all))
	}
	if all[0].Id != newer || all[1].Id != older {
		t.Fatalf("first two are %s, %s; want the newest %s, then %s", all[0].Id, all[1].Id, newer, older)
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.SubmittedAt.Before(b.SubmittedAt) || a.SubmittedAt.Equal(b.SubmittedAt) && a.Id.String() < b.Id.String() {
			t.Fatalf("not newest first (submittedAt, then id): %s %s before %s %s", a.SubmittedAt, a.Id, b.SubmittedAt, b.Id)
		}
	}

	counts := map[models.ApplicationStage]int{}
	for _, a := range all {
		counts[a.Stage]++
	}
	for stage, n := range map[models.ApplicationStage]int{models.ApplicationStageSubmitted: 3, models.ApplicationStageInReview: 1, models.ApplicationStageNeedsInfo: 1, models.ApplicationStageApproved: 1, models.ApplicationStageDeclined: 1, models.ApplicationStageBoarded: 0} {
		var some []models.Application
		env.get(t, "/applications?stage="+string(stage), http.StatusOK).JSON(t, &some)
		if len(some) != n || counts[stage] != n {
			t.Errorf("stage=%s: %d applications, want %d", stage, len(some), n)
		}
		for _, a := range some {
			if a.Stage != stage {
				t.Errorf("stage=%s answered an application in %s", stage, a.Stage)
			}
		}
	}

	for query, field := range map[string]string{
		"stage=approvd":  "query.stage",
		"stage=":         "query.stage",
		"limit=0":        "query.limit",
		"limit=101":      "query.limit",
		"limit=ten":      "query.limit",
		"cursor=garbage": "query.cursor",
	} {
		resp := env.get(t, "/applications?"+query, http.StatusBadRequest)
		if errs := problemErrors(t, resp); len(errs[field]) == 0 {
			t.Errorf("?%s: errors %v, want a message for %s", query, errs, field)
		}
	}
}

func TestApplicationsPagedWithoutGapsOrDuplicates(t *testing.T) {
	env := newResellerEnv(t)
	var all []models.Application
	env.get(t, "/applications", http.StatusOK).JSON(t, &all)
	if len(all) != 5 {
		t.Fatalf("%d applications, want 5", len(all))
	}
	if resp := env.get(t, "/applications", http.StatusOK); resp.Header.Get("Link") != "" {
		t.Fatalf("a single page has Link %q", resp.Header.Get("Link"))
	}

	var paged []uuid.UUID
	sizes := []int{}
	path := "/applications?limit=2"
	for path != "" {
		if len(sizes) > 5 {
			t.Fatal("paging does not end")
		}
		resp := env.get(t, path, http.StatusOK)
		var page []models.Application
		resp.JSON(t, &page)
		sizes = append(sizes, len(page))
		for _, a := range page {
			paged = append(paged, a.Id)
		}
		path = env.nextLink(t, resp)
		if path != "" {
			q, _ := url.ParseQuery(strings.TrimPrefix(path, "/applications?"))
			if q.Get("limit") != "2" || q.Get("cursor") == "" {
				t.Fatalf("next link %s lost the limit or has no cursor", path)
			}
		}
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) {
		t.Fatalf("page sizes %v, want [2 2 1] with no Link on the last", sizes)
	}
	for i, a := range all {
		if paged[i] != a.Id {
			t.Fatalf("paged order %v differs from the single page at %d", paged, i)
		}
	}

	// The stage filter travels with the next link.
	for _, a := range all {
		if a.Stage == models.ApplicationStageSubmitted {
			env.setStage(t, a.Id, "in_review", "")
		}
	}
	var inReview []uuid.UUID
	path = "/applications?stage=in_review&limit=1"
	for path != "" {
		resp := env.get(t, path, http.StatusOK)
		var page []models.Application
		resp.JSON(t, &page)
		for _, a := range page {
			if a.Stage != models.ApplicationStageInReview {
				t.Fatalf("page of %s holds an application in %s", path, a.Stage)
			}
			inReview = append(inReview, a.Id)
		}
		path = env.nextLink(t, resp)
	}
	if len(inReview) != 2 {
		t.Fatalf("%d applications in review over pages of one, want 2", len(inReview))
	}

	// A cursor that is valid base64 but not one of ours, and one of ours
	// altered, are refused rather than guessed at.
	for _, cursor := range []string{"eyJ0IjoieCJ9", "e30", strings.Repeat("A", 40)} {
		resp := env.get(t, "/applications?cursor="+cursor, http.StatusBadRequest)
		if errs := problemErrors(t, resp); len(errs["query.cursor"]) == 0 {
			t.Errorf("cursor %s: errors %v, want query.cursor", cursor, errs)
		}
	}
}

func TestApplicationWithHistoryOldestFirst(t *testing.T) {
	env := newResellerEnv(t)
	id := env.addApplication(t, env.org, "Historic")
	env.setStage(t, id, "in_review", "Underwriting started.")
	env.setStage(t, id, "needs_info", "Send last year's statements.")
	env.setStage(t, id, "in_review", "")
	env.setStage(t, id, "approved", "All good.")

	var a models.Application
	env.get(t, "/applications/"+id.String(), http.StatusOK).JSON(t, &a)
	apitest.Want(t, "id", a.Id, id)
	apitest.Want(t, "stage", a.Stage, models.ApplicationStageApproved)
	apitest.Want(t, "business.legalName", a.Business.LegalName, "Historic LLC")
	wantStages := []models.ApplicationStage{models.ApplicationStageSubmitted, models.ApplicationStageInReview, models.ApplicationStageNeedsInfo, models.ApplicationStageInReview, models.ApplicationStageApproved}
	if len(a.History) != len(wantStages) {
		t.Fatalf("history %+v, want %v", a.History, wantStages)
	}
	for i, h := range a.History {
		if h.Stage != wantStages[i] {
			t.Fatalf("history[%d] is %s, want %s (oldest first)", i, h.Stage, wantStages[i])
		}
		if i > 0 && !h.At.After(a.History[i-1].At) {
			t.Fatalf("history not oldest first: %+v", a.History)
		}
	}
	if n := a.History[2].Note; n == nil || *n != "Send last year's statements." {
		t.Errorf("note of needs_info: %v", n)
	}
	if a.History[3].Note != nil {
		t.Errorf("note given as none came back as %q", *a.History[3].Note)
	}
	apitest.Want(t, "submittedAt is the first history entry's", a.SubmittedAt.Equal(a.History[0].At), true)
	apitest.Want(t, "updatedAt is the last history entry's", a.UpdatedAt.Equal(a.History[4].At), true)
	b := a.Business
	apitest.Want(t, "business.taxIdLastFour", b.TaxIdLastFour, "0001")
	apitest.WantText(t, "business.dbaName", b.DbaName, "<nil>")
	apitest.WantText(t, "business.phone", b.Phone, "<nil>")
	apitest.WantText(t, "business.website", b.Website, "<nil>")
	apitest.WantText(t, "business.address.addressLine2", b.Address.AddressLine2, "<nil>")
	apitest.Want(t, "business.address.city", b.Address.City, "Austin")
	apitest.Want(t, "business.email", b.Email, "owner@example.com")
	apitest.Want(t, "business.entityType", b.EntityType, "llc")
	if len(a.Owners) != 1 {
		t.Fatalf("%d owners, want 1", len(a.Owners))
	}
	apitest.Want(t, "owners[0].ssnLastFour", a.Owners[0].SsnLastFour, "0001")
	apitest.Want(t, "owners[0].ownershipPercent", a.Owners[0].OwnershipPercent.Text('f'), "50.00")
	apitest.Want(t, "owners[0].title", a.Owners[0].Title, "Member")
	apitest.Want(t, "bank.routingNumber", a.Bank.RoutingNumber, "111000025")
	apitest.Want(t, "bank.accountLastFour", a.Bank.AccountLastFour, "7766")

	// The list answers the same record.
	var list []models.Application
	env.get(t, "/applications?limit=1", http.StatusOK).JSON(t, &list)
	if len(list) != 1 {
		t.Fatalf("%d applications listed, want 1", len(list))
	}
	apitest.Want(t, "listed id", list[0].Id, id)
	apitest.Want(t, "listed history", len(list[0].History), 5)
	apitest.Want(t, "listed owners", len(list[0].Owners), 1)
}

func TestApplicationsOfOtherResellersAreNotFound(t *testing.T) {
	env := newResellerEnv(t)
	otherSeed := env.Seed()
	otherToken := env.Token(otherSeed.Reseller.KeyID, otherSeed.Reseller.Secret)

	var mine, theirs []models.Application
	env.get(t, "/applications", http.StatusOK).JSON(t, &mine)
	resp := env.Do(apitest.Request{Method: "GET", Path: "/applications", Token: otherToken})
	resp.JSON(t, &theirs)
	if len(mine) != 5 || len(theirs) != 5 {
		t.Fatalf("%d and %d applications, want 5 each", len(mine), len(theirs))
	}
	for _, a := range theirs {
		if slices.ContainsFunc(mine, func(m models.Application) bool { return m.Id == a.Id }) {
			t.Fatalf("application %s is in both resellers' lists", a.Id)
		}
		resp := env.get(t, "/applications/"+a.Id.String(), http.StatusNotFound)
		if p := resp.Problem(t); p.Title != "Not found" || !strings.HasSuffix(p.Type, "/problems/not-found") {
			t.Errorf("another reseller's application: %+v", p)
		}
	}
	unknown := env.get(t, "/applications/"+uuid.Must(uuid.NewRandom()).String(), http.StatusNotFound)
	other := env.get(t, "/applications/"+theirs[0].Id.String(), http.StatusNotFound)
	if string(unknown.Body) != string(other.Body) {
		t.Errorf("unknown and others' ids answer differently:\n%s\n%s", unknown.Body, other.Body)
	}
	env.get(t, "/applications/not-a-uuid", http.StatusBadRequest)
	env.get(t, "/applications/"+mine[0].Id.String(), http.StatusOK)
}

// TestApplicationNumbersNeverLeaveInFull runs over every reseller endpoint
// and then looks for any full tax id, social security number or account
// number of any application in the answers, the server's log and the rows
// of the database. The full numbers are learnt by opening the sealed
// values with the server's key, so the test covers every application the
// demo made as well as one added here.
func TestApplicationNumbersNeverLeaveInFull(t *testing.T) {
	env := newResellerEnv(t)
	otherSeed := env.Seed()
	added := env.addApplication(t, env.org, "Secretive")
	env.setStage(t, added, "in_review", "Checked the tax id and the bank account.")

	var bodies []string
	do := func(r apitest.Request) *apitest.Response {
		resp := env.Do(r)
		bodies = append(bodies, string(resp.Body)+fmt.Sprint(resp.Header))
		return resp
	}
	get := func(path string) *apitest.Response {
		return do(apitest.Request{Method: "GET", Path: path, Token: env.token})
	}
	do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: map[string]string{"grant_type": "client_credentials", "client_id": "mk_x", "client_secret": "ms_x"}})
	get("/organizations/" + env.org.String() + "/portfolio")
	get("/organizations/" + otherSeed.Reseller.OrganizationID.String() + "/portfolio")
	var ids []uuid.UUID
	for path := "/applications?limit=2"; path != ""; {
		resp := get(path)
		var page []models.Application
		resp.JSON(t, &page)
		for _, a := range page {
			ids = append(ids, a.Id)
		}
		path = env.nextLink(t, resp)
	}
	for _, stage := range reseller.Stages {
		get("/applications?stage=" + stage)
	}
	get("/applications?stage=bogus")
	get("/applications?cursor=bogus")
	for _, id := range ids {
		get("/applications/" + id.String())
	}
	get("/applications/" + uuid.Must(uuid.NewRandom()).String())
	do(apitest.Request{Method: "GET", Path: "/applications", Token: env.merchantToken})
	if len(ids) != 6 {
		t.Fatalf("paged %d applications, want 6", len(ids))
	}

	// Two demos of 5 applications and the one added, 3 numbers each (one owner).
	secrets := fullNumbers(t, env, env.org, otherSeed.Reseller.OrganizationID)
	if len(secrets) != 3*11 {
		t.Fatalf("found %d full numbers, want 33 (11 applications, 3 numbers each)", len(secrets))
	}

	var rows []string
	err := env.App.DB.Select(&rows, `
		SELECT a::text FROM applications a
		UNION ALL SELECT o::text FROM application_owners o
		UNION ALL SELECT h::text FROM application_history h`)
	if err != nil {
		t.Fatal(err)
	}
	logs := env.Log.String()
	if !strings.Contains(logs, "/applications/:id") {
		t.Fatalf("the log holds no request lines: %q", logs)
	}
	for _, secret := range secrets {
		hexed := hex.EncodeToString([]byte(secret))
		for _, row := range rows {
			if strings.Contains(row, secret) || strings.Contains(row, hexed) {
				t.Errorf("database row holds the full number %s: %s", secret, row)
			}
		}
		for _, body := range bodies {
			if strings.Contains(body, secret) {
				t.Errorf("an answer holds the full number %s: %s", secret, body)
			}
		}
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds the full number %s", secret)
		}
	}
	// The last fours are what is shown instead.
	var a models.Application
	get("/applications/"+added.String()).JSON(t, &a)
	apitest.Want(t, "business.taxIdLastFour", a.Business.TaxIdLastFour, "0001")
	apitest.Want(t, "bank.accountLastFour", a.Bank.AccountLastFour, "7766")
	apitest.Want(t, "owners[0].ssnLastFour", a.Owners[0].SsnLastFour, "0001")
}

// fullNumbers opens every sealed value of the resellers' applications with
// the server's encryption key.
func fullNumbers(t *testing.T, env *resellerEnv, resellers ...uuid.UUID) []string {
	t.Helper()
	keyFile, err := os.ReadFile(env.App.Config.EncryptionKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(resellers))
	for i, r := range resellers {
		ids[i] = r.String()
	}
	var sealed []struct {
		Sealed []byte `db:"sealed"`
		KeyID  string `db:"key_id"`
		AAD    string `db:"aad"`
	}
	err = env.App.DB.Select(&sealed, `
		SELECT tax_id_encrypted AS sealed, tax_id_key_id AS key_id, 'application:' || id || ':tax_id' AS aad
		FROM applications WHERE reseller_id = ANY($1::uuid[])
		UNION ALL SELECT account_encrypted, account_key_id, 'application:' || id || ':account'
		FROM applications WHERE reseller_id = ANY($1::uuid[])
		UNION ALL SELECT o.ssn_encrypted, o.ssn_key_id, 'application:' || o.application_id || ':owner:' || o.position || ':ssn'
		FROM application_owners o JOIN applications a ON a.id = o.application_id WHERE a.reseller_id = ANY($1::uuid[])`, pq.Array(ids))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range sealed {
		plain, err := v.Open(s.Sealed, s.KeyID, s.AAD)
		if err != nil {
			t.Fatalf("open %s: %v", s.AAD, err)
		}
		if len(plain) < 5 {
			t.Fatalf("%s opened to %d digits", s.AAD, len(plain))
		}
		out = append(out, plain)
	}
	return out
}
