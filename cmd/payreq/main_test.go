package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/demo"
	"github.com/payreq/payreq/internal/pgtest"
)

var testDSN string

// runAsPayreq makes the test binary act as the payreq command: the tests run
// it as a child process to see exit statuses and stderr as a user does.
const runAsPayreq = "PAYREQ_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsPayreq) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(pgtest.Run(m, &testDSN))
}

// cli runs payreq with args against the test database and a data directory
// of this test, returning what it printed and its exit status.
type cli struct {
	t       *testing.T
	dataDir string
	db      *sqlx.DB
	dsn     string   // "": testDSN
	env     []string // NAME=value over this process's environment: tests run in parallel
}

// sub is c for the subtest t with dataDir, and env over c's.
func (c *cli) sub(t *testing.T, dataDir string, env ...string) *cli {
	return &cli{t: t, dataDir: dataDir, db: c.db, dsn: c.dsn, env: append(slices.Clip(c.env), env...)}
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	db, err := sqlx.Open("postgres", testDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &cli{t: t, dataDir: secretsDir(t), db: db}
}

// secretsDir is a data directory with the secrets payreq secrets init makes.
func secretsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := app.InitSecrets(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	dsn := c.dsn
	if dsn == "" {
		dsn = testDSN
	}
	cmd.Env = append(append(os.Environ(), c.env...), runAsPayreq+"=1", "DATABASE_URL="+dsn, "PAYREQ_DATA_DIR="+c.dataDir, noExitSleep())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		c.t.Fatalf("payreq %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// ok runs payreq and fails the test unless it succeeds.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("payreq %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// usage runs payreq and checks it fails as a bad flag or argument must:
// exit status 2, nothing on stdout, one line on stderr.
func (c *cli) usage(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 2 {
		c.t.Errorf("payreq %s: exit %d, want 2 (stderr %q)", strings.Join(args, " "), code, errOut)
	}
	if out != "" {
		c.t.Errorf("payreq %s printed %q on stdout", strings.Join(args, " "), out)
	}
	if lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "payreq: ") {
		c.t.Errorf("payreq %s: stderr %q, want one line starting payreq:", strings.Join(args, " "), errOut)
	}
	return errOut
}

// noExitSleep is GORACE for a child: under -race a process sleeps a second
// before it exits (the race runtime's atexit_sleep_ms, for reports from
// goroutines still running), which made 100 runs of payreq take 100 s more.
// A command's work is done when main returns; races found up to then are
// reported as before. Other GORACE options are kept.
func noExitSleep() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// takenAddr is an address another listener holds until the test ends:
// given to serve as PAYREQ_ADDR, a serve that should have refused to start
// fails there (exit 1) rather than serving on.
func takenAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// demo is payreq demo --bare: its organizations and keys, without the
// merchant's 60 days (TestDemoHasTheMerchantsPast runs those).
func (c *cli) demo() demo.Result {
	c.t.Helper()
	var res demo.Result
	if err := json.Unmarshal([]byte(c.ok("demo", "--json", "--bare")), &res); err != nil {
		c.t.Fatalf("demo --json: %v", err)
	}
	return res
}

func (c *cli) keyCount(org uuid.UUID) int {
	c.t.Helper()
	var n int
	if err := c.db.Get(&n, `SELECT count(*) FROM api_keys WHERE organization_id = $1`, org); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// limitedMerchant is a merchant organization whose Owner holds only
// locations.view.
func (c *cli) limitedMerchant() uuid.UUID {
	c.t.Helper()
	org := uuid.New()
	if _, err := c.db.Exec(`INSERT INTO organizations (id, name, kind) VALUES ($1, $2, 'merchant')`, org, "Limited "+org.String()[:8]); err != nil {
		c.t.Fatal(err)
	}
	c.ok("users", "create", "--org", org.String(), "--name", "Owner", "--email", "owner@"+org.String()+".example.com",
		"--role", "Owner", "--permissions", auth.LocationsView)
	return org
}

// A key can only get permissions its creator (the Owner) holds and that
// its organization's kind is offered; a refusal creates nothing.
func TestKeysCreateRefusesPermissionsOutOfReach(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	seed := c.demo()
	limited := c.limitedMerchant()

	cases := []struct {
		name        string
		org         uuid.UUID
		permissions string
		mention     string // the stderr line names it
	}{
		{"permission the Owner lacks", limited, "payments.create", "payments.create"},
		{"one of two the Owner lacks", limited, "locations.view,accounts.view", "accounts.view"},
		{"reseller permission for a merchant", seed.Merchant.OrganizationID, "portfolio.view", "portfolio.view"},
		{"reseller and merchant permissions for a merchant", seed.Merchant.OrganizationID, "locations.view,applications.view", "applications.view"},
		{"merchant permission for a reseller", seed.Reseller.OrganizationID, "payments.view", "payments.view"},
		{"unknown permission", seed.Merchant.OrganizationID, "payments.delete", "payments.delete"},
		{"no permission", seed.Merchant.OrganizationID, "", "permission"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := c.sub(t, c.dataDir)
			before := c.keyCount(tc.org)
			msg := c.usage("keys", "create", "--org", tc.org.String(), "--name", "refused", "--permissions", tc.permissions, "--json")
			if !strings.Contains(msg, tc.mention) {
				t.Errorf("stderr %q does not mention %s", msg, tc.mention)
			}
			if after := c.keyCount(tc.org); after != before {
				t.Errorf("%d keys before, %d after a refused create", before, after)
			}
		})
	}

	// What the Owner holds is granted.
	var k struct {
		KeyID          string    `json:"keyId"`
		Secret         string    `json:"secret"`
		OrganizationID uuid.UUID `json:"organizationId"`
		Permissions    []string  `json:"permissions"`
	}
	out := c.ok("keys", "create", "--org", limited.String(), "--name", "reader", "--permissions", "locations.view", "--json")
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatalf("keys create --json: %v: %s", err, out)
	}
	if !strings.HasPrefix(k.KeyID, "mk_") || len(k.KeyID) != 27 || !strings.HasPrefix(k.Secret, "ms_") || len(k.Secret) != 43 ||
		k.OrganizationID != limited || len(k.Permissions) != 1 || k.Permissions[0] != auth.LocationsView {
		t.Errorf("keys create --json printed %+v", k)
	}
	if n := c.keyCount(limited); n != 1 {
		t.Errorf("%d keys after one create, want 1", n)
	}
}

// Revoked keys stay listed, marked with their revocation date.
func TestKeysListMarksRevokedKeys(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	seed := c.demo()
	org := seed.Merchant.OrganizationID.String()
	var k struct {
		KeyID string `json:"keyId"`
	}
	if err := json.Unmarshal([]byte(c.ok("keys", "create", "--org", org, "--name", "to revoke", "--permissions", "locations.view", "--json")), &k); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("keys", "revoke", k.KeyID); !strings.Contains(out, k.KeyID) {
		t.Errorf("keys revoke printed %q", out)
	}
	c.ok("keys", "revoke", k.KeyID) // twice is fine

	lines := map[string]string{}
	listed := strings.Split(strings.TrimSpace(c.ok("keys", "list", "--org", org)), "\n")
	apitest.Want(t, "header", listed[0], "KEY ID\tNAME\tPERMISSIONS\tSTATE")
	for _, line := range listed[1:] {
		lines[strings.Fields(line)[0]] = line
	}
	if len(lines) != 2 {
		t.Fatalf("keys list shows %d keys, want the demo key and the revoked one: %v", len(lines), lines)
	}
	revoked, active := lines[k.KeyID], lines[seed.Merchant.KeyID]
	if !strings.Contains(revoked, "to revoke") || !strings.Contains(revoked, "revoked 20") {
		t.Errorf("revoked key listed as %q, want its name and \"revoked <date>\"", revoked)
	}
	if strings.Contains(active, "revoked") || !strings.Contains(active, "active") {
		t.Errorf("the demo key listed as %q, want active", active)
	}
	if strings.Contains(c.ok("keys", "list", "--org", org), seed.Merchant.Secret) {
		t.Error("keys list shows a secret")
	}
}

// payreq demo gives its merchant its 60 days (demo's own test counts
// them); with --bare it has none.
func TestDemoHasTheMerchantsPast(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var full demo.Result
	if err := json.Unmarshal([]byte(c.ok("demo", "--json")), &full); err != nil {
		t.Fatal(err)
	}
	count := func(org uuid.UUID, table string) int {
		var n int
		if err := c.db.Get(&n, `SELECT count(*) FROM `+table+` WHERE organization_id = $1`, org); err != nil {
			t.Fatal(err)
		}
		return n
	}
	bare := c.demo().Merchant.OrganizationID
	for _, table := range []string{"customers", "invoices", "deposits", "recurring_invoices"} {
		if n := count(full.Merchant.OrganizationID, table); n == 0 {
			t.Errorf("the demo merchant has no %s", table)
		}
		if n := count(bare, table); n != 0 {
			t.Errorf("the bare demo merchant has %d %s", n, table)
		}
	}
}

func TestOrgsSuspendAndReinstate(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.demo().Merchant.OrganizationID
	status := func() string {
		var s string
		if err := c.db.Get(&s, `SELECT status FROM organizations WHERE id = $1`, org); err != nil {
			t.Fatal(err)
		}
		return s
	}
	c.ok("orgs", "suspend", org.String())
	if s := status(); s != "suspended" {
		t.Errorf("after orgs suspend: %s", s)
	}
	c.ok("orgs", "reinstate", org.String())
	if s := status(); s != "active" {
		t.Errorf("after orgs reinstate: %s", s)
	}
}

// Every bad flag or argument: one line on stderr, exit status 2.
func TestBadArgumentsAreUsageErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.demo().Merchant.OrganizationID.String()
	// {org} is an organization that exists, {unknown} one that does not.
	cases := [][]string{
		{},
		{"frobnicate"},
		{"serve", "now"},
		{"migrate", "--force"},
		{"demo", "--yaml"},
		{"keys"},
		{"keys", "rotate"},
		{"keys", "create", "--bogus"},
		{"keys", "create", "--org", "not-a-uuid", "--name", "k", "--permissions", "locations.view"},
		{"keys", "create", "--org", "{org}", "--permissions", "locations.view"},
		{"keys", "create", "--org", "{org}", "--name", "k", "--permissions", "locations.view", "extra"},
		{"keys", "create", "--org", "{unknown}", "--name", "k", "--permissions", "locations.view"},
		{"keys", "list"},
		{"keys", "list", "--org"},
		{"keys", "revoke"},
		{"keys", "revoke", "mk_a", "mk_b"},
		{"keys", "revoke", "mk_000000000000000000000000"},
		{"orgs"},
		{"orgs", "freeze", "{org}"},
		{"orgs", "suspend"},
		{"orgs", "suspend", "not-a-uuid"},
		{"orgs", "suspend", "{unknown}"},
		{"settle"},
		{"secrets"},
		{"secrets", "rotate"},
		{"secrets", "init"},
		{"settle", "--org", "not-a-uuid"},
		{"settle", "--org", "{unknown}"},
		{"settle", "--org", "{org}", "now"},
	}
	for _, tmpl := range cases {
		t.Run(strings.Join(tmpl, " "), func(t *testing.T) {
			args := make([]string, len(tmpl))
			for i, a := range tmpl {
				args[i] = strings.NewReplacer("{org}", org, "{unknown}", uuid.NewString()).Replace(a)
			}
			c.sub(t, c.dataDir).usage(args...)
		})
	}
	c.env = append(c.env, "PAYREQ_ADDR="+takenAddr(t))
	for name, value := range map[string]string{
		"PAYREQ_REVOCATION_CHECK_INTERVAL": "soon",
		"PAYREQ_PUBLIC_URL":                "ftp://x",
		"PAYREQ_SMS_URL":                   "http://sms.example.com/Messages.json?from=%2B1555",
		"PAYREQ_SMTP_URL":                  "smtp://u:p@relay.local?tls=none&from=a@example.com",
		"PAYREQ_SETTLEMENT_CUTOFF":         "25:00",
		"PAYREQ_SIMULATOR_FEES":            "2.9",
		"PAYREQ_METRICS_ADDR":              ":18492", // every interface, without PAYREQ_METRICS_TOKEN_FILE
		"PAYREQ_TRUST_TRACEPARENT":         "yes",
	} {
		t.Run("bad configuration "+name, func(t *testing.T) {
			c.sub(t, c.dataDir, name+"="+value).usage("serve")
		})
	}
}

