package reseller_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/reseller"
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
			{Name: "Maria Alvarez", Title: "Managing member", OwnershipPercent: jsonnum.MustDecimal("60"), SSN: "612345678"},
			{Name: "Tom Becker", Title: "Member", OwnershipPercent: jsonnum.MustDecimal("40.00"), SSN: "623456789"},
		},
		Bank: reseller.Bank{RoutingNumber: "111000025", AccountNumber: "4400112233"},
	}
}

type fixture struct {
	db       *sqlx.DB
	apps     *reseller.Store
	reseller uuid.UUID
	merchant uuid.UUID
	mu       sync.Mutex
	now      time.Time
}

// newFixture makes a reseller and a merchant organization and an
// Applications whose clock moves one second a call.
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
	f := &fixture{db: db, reseller: uuid.Must(uuid.NewV7()), merchant: uuid.Must(uuid.NewV7()),
		now: time.Date(2025, 3, 2, 17, 25, 0, 0, time.UTC)}
	f.apps = &reseller.Store{DB: db, Vault: v, Now: func() time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.now = f.now.Add(time.Second)
		return f.now
	}}
	for id, kind := range map[uuid.UUID]string{f.reseller: "reseller", f.merchant: "merchant"} {
		if _, err := db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, $2, $3)`, id, kind+" "+id.String(), kind); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) count(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.db.Get(&n, `SELECT count(*) FROM applications WHERE reseller_id = $1`, f.reseller); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestValidateNamesEveryBrokenRuleWithoutTheValue(t *testing.T) {
	cases := []struct {
		name   string
		change func(*reseller.NewApplication)
		want   string
	}{
		{"legal name missing", func(a *reseller.NewApplication) { a.Business.LegalName = " " }, "business.legalName is required"},
		{"entity type missing", func(a *reseller.NewApplication) { a.Business.EntityType = "" }, "business.entityType is required"},
		{"tax id with a dash", func(a *reseller.NewApplication) { a.Business.TaxID = "87-1234567" }, "business.taxId must be 9 digits"},
		{"tax id too short", func(a *reseller.NewApplication) { a.Business.TaxID = "87123456" }, "business.taxId must be 9 digits"},
		{"email missing", func(a *reseller.NewApplication) { a.Business.Email = "" }, "business.email is required"},
		{"email invalid", func(a *reseller.NewApplication) { a.Business.Email = "owner at example" }, "business.email must be a valid email"},
		{"email with display name", func(a *reseller.NewApplication) { a.Business.Email = "Owner <o@example.com>" }, "business.email must be a valid email"},
		{"city missing", func(a *reseller.NewApplication) { a.Business.Address.City = "" }, "business.address.city is required"},
		{"no owners", func(a *reseller.NewApplication) { a.Owners = nil }, "owners must list at least one owner"},
		{"owner name missing", func(a *reseller.NewApplication) { a.Owners[1].Name = "" }, "owners[1].name is required"},
		{"ssn of 8 digits", func(a *reseller.NewApplication) { a.Owners[0].SSN = "61234567" }, "owners[0].ssn must be 9 digits"},
		{"ssn with dashes", func(a *reseller.NewApplication) { a.Owners[0].SSN = "612-34-5678" }, "owners[0].ssn must be 9 digits"},
		{"percent over 100", func(a *reseller.NewApplication) {
			a.Owners = a.Owners[:1]
			a.Owners[0].OwnershipPercent = jsonnum.MustDecimal("100.01")
		}, "owners[0].ownershipPercent must be between 0 and 100"},
		{"negative percent", func(a *reseller.NewApplication) { a.Owners[1].OwnershipPercent = jsonnum.MustDecimal("-1") }, "owners[1].ownershipPercent must be between 0 and 100"},
		{"percent with 3 decimals", func(a *reseller.NewApplication) { a.Owners[1].OwnershipPercent = jsonnum.MustDecimal("39.995") }, "owners[1].ownershipPercent must have at most 2 decimal places"},
		{"percents over 100 together", func(a *reseller.NewApplication) { a.Owners[1].OwnershipPercent = jsonnum.MustDecimal("40.01") }, "owners ownership percents add up to 100.01, more than 100"},
		{"routing of 8 digits", func(a *reseller.NewApplication) { a.Bank.RoutingNumber = "11100002" }, "bank.routingNumber must be 9 digits"},
		{"account of 3 digits", func(a *reseller.NewApplication) { a.Bank.AccountNumber = "123" }, "bank.accountNumber must be 4 to 17 digits"},
		{"account of 18 digits", func(a *reseller.NewApplication) { a.Bank.AccountNumber = "123456789012345678" }, "bank.accountNumber must be 4 to 17 digits"},
		{"account with a space", func(a *reseller.NewApplication) { a.Bank.AccountNumber = "4400 112233" }, "bank.accountNumber must be 4 to 17 digits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := validApplication()
			c.change(&app)
			err := app.Validate()
			var invalid *reseller.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("Validate() = %v, want an *InvalidError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %q, want it to say %q", err, c.want)
			}
			secrets := []string{app.Business.TaxID, app.Bank.AccountNumber}
			for _, o := range app.Owners {
				secrets = append(secrets, o.SSN)
			}
			for _, secret := range secrets {
				if len(secret) >= 5 && strings.Contains(err.Error(), secret) {
					t.Fatalf("the message %q repeats a full number", err)
				}
			}
		})
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
	if _, err := reseller.ParseApplication(doc(nil)); err != nil {
		t.Fatalf("valid document: %v", err)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"unknown field", doc(func(m map[string]any) { m["business"].(map[string]any)["taxNumber"] = "x" }), `unknown field "taxNumber"`},
		{"ownership percent missing", doc(func(m map[string]any) {
			delete(m["owners"].([]any)[0].(map[string]any), "ownershipPercent")
		}), "owners[0].ownershipPercent is required"},
		{"tax id as a number", doc(func(m map[string]any) { m["business"].(map[string]any)["taxId"] = 871234567 }), "business.taxId must be a JSON string"},
		{"not JSON", []byte(`{"business": `), "not valid JSON"},
		{"empty", []byte(``), "the document is empty"},
		{"two documents", append(doc(nil), doc(nil)...), "one JSON object and nothing after it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := reseller.ParseApplication(c.data)
			var invalid *reseller.InvalidError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseApplication() = %v, want an *InvalidError saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), "871234567") {
				t.Fatalf("the message %q repeats the tax id", err)
			}
		})
	}
}

func TestAddStoresOnlySealedNumbersAndRefusesNonResellers(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	app := validApplication()
	app.Business.DBAName = ""

	if _, err := f.apps.Add(ctx, f.merchant, app); !errors.Is(err, reseller.ErrNotReseller) {
		t.Fatalf("Add for a merchant = %v, want ErrNotReseller", err)
	}
	if _, err := f.apps.Add(ctx, uuid.Must(uuid.NewV7()), app); !errors.Is(err, reseller.ErrNotReseller) {
		t.Fatalf("Add for an unknown organization = %v, want ErrNotReseller", err)
	}
	bad := validApplication()
	bad.Bank.AccountNumber = "12"
	var invalid *reseller.InvalidError
	if _, err := f.apps.Add(ctx, f.reseller, bad); !errors.As(err, &invalid) {
		t.Fatalf("Add of an invalid application = %v, want *InvalidError", err)
	}
	if n := f.count(t); n != 0 {
		t.Fatalf("%d applications stored after refusals, want 0", n)
	}

	id, err := f.apps.Add(ctx, f.reseller, app)
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
	var rows []string
	if err := f.db.Select(&rows, `SELECT a::text FROM applications a WHERE id = $1
		UNION ALL SELECT o::text FROM application_owners o WHERE application_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		for _, secret := range []string{"871234567", "612345678", "623456789", "4400112233"} {
			if strings.Contains(row, secret) {
				t.Fatalf("row %s holds the full number %s", row, secret)
			}
		}
	}
}

func TestSetStageAppendsHistoryAndKeepsFinalStages(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	id, err := f.apps.Add(ctx, f.reseller, validApplication())
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
		id, err := f.apps.Add(ctx, f.reseller, validApplication())
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
		if _, _, err := f.apps.Applications(ctx, f.reseller, nil, 2, bad); !errors.Is(err, reseller.ErrInvalidCursor) {
			t.Errorf("cursor %q: %v, want ErrInvalidCursor", bad, err)
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
