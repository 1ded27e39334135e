package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
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
	c := newCLI(t)
	var reseller, merchant struct{ ID string }
	c.jsonOf(&reseller, "orgs", "create", "--kind", "reseller", "--name", "Cascade Payments", "--json")
	c.jsonOf(&merchant, "orgs", "create", "--kind", "merchant", "--name", "Juniper Bakery", "--reseller", reseller.ID, "--json")
	for _, org := range []string{reseller.ID, merchant.ID} {
		c.ok("users", "create", "--org", org, "--name", "Owner", "--email", "owner@"+org[:8]+".example.com", "--role", "Owner")
	}
	var loc gen.Location
	c.jsonOf(&loc, "locations", "create", "--org", merchant.ID, "--name", "Main Street", "--time-zone", "America/Denver",
		"--address-line1", "12 Main St", "--city", "Boulder", "--state", "CO", "--postal-code", "80302", "--email", "hi@juniper.example.com", "--json")
	var mid gen.MerchantAccount
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
	var inv gen.Invoice
	resp.JSON(t, &inv)
	apitest.WantText(t, "location", inv.LocationName, "Main Street")
	portfolio := env.Do(apitest.Request{Method: "GET", Path: "/organizations/" + reseller.ID + "/portfolio", Token: env.Token(rkey.KeyID, rkey.Secret)})
	apitest.Want(t, "portfolio", portfolio.StatusCode, http.StatusOK)
	apitest.Want(t, "the merchant in the portfolio", strings.Contains(string(portfolio.Body), merchant.ID), true)

	var inactive gen.Location
	c.jsonOf(&inactive, "locations", "deactivate", "--json", loc.Id.String())
	apitest.Want(t, "deactivated", inactive.Status, gen.LocationStatusInactive)
	resp = env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: tok, Body: map[string]any{
		"merchantAccountId": mid.Id, "invoiceNumber": "JB-0002", "amount": "42.00", "poNumber": nil, "customerName": "Ari",
		"customerCompany": nil, "customerEmail": "ari@example.com", "customerPhone": nil, "delivery": nil, "memo": nil,
		"dueDate": nil, "lines": nil, "send": false}})
	apitest.Want(t, "an invoice on an inactive location", resp.StatusCode, http.StatusUnprocessableEntity)
}

// Every bad onboarding argument: one line, exit 2, nothing written.
func TestOnboardingRefusesBadArguments(t *testing.T) {
	c := newCLI(t)
	var merchant, reseller, other struct{ ID string }
	c.jsonOf(&merchant, "orgs", "create", "--kind", "merchant", "--name", "M", "--json")
	c.jsonOf(&reseller, "orgs", "create", "--kind", "reseller", "--name", "R", "--json")
	c.jsonOf(&other, "orgs", "create", "--kind", "merchant", "--name", "Other", "--json")
	var loc, otherLoc gen.Location
	loc1 := []string{"--name", "L", "--address-line1", "1 A St", "--city", "C", "--state", "OR", "--postal-code", "97201", "--json"}
	c.jsonOf(&loc, append([]string{"locations", "create", "--org", merchant.ID, "--time-zone", "America/Los_Angeles"}, loc1...)...)
	c.jsonOf(&otherLoc, append([]string{"locations", "create", "--org", other.ID, "--time-zone", "America/Los_Angeles"}, loc1...)...)
	held := newMID()
	c.ok("mids", "create", "--org", merchant.ID, "--location", loc.Id.String(), "--mid", held)
	c.ok("users", "create", "--org", merchant.ID, "--name", "Owner", "--email", "o@m.example.com", "--role", "Owner")

	tables := []string{"organizations", "portfolio_merchants", "users", "locations", "merchant_accounts"}
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

// newMID is a MID no other test (or run) uses.
func newMID() string { return fmt.Sprintf("7%011d", rand.Int64N(1e11)) }

// payreq secrets reencrypt with nothing sealed under an old key re-seals
// nothing, and says so.
func TestSecretsReencryptWithNothingToDo(t *testing.T) {
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