// run is also callable in process; a usage error is its own type.
func TestRunReturnsUsageError(t *testing.T) {
	t.Setenv("DATABASE_URL", testDSN)
	t.Setenv("PAYREQ_DATA_DIR", t.TempDir())
	var out bytes.Buffer
	err := run(context.Background(), []string{"keys", "create", "--org", "x"}, &out)
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("run: %v, want a usageError", err)
	}
	if err := run(context.Background(), []string{"help"}, &out); err != nil || !strings.Contains(out.String(), "keys create") {
		t.Errorf("help: %v, %q", err, out.String())
	}
}

// A secret file that cannot be used stops every command that needs it:
// one line naming the file, exit status 2, and no service on a short key.
func TestBadSecretsRefusedAtStart(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	org := c.demo().Merchant.OrganizationID.String()
	c.env = append(c.env, "PAYREQ_ADDR="+takenAddr(t))
	ecdsaKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ecdsaKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, variable string
		content        []byte
	}{
		{"empty pepper", "PAYREQ_PEPPER_FILE", nil},
		{"31-byte pepper", "PAYREQ_PEPPER_FILE", bytes.Repeat([]byte{7}, 31)},
		{"pepper of 31 characters and a newline", "PAYREQ_PEPPER_FILE", []byte(strings.Repeat("7", 31) + "\n")},
		{"pepper of 40 spaces", "PAYREQ_PEPPER_FILE", []byte(strings.Repeat(" ", 40))},
		{"pepper of 33 newlines", "PAYREQ_PEPPER_FILE", []byte(strings.Repeat("\n", 33))},
		{"pepper of 32 raw bytes", "PAYREQ_PEPPER_FILE", bytes.Repeat([]byte{7}, 32)},
		{"pepper line not hex", "PAYREQ_PEPPER_FILE", []byte(strings.Repeat("zz", 32) + "\n")},
		{"31-byte encryption key", "PAYREQ_ENCRYPTION_KEY_FILE", []byte(strings.Repeat("ab", 31) + "\n")},
		{"encryption key not hex", "PAYREQ_ENCRYPTION_KEY_FILE", []byte(strings.Repeat("zz", 32) + "\n")},
		{"signing key not PEM", "PAYREQ_SIGNING_KEY_FILE", []byte("not a key")},
		{"signing key not Ed25519", "PAYREQ_SIGNING_KEY_FILE", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(file, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"keys", "list", "--org", org}, {"serve"}} {
				stderr := c.sub(t, secretsDir(t), tt.variable+"="+file).usage(args...)
				if !strings.Contains(stderr, file) {
					t.Errorf("payreq %s: stderr %q does not name %s", args[0], stderr, file)
				}
			}
		})
	}
}

