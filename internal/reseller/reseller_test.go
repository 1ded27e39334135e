package reseller_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/vault"
)

// validApplication is a complete application; tests change one thing in it.
func validApplication() reseller.NewApplication {
	website := "https://cedarstreetauto.com"
	return reseller.NewApplication{
		Business: reseller.Business{
			LegalName: "Cedar Street Auto Repair LLC", DBAName: "Cedar Street Auto", EntityType: "llc",
			TaxID: "871234567", Email: "owner@cedarstreetauto.com", Website: &website,
			Address: reseller.Address{Line1: "1200 Cedar St", City: "Round Rock", State: "TX", PostalCode: "78664"},
		},
		Owners: []reseller.Owner{
			{Name: "Maria Alvarez", Title: "Managing member", OwnershipPercent: "60", SSN: "612345678"},
			{Name: "Tom Becker", Title: "Member", OwnershipPercent: "40.00", SSN: "623456789"},
		},
		Bank: reseller.Bank{RoutingNumber: "111000025", AccountNumber: "4400112233"},
	}
}

// secretsOf are the full numbers of an application.
func secretsOf(a reseller.NewApplication) []string {
	out := []string{a.Business.TaxID, a.Bank.AccountNumber}
	for _, o := range a.Owners {
		out = append(out, o.SSN)
	}
	return out
}

type fixture struct {
	db        *sqlx.DB
	apps      *reseller.Store
	reseller  uuid.UUID
	suspended uuid.UUID
	merchant  uuid.UUID
	slug      string
	mu        sync.Mutex
	now       time.Time
}

