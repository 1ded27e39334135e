package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/vault"
)

func (c *cli) count(table string) int {
	c.t.Helper()
	var n int
	if err := c.db.Get(&n, `SELECT count(*) FROM `+table); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c *cli) jsonOf(v any, args ...string) {
	c.t.Helper()
	if err := json.Unmarshal([]byte(c.ok(args...)), v); err != nil {
		c.t.Fatalf("payreq %s --json: %v", strings.Join(args, " "), err)
	}
}

// An operator onboards a merchant of a reseller from nothing to its first
// invoice without SQL: organizations, the Owner, a location, a MID, a key;
// the key takes a token and the merchant bills on its MID; the reseller
// sees the merchant in its portfolio.
func TestOnboardingFromNothingToTheFirstInvoice(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var reseller, merchant struct{ ID string }
	c.jsonOf(&reseller, "orgs", "create", "--kind", "reseller", "--name", "Cascade Payments", "--json")
	c.jsonOf(&merchant, "orgs", "create", "--kind", "merchant", "--name", "Juniper Bakery", "--reseller", reseller.ID, "--json")
	for _, org := range []string{reseller.ID, merchant.ID} {
		c.ok("users", "create", "--org", org, "--name", "Owner", "--email", "owner@"+org[:8]+".example.com", "--role", "Owner")
	}
	var loc models.Location
	c.jsonOf(&loc, "locations", "create", "--org", merchant.ID, "--name", "Main Street", "--time-zone", "America/Denver",
		"--address-line1", "12 Main St", "--city", "Boulder", "--state", "CO", "--postal-code", "80302", "--email", "hi@juniper.example.com", "--json")
	var mid models.MerchantAccount
	c.jsonOf(&mid, "mids", "create", "--org", merchant.ID, "--location", loc.Id.String(), "--mid", newMID(), "--json")
	var key, rkey struct{ KeyID, Secret string }
	c.jsonOf(&key, "keys", "create", "--org", merchant.ID, "--name", "Billing", "--permissions", "payments.create,payments.view,accounts.view", "--json")
	c.jsonOf(&rkey, "keys", "create", "--org", reseller.ID, "--name", "Partner", "--permissions", "portfolio.view", "--json")

	env := apitest.New(t, testDSN, apitest.Options{DataDir: c.dataDir})
	tok := env.Token(key.KeyID, key.Secret)
	resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: tok, Body: map[string]any{
		"merchantAccountId": mid.Id, "invoiceNumber": "JB-0001", "amount": "42.00", "poNumber": nil, "customerName": "Ari",
		"customerCompany": nil, "customerEmail": "ari@example.com", "customerPhone": nil, "delivery": nil, "memo": nil,
		"dueDate": nil, "lines": nil, "send": false}})
	apitest.Want(t, "first invoice", resp.StatusCode, http.StatusCreated)
	var inv models.Invoice
	resp.JSON(t, &inv)
	apitest.WantText(t, "location", inv.LocationName, "Main Street")
	portfolio := env.Do(apitest.Request{Method: "GET", Path: "/organizations/" + reseller.ID + "/portfolio", Token: env.Token(rkey.KeyID, rkey.Secret)})
	apitest.Want(t, "portfolio", portfolio.StatusCode, http.StatusOK)
	apitest.Want(t, "the merchant in the portfolio", strings.Contains(string(portfolio.Body), merchant.ID), true)

	var inactive models.Location
	c.jsonOf(&inactive, "locations", "deactivate", "--json", loc.Id.String())
	apitest.Want(t, "deactivated", inactive.Status, models.LocationStatusInactive)
	resp = env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: tok, Body: map[string]any{
		"merchantAccountId": mid.Id, "invoiceNumber": "JB-0002", "amount": "42.00", "poNumber": nil, "customerName": "Ari",
		"customerCompany": nil, "customerEmail": "ari@example.com", "customerPhone": nil, "delivery": nil, "memo": nil,
		"dueDate": nil, "lines": nil, "send": false}})
	apitest.Want(t, "an invoice on an inactive location", resp.StatusCode, http.StatusUnprocessableEntity)
}