// A metrics token file that cannot be used stops serve the same way.
func TestBadMetricsTokenRefusedAtStart(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env = append(c.env, "PAYREQ_ADDR="+takenAddr(t), "PAYREQ_METRICS_ADDR=10.0.0.5:9090")
	for name, content := range map[string]string{
		"missing":        "",
		"31 characters":  strings.Repeat("x", 31) + "\n",
		"40 spaces":      strings.Repeat(" ", 40),
		"two lines":      strings.Repeat("x", 32) + "\n" + strings.Repeat("y", 32) + "\n",
		"a space inside": strings.Repeat("x", 20) + " " + strings.Repeat("y", 20),
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "metrics-token")
			if content != "" {
				if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if stderr := c.sub(t, c.dataDir, "PAYREQ_METRICS_TOKEN_FILE="+file).usage("serve"); !strings.Contains(stderr, file) {
				t.Errorf("stderr %q does not name %s", stderr, file)
			}
		})
	}
}

// Secrets made on first use are readable by their owner only.
func TestSecretsInitWritesOwnerOnlyFilesOnce(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := filepath.Join(t.TempDir(), "secrets")
	out := c.ok("secrets", "init", "--dir", dir)
	before := map[string][]byte{}
	for _, name := range []string{"pepper", "signing-key.pem", "encryption-key"} {
		path := filepath.Join(dir, name)
		if !strings.Contains(out, path) {
			t.Errorf("secrets init did not print %s: %q", path, out)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if mode := info.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %o, want 600", name, mode)
		}
		before[name], _ = os.ReadFile(path)
	}
	// Never over an existing file: exit 2, the files as they were.
	if err := os.Remove(filepath.Join(dir, "pepper")); err != nil {
		t.Fatal(err)
	}
	if stderr := c.usage("secrets", "init", "--dir", dir); !strings.Contains(stderr, "signing-key.pem") {
		t.Errorf("stderr %q does not name the file that exists", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "pepper")); err == nil {
		t.Error("a refused secrets init wrote the pepper")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "signing-key.pem")); !bytes.Equal(b, before["signing-key.pem"]) {
		t.Error("a refused secrets init changed the signing key")
	}
}

