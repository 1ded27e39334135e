package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/vault"
)

// The full numbers of applicationDoc; none may be printed or stored in clear.
var docSecrets = []string{"871234567", "612345678", "623456789", "4400112233"}

// applicationDoc is a valid application document; change edits it first.
func applicationDoc(t *testing.T, change func(doc map[string]any)) string {
	t.Helper()
	var doc map[string]any
	err := json.Unmarshal([]byte(`{
		"business": {
			"legalName": "Cedar Street Auto Repair LLC", "dbaName": "Cedar Street Auto", "entityType": "llc",
			"taxId": "871234567", "phone": "+15125550177", "email": "owner@cedarstreetauto.com",
			"website": "https://cedarstreetauto.com",
			"address": {"line1": "1200 Cedar St", "line2": null, "city": "Round Rock", "state": "TX", "postalCode": "78664"}
		},
		"owners": [
			{"name": "Maria Alvarez", "title": "Managing member", "ownershipPercent": "60", "ssn": "612345678"},
			{"name": "Tom Becker", "title": "Member", "ownershipPercent": 40, "ssn": "623456789"}
		],
		"bank": {"routingNumber": "111000025", "accountNumber": "4400112233"}
	}`), &doc)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(doc)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "application.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (c *cli) applicationCount(reseller uuid.UUID) int {
	c.t.Helper()
	var n int
	if err := c.db.Get(&n, `SELECT count(*) FROM applications WHERE reseller_id = $1`, reseller); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func noSecretIn(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range docSecrets {
		if strings.Contains(text, s) || strings.Contains(text, hex.EncodeToString([]byte(s))) {
			t.Errorf("%s holds the full number %s: %s", what, s, text)
		}
	}
}

var addedLine = regexp.MustCompile(`^application ([0-9a-f-]{36}) submitted through reseller ([0-9a-f-]{36})\n$`)

func TestApplicationsAddEncryptsAndStageAppendsHistory(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.demo().Reseller.OrganizationID

	out, errOut, code := c.run("applications", "add", "--org", org.String(), "--file", applicationDoc(t, nil))
	if code != 0 {
		t.Fatalf("applications add: exit %d: %s", code, errOut)
	}
	m := addedLine.FindStringSubmatch(out)
	if m == nil || m[2] != org.String() {
		t.Fatalf("applications add printed %q", out)
	}
	noSecretIn(t, "the output", out+errOut)
	id := uuid.MustParse(m[1])

	var row struct {
		Stage     string `db:"stage"`
		TaxLast   string `db:"tax_id_last_four"`
		AcctLast  string `db:"account_last_four"`
		TaxSealed []byte `db:"tax_id_encrypted"`
		TaxKey    string `db:"tax_id_key_id"`
	}
	if err := c.db.Get(&row, `SELECT stage, tax_id_last_four, account_last_four, tax_id_encrypted, tax_id_key_id
		FROM applications WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if row.Stage != "submitted" || row.TaxLast != "4567" || row.AcctLast != "2233" {
		t.Fatalf("stored %+v", row)
	}
	// Sealed with the key under the data directory, not dropped.
	keyFile, err := os.ReadFile(filepath.Join(c.dataDir, "encryption-key"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := v.Open(row.TaxSealed, row.TaxKey, "application:"+id.String()+":tax_id"); err != nil || plain != "871234567" {
		t.Fatalf("sealed tax id opens to %q, %v", plain, err)
	}

	c.ok("applications", "stage", id.String(), "in_review", "--note", "Documents received.")
	c.ok("applications", "stage", "--note", "Need a voided cheque.", id.String(), "needs_info")
	if out := c.ok("applications", "stage", id.String(), "approved"); out != "application "+id.String()+" moved to approved\n" {
		t.Errorf("applications stage printed %q", out)
	}
	var history []struct {
		Stage string  `db:"stage"`
		Note  *string `db:"note"`
	}
	if err := c.db.Select(&history, `SELECT stage, note FROM application_history WHERE application_id = $1 ORDER BY seq`, id); err != nil {
		t.Fatal(err)
	}
	wantStages := []string{"submitted", "in_review", "needs_info", "approved"}
	if len(history) != len(wantStages) {
		t.Fatalf("history %+v, want %v", history, wantStages)
	}
	for i, h := range history {
		if h.Stage != wantStages[i] {
			t.Fatalf("history[%d] = %s, want %s", i, h.Stage, wantStages[i])
		}
	}
	if n := history[2].Note; n == nil || *n != "Need a voided cheque." {
		t.Errorf("note of needs_info: %v", n)
	}
	if history[3].Note != nil {
		t.Errorf("a stage without --note has note %q", *history[3].Note)
	}

	c.ok("applications", "stage", id.String(), "boarded")
	for _, args := range [][]string{
		{"applications", "stage", id.String(), "in_review"},           // boarded is final
		{"applications", "stage", id.String(), "approvd"},             // unknown stage
		{"applications", "stage", uuid.NewString(), "in_review"},      // unknown application
		{"applications", "stage", "not-a-uuid", "in_review"},          // malformed id
		{"applications", "stage", id.String()},                        // no stage
		{"applications", "stage", id.String(), "in_review", "extra"},  // too many
		{"applications", "stage", id.String(), "in_review", "--nope"}, // unknown flag
		{"applications", "promote", id.String()},                      // unknown subcommand
		{"applications"},
	} {
		c.usage(args...)
	}

	var rows []string
	if err := c.db.Select(&rows, `SELECT a::text FROM applications a WHERE id = $1
		UNION ALL SELECT o::text FROM application_owners o WHERE application_id = $1
		UNION ALL SELECT h::text FROM application_history h WHERE application_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+2+5 {
		t.Fatalf("%d rows, want the application, 2 owners and 5 history entries", len(rows))
	}
	for _, r := range rows {
		noSecretIn(t, "a database row", r)
	}
}

// A bad document or organization: one line on stderr naming the problem (never
// a full number), exit status 2, nothing stored.
func TestApplicationsAddRefusesBadInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	seed := c.demo()
	org := seed.Reseller.OrganizationID.String()
	business := func(doc map[string]any) map[string]any { return doc["business"].(map[string]any) }
	owner := func(doc map[string]any, i int) map[string]any { return doc["owners"].([]any)[i].(map[string]any) }

	cases := []struct {
		name    string
		change  func(map[string]any)
		mention string
	}{
		{"legal name missing", func(d map[string]any) { delete(business(d), "legalName") }, "business.legalName is required"},
		{"tax id with a dash", func(d map[string]any) { business(d)["taxId"] = "87-1234567" }, "business.taxId must be 9 digits"},
		{"tax id of 10 digits", func(d map[string]any) { business(d)["taxId"] = "8712345670" }, "business.taxId must be 9 digits"},
		{"bad email", func(d map[string]any) { business(d)["email"] = "owner@" }, "business.email must be a valid email"},
		{"ssn of 8 digits", func(d map[string]any) { owner(d, 1)["ssn"] = "62345678" }, "owners.1.ssn must be 9 digits"},
		{"ownership over 100", func(d map[string]any) { owner(d, 0)["ownershipPercent"] = "101" }, "owners.0.ownershipPercent must be a number from 0 to 100"},
		{"ownership missing", func(d map[string]any) { delete(owner(d, 0), "ownershipPercent") }, "owners.0.ownershipPercent is required"},
		{"ownership summing over 100", func(d map[string]any) { owner(d, 1)["ownershipPercent"] = "40.5" }, "owners must own at most 100% together: their ownership percents add up to 100.5"},
		{"no owners", func(d map[string]any) { d["owners"] = []any{} }, "owners must include at least one owner"},
		{"routing of 8 digits", func(d map[string]any) { d["bank"].(map[string]any)["routingNumber"] = "11100002" }, "bank.routingNumber must be 9 digits"},
		{"routing failing the ABA checksum", func(d map[string]any) { d["bank"].(map[string]any)["routingNumber"] = "111000052" }, "bank.routingNumber must be a valid ABA routing number"},
		{"five owners", func(d map[string]any) {
			owners := d["owners"].([]any)
			d["owners"] = append(owners, owners[0], owners[1], owners[0])
		}, "owners must be at most 4 people"},
		{"two problems at once", func(d map[string]any) {
			business(d)["taxId"] = "87123456"
			owner(d, 0)["ssn"] = "61234567x"
		}, "business.taxId must be 9 digits, without spaces or dashes; owners.0.ssn must be 9 digits"},
		{"account of 3 digits", func(d map[string]any) { d["bank"].(map[string]any)["accountNumber"] = "440" }, "bank.accountNumber must be 4 to 17 digits"},
		{"account of 18 digits", func(d map[string]any) { d["bank"].(map[string]any)["accountNumber"] = "440011223344556677" }, "bank.accountNumber must be 4 to 17 digits"},
		{"unknown field", func(d map[string]any) { d["notes"] = "call after 5" }, `unknown field "notes"`},
		{"tax id as a number", func(d map[string]any) { business(d)["taxId"] = 871234567 }, "business.taxId must be a JSON string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := c.sub(t, c.dataDir)
			msg := c.usage("applications", "add", "--org", org, "--file", applicationDoc(t, tc.change))
			if !strings.Contains(msg, tc.mention) {
				t.Errorf("stderr %q does not say %q", msg, tc.mention)
			}
			noSecretIn(t, "stderr", msg)
		})
	}

	notJSON := filepath.Join(t.TempDir(), "application.json")
	if err := os.WriteFile(notJSON, []byte(`{"business": {"taxId": "871234567"`), 0o600); err != nil {
		t.Fatal(err)
	}
	valid := applicationDoc(t, nil)
	suspended := c.demo().Reseller.OrganizationID
	c.ok("orgs", "suspend", suspended.String())
	for _, tc := range []struct {
		name    string
		args    []string
		mention string
	}{
		{"not JSON", []string{"--org", org, "--file", notJSON}, "not valid JSON"},
		{"merchant organization", []string{"--org", seed.Merchant.OrganizationID.String(), "--file", valid}, "is not a reseller"},
		{"suspended reseller", []string{"--org", suspended.String(), "--file", valid}, "is not taking applications"},
		{"unknown organization", []string{"--org", uuid.NewString(), "--file", valid}, "is not a reseller"},
		{"organization not a uuid", []string{"--org", "northwind", "--file", valid}, "--org must be an organization id"},
		{"no file", []string{"--org", org}, "--file is required"},
		{"missing file", []string{"--org", org, "--file", filepath.Join(t.TempDir(), "absent.json")}, "no such file"},
		{"extra argument", []string{"--org", org, "--file", valid, "again"}, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := c.sub(t, c.dataDir)
			msg := c.usage(append([]string{"applications", "add"}, tc.args...)...)
			if !strings.Contains(msg, tc.mention) {
				t.Errorf("stderr %q does not say %q", msg, tc.mention)
			}
			noSecretIn(t, "stderr", msg)
		})
	}

	if n := c.applicationCount(suspended); n != 5 {
		t.Errorf("%d applications of the suspended reseller, want the 5 of its demo", n)
	}
	if n := c.applicationCount(seed.Reseller.OrganizationID); n != 5 {
		t.Errorf("%d applications after refusals, want the 5 of the demo", n)
	}
	if n := c.applicationCount(seed.Merchant.OrganizationID); n != 0 {
		t.Errorf("%d applications stored for a merchant", n)
	}
}