// Every bad onboarding argument: one line, exit 2, nothing written.
func TestOnboardingRefusesBadArguments(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	// A database of its own: it counts every table's rows, which the
	// tests running beside it add to.
	c.dsn = pgtest.NewDatabase(t)
	db, err := sqlx.Open("postgres", c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c.db = db
	var merchant, reseller, other struct{ ID, Slug string }
	c.jsonOf(&merchant, "orgs", "create", "--kind", "merchant", "--name", "M", "--json")
	c.jsonOf(&reseller, "orgs", "create", "--kind", "reseller", "--name", "R", "--json")
	c.jsonOf(&other, "orgs", "create", "--kind", "merchant", "--name", "Other", "--json")
	var loc, otherLoc models.Location
	loc1 := []string{"--name", "L", "--address-line1", "1 A St", "--city", "C", "--state", "OR", "--postal-code", "97201", "--json"}
	c.jsonOf(&loc, append([]string{"locations", "create", "--org", merchant.ID, "--time-zone", "America/Los_Angeles"}, loc1...)...)
	c.jsonOf(&otherLoc, append([]string{"locations", "create", "--org", other.ID, "--time-zone", "America/Los_Angeles"}, loc1...)...)
	held := newMID()
	c.ok("mids", "create", "--org", merchant.ID, "--location", loc.Id.String(), "--mid", held)
	c.ok("users", "create", "--org", merchant.ID, "--name", "Owner", "--email", "o@m.example.com", "--role", "Owner")

	tables := []string{"organizations", "portfolio_merchants", "people", "memberships", "locations", "merchant_accounts"}
	before := map[string]int{}
	for _, tb := range tables {
		before[tb] = c.count(tb)
	}
	for _, args := range [][]string{
		{"orgs", "create", "--kind", "bank", "--name", "B"},
		{"orgs", "create", "--kind", "merchant", "--name", ""},
		{"orgs", "create", "--kind", "merchant", "--name", "X", "--reseller", merchant.ID},
		{"orgs", "create", "--kind", "merchant", "--name", "X", "--reseller", "not-a-uuid"},
		{"orgs", "create", "--kind", "reseller", "--name", "X", "--reseller", reseller.ID},
		{"orgs", "create", "--kind", "reseller", "--name", "X", "--slug", "ab"},
		{"orgs", "create", "--kind", "reseller", "--name", "X", "--slug", "Cascade"},
		{"orgs", "create", "--kind", "reseller", "--name", "X", "--slug", "cascade_payments"},
		{"orgs", "create", "--kind", "reseller", "--name", "X", "--slug", strings.Repeat("a", 41)},
		{"orgs", "create", "--kind", "reseller", "--name", "X", "--slug", reseller.Slug},
		{"orgs", "create", "--kind", "merchant", "--name", "X", "--slug", "juniper-bakery"},
		{"users", "create", "--org", merchant.ID, "--name", "U", "--email", "not-an-email", "--role", "Owner"},
		{"users", "create", "--org", merchant.ID, "--name", "U", "--email", "u@m.example.com", "--role", "King"},
		{"users", "create", "--org", merchant.ID, "--name", "U", "--email", "o@m.example.com", "--role", "Admin"},
		{"users", "create", "--org", merchant.ID, "--name", "U", "--email", "u@m.example.com", "--role", "Member", "--permissions", "portfolio.view"},
		{"users", "create", "--org", "00000000-0000-0000-0000-000000000000", "--name", "U", "--email", "u@m.example.com", "--role", "Owner"},
		append([]string{"locations", "create", "--org", merchant.ID, "--time-zone", "Mars/Olympus_Mons"}, loc1...),
		append([]string{"locations", "create", "--org", reseller.ID, "--time-zone", "America/Los_Angeles"}, loc1...),
		{"locations", "create", "--org", merchant.ID, "--time-zone", "America/Los_Angeles", "--name", "L"},
		{"locations", "deactivate", "00000000-0000-0000-0000-000000000000"},
		{"mids", "create", "--org", merchant.ID, "--location", loc.Id.String(), "--mid", held},
		{"mids", "create", "--org", merchant.ID, "--location", loc.Id.String(), "--mid", "12ab"},
		{"mids", "create", "--org", merchant.ID, "--location", otherLoc.Id.String(), "--mid", newMID()},
		{"mids", "delete"},
		{"users"},
	} {
		c.usage(args...)
	}
	// A MID belongs to one organization: another one cannot add it.
	if msg := c.usage("mids", "create", "--org", other.ID, "--location", otherLoc.Id.String(), "--mid", held); !strings.Contains(msg, "another organization") {
		t.Errorf("a MID another organization holds: stderr %q", msg)
	}
	for _, tb := range tables {
		apitest.Want(t, tb+" rows after refusals", c.count(tb), before[tb])
	}
}

// A reseller's slug names its sign-up page: the one asked for, else one
// made from its name, unique; a merchant has none.
func TestResellerSlugs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	type org struct {
		ID        string
		Slug      *string
		SignUpURL string
	}
	var asked, first, second, accented, short, merchant org
	suffix := fmt.Sprint(rand.IntN(1e6))
	c.jsonOf(&asked, "orgs", "create", "--kind", "reseller", "--name", "Cascade Payments", "--slug", "cascade-"+suffix, "--json")
	c.jsonOf(&first, "orgs", "create", "--kind", "reseller", "--name", "Fjord & Pine Payments "+suffix, "--json")
	c.jsonOf(&second, "orgs", "create", "--kind", "reseller", "--name", "FJORD — pine payments "+suffix+"!", "--json")
	c.jsonOf(&accented, "orgs", "create", "--kind", "reseller", "--name", "Café Crème Partners "+suffix, "--json")
	c.jsonOf(&short, "orgs", "create", "--kind", "reseller", "--name", "Ω", "--json")
	c.jsonOf(&merchant, "orgs", "create", "--kind", "merchant", "--name", "Juniper Bakery", "--json")
	base := "fjord-pine-payments-" + suffix
	for _, tc := range []struct {
		what string
		o    org
		want string
	}{
		{"asked for", asked, "cascade-" + suffix},
		{"from the name", first, base},
		{"from the same name again", second, base + "-2"},
		{"accents dropped", accented, "cafe-creme-partners-" + suffix},
	} {
		if tc.o.Slug == nil || *tc.o.Slug != tc.want {
			t.Errorf("slug %s: %v, want %s", tc.what, tc.o.Slug, tc.want)
			continue
		}
		if !strings.HasSuffix(tc.o.SignUpURL, "/apply/"+tc.want) || !strings.HasPrefix(tc.o.SignUpURL, "http") {
			t.Errorf("signUpUrl %s: %q", tc.what, tc.o.SignUpURL)
		}
	}
	if short.Slug == nil || !strings.HasPrefix(*short.Slug, "reseller") {
		t.Errorf("a name with too little for a slug got %v, want reseller…", short.Slug)
	}
	if merchant.Slug != nil || merchant.SignUpURL != "" {
		t.Errorf("a merchant has a slug %v, %q", *merchant.Slug, merchant.SignUpURL)
	}
	if out := c.ok("orgs", "create", "--kind", "reseller", "--name", "Line Partners"); !strings.Contains(out, "\nsign-up page http") {
		t.Errorf("orgs create printed %q, want the sign-up page's address", out)
	}
	var slug string
	if err := c.db.Get(&slug, `SELECT slug FROM organizations WHERE id = $1`, first.ID); err != nil || slug != base {
		t.Errorf("stored slug %q (%v), want %s", slug, err, base)
	}

	// The demo's reseller has one too, and payreq demo prints its page
	// (make run shows it).
	res := c.demo()
	if err := c.db.Get(&slug, `SELECT slug FROM organizations WHERE id = $1`, res.Reseller.OrganizationID); err != nil ||
		slug != res.Reseller.Slug || !strings.HasPrefix(res.Reseller.SignUpURL, "http") || !strings.HasSuffix(res.Reseller.SignUpURL, "/apply/"+slug) {
		t.Errorf("demo reseller: slug %q (%v), printed %q and %q", slug, err, res.Reseller.Slug, res.Reseller.SignUpURL)
	}
}