// With DATABASE_URL set, a missing secret file stops payreq: one line
// naming the file and payreq secrets init, exit 2; none is made.
func TestMissingSecretsRefusedWithADatabaseURL(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	empty := t.TempDir()
	for _, args := range [][]string{{"serve"}, {"migrate"}, {"demo"}} {
		stderr := c.sub(t, empty).usage(args...)
		if !strings.Contains(stderr, filepath.Join(empty, "pepper")) || !strings.Contains(stderr, "payreq secrets init") {
			t.Errorf("payreq %s: stderr %q", args[0], stderr)
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("files made: %v", entries)
	}
}

// Every command answers --help with its usage, on stdout, exit status 0:
// without a database or a valid configuration.
func TestEveryCommandAnswersHelp(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env = append(c.env, "PAYREQ_PUBLIC_URL=not a url") // help needs no configuration
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"usage: payreq COMMAND", "keys create"}},
		{[]string{"serve", "--help"}, []string{"usage: payreq serve"}},
		{[]string{"migrate", "-h"}, []string{"usage: payreq migrate"}},
		{[]string{"demo", "--help"}, []string{"usage: payreq demo"}},
		{[]string{"keys", "--help"}, []string{"usage: payreq COMMAND"}},
		{[]string{"keys", "create", "--help"}, []string{"usage: payreq keys create", "payments.view", "payments.create", "payments.refund", "locations.view", "accounts.view", "portfolio.view", "applications.view"}},
		{[]string{"keys", "create", "--org", "x", "--help"}, []string{"usage: payreq keys create"}},
		{[]string{"keys", "list", "--help"}, []string{"usage: payreq keys list"}},
		{[]string{"keys", "revoke", "--help"}, []string{"usage: payreq keys revoke"}},
		{[]string{"orgs", "suspend", "--help"}, []string{"usage: payreq orgs suspend"}},
		{[]string{"orgs", "reinstate", "--help"}, []string{"usage: payreq orgs reinstate"}},
		{[]string{"applications", "add", "--help"}, []string{"usage: payreq applications add", `"legalName"`, `"taxId"`, `"owners"`, `"accountNumber"`}},
		{[]string{"applications", "stage", "--help"}, []string{"usage: payreq applications stage", "needs_info"}},
		{[]string{"settle", "--help"}, []string{"usage: payreq settle", "JSON"}},
		{[]string{"orgs", "create", "--help"}, []string{"usage: payreq orgs create", "--reseller", "--slug", "/apply/SLUG"}},
		{[]string{"users", "create", "--help"}, []string{"usage: payreq users create", "Owner"}},
		{[]string{"locations", "create", "--help"}, []string{"usage: payreq locations create", "--time-zone"}},
		{[]string{"locations", "deactivate", "--help"}, []string{"usage: payreq locations deactivate"}},
		{[]string{"mids", "create", "--help"}, []string{"usage: payreq mids create"}},
		{[]string{"secrets", "reencrypt", "--help"}, []string{"usage: payreq secrets reencrypt"}},
		{[]string{"secrets", "init", "--help"}, []string{"usage: payreq secrets init", "never overwrites"}},
		{[]string{"db-stop", "--help"}, []string{"usage: payreq db-stop"}},
	} {
		stdout, stderr, code := c.run(tt.args...)
		name := strings.Join(tt.args, " ")
		apitest.Want(t, name+": exit status", code, 0)
		apitest.Want(t, name+": stderr", stderr, "")
		for _, w := range tt.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s: usage lacks %q:\n%s", name, w, stdout)
			}
		}
	}
}