// newFixture makes a reseller, a suspended reseller and a merchant
// organization and a Store whose clock moves one second a call.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, testDSN, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	keyFile, err := vault.GenerateKeyFile()
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, reseller: uuid.Must(uuid.NewV7()), suspended: uuid.Must(uuid.NewV7()), merchant: uuid.Must(uuid.NewV7()),
		now: time.Date(2025, 3, 2, 17, 25, 0, 0, time.UTC)}
	f.slug = "r-" + f.reseller.String()[24:]
	f.apps = &reseller.Store{DB: db, Vault: v, Now: func() time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.now = f.now.Add(time.Second)
		return f.now
	}}
	for _, o := range []struct {
		id                 uuid.UUID
		kind, status, slug any
	}{
		{f.reseller, "reseller", "active", f.slug},
		{f.suspended, "reseller", "suspended", "s-" + f.suspended.String()[24:]},
		{f.merchant, "merchant", "active", nil},
	} {
		if _, err := db.Exec(`INSERT INTO organizations (id, name, kind, status, slug) VALUES ($1, $2, $3, $4, $5)`,
			o.id, fmt.Sprint(o.kind, " ", o.id), o.kind, o.status, o.slug); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// submit submits an application to the fixture's reseller as an operator does.
func (f *fixture) submit(ctx context.Context, app reseller.NewApplication) (uuid.UUID, error) {
	return f.apps.Submit(ctx, reseller.Submission{Reseller: f.reseller, Application: app})
}

func (f *fixture) count(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.db.Get(&n, `SELECT count(*) FROM applications WHERE reseller_id = $1`, f.reseller); err != nil {
		t.Fatal(err)
	}
	return n
}

// invalidFields is err's Invalid refusal's fields, failing the test when
// err is no such refusal or repeats one of secrets.
func invalidFields(t *testing.T, err error, secrets []string) map[string][]string {
	t.Helper()
	e := rule.As(err)
	if e == nil || e.Kind != rule.Invalid || len(e.Fields) == 0 {
		t.Fatalf("got %v, want a rule.Error of kind Invalid with fields", err)
	}
	for _, secret := range secrets {
		if len(secret) >= 5 && strings.Contains(fmt.Sprint(e, e.Fields), secret) {
			t.Fatalf("the refusal %q repeats a full number", e)
		}
	}
	return e.Fields
}

func TestValidateNamesEveryBrokenRuleWithoutTheValue(t *testing.T) {
	owner := func(name, percent, ssn string) reseller.Owner {
		return reseller.Owner{Name: name, Title: "Member", OwnershipPercent: reseller.Percent(percent), SSN: ssn}
	}
	cases := []struct {
		name   string
		change func(*reseller.NewApplication)
		field  string
		want   string
	}{
		{"legal name missing", func(a *reseller.NewApplication) { a.Business.LegalName = " " }, "business.legalName", "is required"},
		{"legal name with a NUL", func(a *reseller.NewApplication) { a.Business.LegalName = "Cedar\x00" }, "business.legalName", "without control characters"},
		{"legal name not UTF-8", func(a *reseller.NewApplication) { a.Business.LegalName = "Cedar \xff" }, "business.legalName", "must be plain text"},
		{"entity type missing", func(a *reseller.NewApplication) { a.Business.EntityType = "" }, "business.entityType", "is required"},
		{"tax id with a dash", func(a *reseller.NewApplication) { a.Business.TaxID = "87-1234567" }, "business.taxId", "must be 9 digits"},
		{"tax id too short", func(a *reseller.NewApplication) { a.Business.TaxID = "87123456" }, "business.taxId", "must be 9 digits"},
		{"email missing", func(a *reseller.NewApplication) { a.Business.Email = "" }, "business.email", "is required"},
		{"email invalid", func(a *reseller.NewApplication) { a.Business.Email = "owner at example" }, "business.email", "must be a valid email"},
		{"email with display name", func(a *reseller.NewApplication) { a.Business.Email = "Owner <o@example.com>" }, "business.email", "must be a valid email"},
		{"city missing", func(a *reseller.NewApplication) { a.Business.Address.City = "" }, "business.address.city", "is required"},
		{"no owners", func(a *reseller.NewApplication) { a.Owners = nil }, "owners", "must include at least one owner"},
		{"five owners", func(a *reseller.NewApplication) {
			a.Owners = []reseller.Owner{owner("A", "20", "600000001"), owner("B", "20", "600000002"), owner("C", "20", "600000003"),
				owner("D", "20", "600000004"), owner("E", "20", "600000005")}
		}, "owners", "must be at most 4 people"},
		{"owner name missing", func(a *reseller.NewApplication) { a.Owners[1].Name = "" }, "owners.1.name", "is required"},
		{"ssn of 8 digits", func(a *reseller.NewApplication) { a.Owners[0].SSN = "61234567" }, "owners.0.ssn", "must be 9 digits"},
		{"ssn with dashes", func(a *reseller.NewApplication) { a.Owners[0].SSN = "612-34-5678" }, "owners.0.ssn", "must be 9 digits"},
		{"percent over 100", func(a *reseller.NewApplication) {
			a.Owners = a.Owners[:1]
			a.Owners[0].OwnershipPercent = "100.01"
		}, "owners.0.ownershipPercent", "must be a number from 0 to 100"},
		{"negative percent", func(a *reseller.NewApplication) { a.Owners[1].OwnershipPercent = "-1" }, "owners.1.ownershipPercent", "must be a number from 0 to 100"},
		{"percent with 3 decimals", func(a *reseller.NewApplication) { a.Owners[1].OwnershipPercent = "39.995" }, "owners.1.ownershipPercent", "at most 2 decimal places"},
		{"percent not a number", func(a *reseller.NewApplication) { a.Owners[1].OwnershipPercent = "forty" }, "owners.1.ownershipPercent", "must be a number"},
		{"percent missing", func(a *reseller.NewApplication) { a.Owners[1].OwnershipPercent = "" }, "owners.1.ownershipPercent", "is required"},
		{"percents over 100 together", func(a *reseller.NewApplication) { a.Owners[1].OwnershipPercent = "40.01" }, "owners", "add up to 100.01"},
		{"ownership of 120", func(a *reseller.NewApplication) { a.Owners[0].OwnershipPercent = "80" }, "owners", "must own at most 100% together: their ownership percents add up to 120"},
		{"routing of 8 digits", func(a *reseller.NewApplication) { a.Bank.RoutingNumber = "11100002" }, "bank.routingNumber", "must be 9 digits"},
		{"routing failing the ABA checksum", func(a *reseller.NewApplication) { a.Bank.RoutingNumber = "111000026" }, "bank.routingNumber", "must be a valid ABA routing number"},
		{"account of 3 digits", func(a *reseller.NewApplication) { a.Bank.AccountNumber = "123" }, "bank.accountNumber", "must be 4 to 17 digits"},
		{"account of 18 digits", func(a *reseller.NewApplication) { a.Bank.AccountNumber = "123456789012345678" }, "bank.accountNumber", "must be 4 to 17 digits"},
		{"account with a space", func(a *reseller.NewApplication) { a.Bank.AccountNumber = "4400 112233" }, "bank.accountNumber", "must be 4 to 17 digits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := validApplication()
			c.change(&app)
			fields := invalidFields(t, app.Validate(), secretsOf(app))
			if !strings.Contains(strings.Join(fields[c.field], " "), c.want) {
				t.Fatalf("Validate() fields %v, want %s to say %q", fields, c.field, c.want)
			}
		})
	}
	for _, routing := range []string{"111000025", "123456780", "021000021", "011000015"} {
		app := validApplication()
		app.Bank.RoutingNumber = routing
		if err := app.Validate(); err != nil {
			t.Errorf("routing number %s: %v", routing, err)
		}
	}
	shares := validApplication()
	shares.Owners[0].OwnershipPercent, shares.Owners[1].OwnershipPercent = " 33.33% ", "66.67"
	if err := shares.Validate(); err != nil {
		t.Fatalf("shares of 33.33%% and 66.67: %v", err)
	}
	if err := validApplication().Validate(); err != nil {
		t.Fatalf("a valid application: %v", err)
	}
}