// newMID is a MID no other test (or run) uses.
func newMID() string { return fmt.Sprintf("7%011d", rand.Int64N(1e11)) }

// payreq secrets reencrypt with nothing sealed under an old key re-seals
// nothing, and says so.
func TestSecretsReencryptWithNothingToDo(t *testing.T) {
	t.Parallel()
	// A database of its own: re-encryption covers every organization's
	// values, and the shared one holds values of other tests' keys.
	c := newCLI(t)
	c.dsn = pgtest.NewDatabase(t)
	c.demo()
	out := c.ok("secrets", "reencrypt")
	if !strings.HasPrefix(out, "re-sealed 0 values under key ") {
		t.Errorf("printed %q", out)
	}
	c.usage("secrets", "reencrypt", "now")
}

// payreq secrets reencrypt never reports success while a value is still
// sealed under an older key: rows another transaction holds are waited
// for up to --lock-timeout, then it exits 1 naming what remains under
// which key; once they are free, a run exits 0 and nothing is left under
// the old key, which may then be removed.
func TestSecretsReencryptWaitsForLockedRows(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.dsn = pgtest.NewDatabase(t)
	db, err := sqlx.Open("postgres", c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	env := apitest.New(t, c.dsn, apitest.Options{DataDir: c.dataDir})
	m := apitest.NewMerchant(t, env) // and applications, with their owners
	rc := apitest.NewReceiver(t)
	resp := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token,
		Body: map[string]any{"url": rc.URL, "eventTypes": []string{"invoice.created"}}})
	apitest.Want(t, "endpoint", resp.StatusCode, http.StatusCreated)

	// A new key first in the file, the old one kept after it.
	keyPath := filepath.Join(c.dataDir, "encryption-key")
	oldFile, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	newFile, err := vault.GenerateKeyFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, append(newFile, oldFile...), 0o600); err != nil {
		t.Fatal(err)
	}
	oldKey, newKey := keyID(t, oldFile), keyID(t, newFile)

	// Another transaction holds an endpoint, an application and an owner
	// of another application.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, lock := range []string{
		`SELECT 1 FROM webhook_endpoints FOR UPDATE`,
		`SELECT 1 FROM applications WHERE id = (SELECT min(id::text)::uuid FROM applications) FOR UPDATE`,
		`SELECT 1 FROM application_owners WHERE application_id = (SELECT max(id::text)::uuid FROM applications) FOR UPDATE`,
	} {
		if _, err := tx.Exec(lock); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := c.run("secrets", "reencrypt", "--lock-timeout", "300ms")
	apitest.Want(t, "exit status while rows are held", code, 1)
	if strings.Contains(out, "re-sealed") && !strings.Contains(errOut, "remain") {
		t.Errorf("reported success: %q", out)
	}
	if lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n"); len(lines) != 1 {
		t.Errorf("stderr %q, want one line", errOut)
	}
	for _, want := range []string{"key " + oldKey, "tax ids: 1", "account numbers: 1", "SSNs: 1", "webhook secrets: 1"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not name %q", errOut, want)
		}
	}

	// Run again with the rows still held: it waits for them and, once the
	// other transaction ends, re-seals them and succeeds.
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := c.run("secrets", "reencrypt")
		done <- result{out, errOut, code}
	}()
	var res result
	for waiting := false; !waiting; {
		select {
		case res = <-done:
			t.Fatalf("secrets reencrypt ended before waiting for the rows: exit %d, %q %q", res.code, res.out, res.errOut)
		case <-time.After(10 * time.Millisecond):
		}
		if err := db.Get(&waiting, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	res = <-done
	apitest.Want(t, "exit status once the rows are free", res.code, 0)
	apitest.Want(t, "printed", res.out, "re-sealed 4 values under key "+newKey+"\n")
	var left int
	if err := db.Get(&left, `SELECT
		(SELECT count(*) FROM applications WHERE tax_id_key_id <> $1 OR account_key_id <> $1) +
		(SELECT count(*) FROM application_owners WHERE ssn_key_id <> $1) +
		(SELECT count(*) FROM webhook_endpoints WHERE secret_key_id <> $1 OR previous_key_id <> $1)`, newKey); err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "rows with a value under another key than the new one", left, 0)
	c.usage("secrets", "reencrypt", "--lock-timeout", "-1s")
	c.usage("secrets", "reencrypt", "--lock-timeout", "soon")
}

// keyID is the id of the first key of a key file.
func keyID(t *testing.T, keyFile []byte) string {
	t.Helper()
	v, err := vault.New(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return v.Current()
}