func TestParseApplicationReadsTheDocumentStrictly(t *testing.T) {
	doc := func(change func(map[string]any)) []byte {
		var m map[string]any
		b, _ := json.Marshal(validApplication())
		_ = json.Unmarshal(b, &m)
		if change != nil {
			change(m)
		}
		out, _ := json.Marshal(m)
		return out
	}
	got, err := reseller.ParseApplication(doc(func(m map[string]any) { m["owners"].([]any)[1].(map[string]any)["ownershipPercent"] = 40 }))
	if err != nil {
		t.Fatalf("valid document: %v", err)
	}
	if got.Owners[0].OwnershipPercent != "60" || got.Owners[1].OwnershipPercent != "40" {
		t.Fatalf("ownership percents read as %q and %q, want 60 and 40 (a string and a number)", got.Owners[0].OwnershipPercent, got.Owners[1].OwnershipPercent)
	}
	missing, err := reseller.ParseApplication(doc(func(m map[string]any) { delete(m["owners"].([]any)[0].(map[string]any), "ownershipPercent") }))
	if err != nil {
		t.Fatalf("a document without a percent is read, and refused by validation: %v", err)
	}
	if fields := invalidFields(t, missing.Validate(), nil); len(fields["owners.0.ownershipPercent"]) == 0 {
		t.Fatalf("a missing percent: %v", fields)
	}
	cases := []struct {
		name  string
		data  []byte
		field string
		want  string
	}{
		{"unknown field", doc(func(m map[string]any) { m["business"].(map[string]any)["taxNumber"] = "x" }), "", `unknown field "taxNumber"`},
		{"tax id as a number", doc(func(m map[string]any) { m["business"].(map[string]any)["taxId"] = 871234567 }), "business.taxId", "must be a JSON string"},
		{"percent as a boolean", doc(func(m map[string]any) { m["owners"].([]any)[0].(map[string]any)["ownershipPercent"] = true }), "owners.ownershipPercent", "must be a JSON number or string"},
		{"not JSON", []byte(`{"business": `), "", "not valid JSON"},
		{"empty", []byte(``), "", "the document is empty"},
		{"two documents", append(doc(nil), doc(nil)...), "", "one JSON object and nothing after it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := reseller.ParseApplication(c.data)
			e := rule.As(err)
			if e == nil || e.Kind != rule.Invalid {
				t.Fatalf("ParseApplication() = %v, want a rule.Error of kind Invalid", err)
			}
			said := e.Message
			if c.field != "" {
				said = strings.Join(e.Fields[c.field], " ")
			}
			if !strings.Contains(said, c.want) {
				t.Fatalf("ParseApplication() = %v (fields %v), want %q under %q", e, e.Fields, c.want, c.field)
			}
			if strings.Contains(fmt.Sprint(e, e.Fields), "871234567") {
				t.Fatalf("the message %q repeats the tax id", err)
			}
		})
	}
}

func TestSubmitStoresOnlySealedNumbersWithItsEvent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	app := validApplication()
	app.Business.DBAName = ""

	for _, org := range []uuid.UUID{f.merchant, uuid.Must(uuid.NewV7())} {
		if _, err := f.apps.Submit(ctx, reseller.Submission{Reseller: org, Application: app}); !errors.Is(err, reseller.ErrNotReseller) {
			t.Fatalf("Submit to %s = %v, want ErrNotReseller", org, err)
		}
	}
	if _, err := f.apps.Submit(ctx, reseller.Submission{Reseller: f.suspended, Application: app}); !rule.Is(err, rule.Conflict) {
		t.Fatalf("Submit to a suspended reseller = %v, want a Conflict", err)
	}
	bad := validApplication()
	bad.Bank.AccountNumber = "12"
	invalidFields(t, mustFail(f.submit(ctx, bad)), secretsOf(bad))
	unsigned := reseller.Submission{Reseller: f.reseller, Application: validApplication(), Signature: &reseller.Signature{Name: " "}}
	fields := invalidFields(t, mustFail(f.apps.Submit(ctx, unsigned)), nil)
	if len(fields["consent"]) == 0 || len(fields["signature"]) == 0 {
		t.Fatalf("an unsigned submission: %v, want consent and signature refused", fields)
	}
	if n := f.count(t); n != 0 {
		t.Fatalf("%d applications stored after refusals, want 0", n)
	}

	id, err := f.submit(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.apps.Application(ctx, f.reseller, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Business.TaxIDLastFour != "4567" || got.Bank.AccountLastFour != "2233" ||
		len(got.Owners) != 2 || got.Owners[0].SSNLastFour != "5678" || got.Owners[1].SSNLastFour != "6789" {
		t.Fatalf("last fours: %+v", got)
	}
	if got.Business.DBAName != nil {
		t.Fatalf("dbaName = %q, want nil for a business without one", *got.Business.DBAName)
	}
	if got.Owners[0].OwnershipPercent.Text('f') != "60.00" || got.Owners[1].Name != "Tom Becker" {
		t.Fatalf("owners: %+v", got.Owners)
	}
	if n := got.History[0].Note; n == nil || *n != "Application submitted" {
		t.Fatalf("an operator's application has the note %v", n)
	}
	var rows []string
	if err := f.db.Select(&rows, `SELECT a::text FROM applications a WHERE id = $1
		UNION ALL SELECT o::text FROM application_owners o WHERE application_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		for _, secret := range secretsOf(app) {
			if strings.Contains(row, secret) {
				t.Fatalf("row %s holds the full number %s", row, secret)
			}
		}
	}

	// Its event, written with it, carries it as the API shows it.
	var events []struct {
		Type string `db:"type"`
		Data string `db:"data"`
	}
	if err := f.db.Select(&events, `SELECT type, data::text AS data FROM events WHERE organization_id = $1`, f.reseller); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Type != "application.submitted" {
		t.Fatalf("events %+v, want one application.submitted", events)
	}
	var data models.Application
	if err := json.Unmarshal([]byte(events[0].Data), &data); err != nil {
		t.Fatal(err)
	}
	model, _ := json.Marshal(got.Model())
	again, _ := json.Marshal(data)
	if string(model) != string(again) {
		t.Fatalf("event data %s, want the application as read %s", again, model)
	}
	for _, secret := range secretsOf(app) {
		if strings.Contains(events[0].Data, secret) {
			t.Fatalf("the event holds the full number %s", secret)
		}
	}
}

func mustFail(_ uuid.UUID, err error) error { return err }

// The sign-up form's one-time key: the same form sent again answers the
// application it made; the key with another form is refused.
func TestSubmitWithAKeyMakesOneApplication(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	sub := reseller.Submission{Reseller: f.reseller, Application: validApplication(),
		Signature: &reseller.Signature{Consent: true, Name: "Maria Alvarez"}, Key: uuid.NewString()}
	ids := make([]uuid.UUID, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			id, err := f.apps.Submit(ctx, sub)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("one form sent 4 times at once made %v, want one application", ids)
		}
	}
	if n := f.count(t); n != 1 {
		t.Fatalf("%d applications, want 1", n)
	}
	got, err := f.apps.Application(ctx, f.reseller, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if n := got.History[0].Note; n == nil || *n != "Submitted on the sign-up page, signed electronically by Maria Alvarez" {
		t.Fatalf("a signed application has the note %v", n)
	}

	other := sub
	other.Application.Business.LegalName = "Another Business LLC"
	if _, err := f.apps.Submit(ctx, other); !errors.Is(err, idempotency.ErrReused) {
		t.Fatalf("the key with another application = %v, want ErrReused", err)
	}
	other.Key = uuid.NewString()
	if _, err := f.apps.Submit(ctx, other); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t); n != 2 {
		t.Fatalf("%d applications, want 2", n)
	}
}

func TestSubmissionsFromOneNetworkAreLimited(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	network := "2001:db8:" + f.reseller.String()[:4] + "::/64"
	for i := range reseller.SubmissionLimit {
		if err := f.apps.SubmissionFrom(ctx, network); err != nil {
			t.Fatalf("submission %d: %v", i+1, err)
		}
	}
	err := f.apps.SubmissionFrom(ctx, network)
	e := rule.As(err)
	if e == nil || e.Kind != rule.Limited || e.RetryAfter <= 0 || e.RetryAfter > reseller.SubmissionWindow {
		t.Fatalf("submission %d: %v, want a Limited refusal with a wait within the hour", reseller.SubmissionLimit+1, err)
	}
	if err := f.apps.SubmissionFrom(ctx, "2001:db8:ffff::/64"); err != nil {
		t.Fatalf("another network: %v", err)
	}
	f.mu.Lock()
	f.now = f.now.Add(reseller.SubmissionWindow)
	f.mu.Unlock()
	if err := f.apps.SubmissionFrom(ctx, network); err != nil {
		t.Fatalf("an hour later: %v", err)
	}
	if err := f.apps.DeleteOldSubmissions(ctx); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := f.db.Get(&left, `SELECT count(*) FROM application_limits WHERE subject = $1`, network); err != nil || left != 1 {
		t.Fatalf("%d submissions kept after housekeeping (%v), want the last one", left, err)
	}
}

func TestSignUpPageBySlug(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	p, err := f.apps.SignUpPageOf(ctx, f.slug)
	if err != nil || p.ResellerID != f.reseller || !p.Open() || p.Slug != f.slug {
		t.Fatalf("page of %s: %+v, %v", f.slug, p, err)
	}
	p, err = f.apps.SignUpPageOf(ctx, "s-"+f.suspended.String()[24:])
	if err != nil || p.ResellerID != f.suspended || p.Open() {
		t.Fatalf("a suspended reseller's page: %+v, %v, want it closed", p, err)
	}
	if _, err := f.apps.SignUpPageOf(ctx, "no-such-reseller"); !rule.Is(err, rule.NotFound) {
		t.Fatalf("an unknown slug: %v, want NotFound", err)
	}
}

// A reseller's page by its id (the portal shows it): its slug, open or
// not; an organization that is no reseller has none. Its address is the
// slug under the public URL.
func TestSignUpPageOfAReseller(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	p, err := f.apps.SignUpPageFor(ctx, f.reseller)
	if err != nil || p.ResellerID != f.reseller || !p.Open() || p.Slug != f.slug {
		t.Fatalf("page of %s: %+v, %v", f.reseller, p, err)
	}
	if p, err = f.apps.SignUpPageFor(ctx, f.suspended); err != nil || p.Open() {
		t.Fatalf("a suspended reseller's page: %+v, %v, want it closed", p, err)
	}
	for _, id := range []uuid.UUID{f.merchant, uuid.New()} {
		if _, err := f.apps.SignUpPageFor(ctx, id); !rule.Is(err, rule.NotFound) {
			t.Errorf("%s: %v, want NotFound", id, err)
		}
	}
	for _, base := range []string{"https://pay.example.com", "https://pay.example.com/"} {
		if got := reseller.SignUpURL(base, "north-wind"); got != "https://pay.example.com/apply/north-wind" {
			t.Errorf("SignUpURL(%q): %s", base, got)
		}
	}
}

func TestSetStageAppendsHistoryAndKeepsFinalStages(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	id, err := f.submit(ctx, validApplication())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.apps.SetStage(ctx, id, "in_review", "Underwriting started."); err != nil {
		t.Fatal(err)
	}
	if err := f.apps.SetStage(ctx, id, "in_review", ""); !errors.Is(err, reseller.ErrStageChange) {
		t.Fatalf("same stage again = %v, want ErrStageChange", err)
	}
	if err := f.apps.SetStage(ctx, id, "approvd", ""); !errors.Is(err, reseller.ErrInvalidStage) {
		t.Fatalf("unknown stage = %v, want ErrInvalidStage", err)
	}
	if err := f.apps.SetStage(ctx, uuid.Must(uuid.NewV7()), "approved", ""); !errors.Is(err, reseller.ErrNotFound) {
		t.Fatalf("unknown id = %v, want ErrNotFound", err)
	}
	if err := f.apps.SetStage(ctx, id, "declined", ""); err != nil {
		t.Fatal(err)
	}
	if err := f.apps.SetStage(ctx, id, "approved", ""); !errors.Is(err, reseller.ErrStageChange) {
		t.Fatalf("out of declined = %v, want ErrStageChange", err)
	}

	got, err := f.apps.Application(ctx, f.reseller, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stage != "declined" || len(got.History) != 3 {
		t.Fatalf("stage %s, history %+v", got.Stage, got.History)
	}
	for i, want := range []string{"submitted", "in_review", "declined"} {
		if got.History[i].Stage != want {
			t.Fatalf("history[%d] = %s, want %s", i, got.History[i].Stage, want)
		}
		if i > 0 && !got.History[i].At.After(got.History[i-1].At) {
			t.Fatalf("history not oldest first: %+v", got.History)
		}
	}
	if n := got.History[1].Note; n == nil || *n != "Underwriting started." {
		t.Fatalf("note of in_review: %v", n)
	}
	if got.History[2].Note != nil {
		t.Fatalf("an empty note is stored as %q, want none", *got.History[2].Note)
	}
	if !got.UpdatedAt.Equal(got.History[2].At) {
		t.Fatalf("updatedAt %s, want the last change %s", got.UpdatedAt, got.History[2].At)
	}
}

func TestListPagesByKeyset(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	var added []uuid.UUID
	for range 5 {
		id, err := f.submit(ctx, validApplication())
		if err != nil {
			t.Fatal(err)
		}
		added = append(added, id)
	}
	// Two applications submitted at the same instant are ordered by id.
	if _, err := f.db.Exec(`UPDATE applications SET submitted_at = (SELECT submitted_at FROM applications WHERE id = $1) WHERE id = $2`, added[3], added[2]); err != nil {
		t.Fatal(err)
	}

	var seen []uuid.UUID
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		page, next, err := f.apps.Applications(ctx, f.reseller, nil, 2, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page {
			seen = append(seen, a.ID)
		}
		if next == "" {
			if len(page) != 1 {
				t.Fatalf("last page holds %d, want 1", len(page))
			}
			break
		}
		after = next
	}
	want := []uuid.UUID{added[4], added[3], added[2], added[1], added[0]}
	if added[2].String() > added[3].String() {
		want[1], want[2] = added[2], added[3]
	}
	if len(seen) != len(want) {
		t.Fatalf("paged %d applications, want %d", len(seen), len(want))
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("order %v, want %v", seen, want)
		}
	}

	for _, bad := range []string{"not a cursor", base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2025-01-01T00:00:00Z"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"x","id":"y"}`)), base64.RawURLEncoding.EncodeToString([]byte(`[]`))} {
		if _, _, err := f.apps.Applications(ctx, f.reseller, nil, 2, bad); !errors.Is(err, keyset.ErrInvalid) {
			t.Errorf("cursor %q: %v, want keyset.ErrInvalid", bad, err)
		}
	}
	other := uuid.Must(uuid.NewV7())
	if page, _, err := f.apps.Applications(ctx, other, nil, 25, ""); err != nil || len(page) != 0 {
		t.Fatalf("another reseller's list: %d applications, %v", len(page), err)
	}
	if _, err := f.apps.Application(ctx, other, added[0]); !errors.Is(err, reseller.ErrNotFound) {
		t.Fatalf("another reseller's Get = %v, want ErrNotFound", err)
	}
}

func TestPortfolioMerchantsOrderedByNameWithProducts(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := f.db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO products (key, name) VALUES ('zz_test_b', 'Bee'), ('zz_test_a', 'Ay') ON CONFLICT (key) DO NOTHING`)
	names := []string{"Zephyr Tools", "acme Bakery", "Acme Bakery 2"}
	ids := map[string]uuid.UUID{}
	for _, name := range names {
		id := uuid.Must(uuid.NewV7())
		ids[name] = id
		exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, $2, 'merchant')`, id, name)
		exec(`INSERT INTO portfolio_merchants (reseller_id, merchant_id) VALUES ($1, $2)`, f.reseller, id)
	}
	exec(`INSERT INTO organization_products (organization_id, product_key) VALUES ($1, 'zz_test_b'), ($1, 'zz_test_a')`, ids["Zephyr Tools"])

	var wantOrder []string
	if err := f.db.Select(&wantOrder, `SELECT name FROM unnest($1::text[]) AS name ORDER BY name`, pq.StringArray(names)); err != nil {
		t.Fatal(err)
	}
	got, err := (&reseller.Store{DB: f.db}).Merchants(ctx, f.reseller)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d merchants, want the 3 of the portfolio (not the merchant outside it)", len(got))
	}
	for i, m := range got {
		if m.Name != wantOrder[i] {
			t.Fatalf("merchant %d is %s, want %s (ordered by name)", i, m.Name, wantOrder[i])
		}
		if m.Name == "Zephyr Tools" {
			if len(m.Products) != 2 || m.Products[0].Key != "zz_test_a" || m.Products[1].Name != "Bee" {
				t.Fatalf("products of %s: %+v", m.Name, m.Products)
			}
		} else if m.Products == nil || len(m.Products) != 0 {
			t.Fatalf("products of %s: %#v, want an empty list", m.Name, m.Products)
		}
	}
	if empty, err := (&reseller.Store{DB: f.db}).Merchants(ctx, f.merchant); err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("empty portfolio: %#v, %v", empty, err)
	}
}
