// Package pgtest gives each test package a fresh, migrated database of its own,
// copied from a migrated template database that the first test binary to need
// it builds (one per set of migrations).
// A package with database tests runs them through Run from TestMain:
//
//	var testDSN string
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }
//
// The server is the one DATABASE_URL points to, or else the private cluster under
// <repo root>/.data that devdb runs.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/lib/pq"

	schema "github.com/payreq/payreq/db"
	"github.com/payreq/payreq/internal/devdb"
	"github.com/payreq/payreq/internal/postgres"
)

// server is the URL of a database on the test server, through which Run and
// NewDatabase create and drop databases.
var server string

// Run creates a fresh migrated database, points *dsn at it, runs the tests and
// drops the database again, whether the tests pass or not. It returns the exit
// code for os.Exit; a failure to set up prints one line to stderr and returns 1.
func Run(m *testing.M, dsn *string) int {
	ctx := context.Background()
	var err error
	if server, err = serverURL(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	name, err := createDatabase(ctx, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	*dsn = DSNFor(server, name)

	code := m.Run()

	if err := dropDatabase(ctx, name); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// NewDatabase creates another fresh migrated database for one test, drops it when
// the test ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, true)
}

// NewEmptyDatabase is NewDatabase without the migrations: for tests of migrating.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, false)
}

func newDatabase(t testing.TB, migrated bool) string {
	t.Helper()
	if server == "" {
		t.Fatal("pgtest: no server; call pgtest.Run from TestMain")
	}
	name, err := createDatabase(context.Background(), migrated)
	if err != nil {
		t.Fatal("pgtest:", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(context.Background(), name); err != nil {
			t.Error("pgtest:", err)
		}
	})
	return DSNFor(server, name)
}

// DSNFor returns the URL base with its database replaced by dbname. base must be
// a URL, like the ones Run and NewDatabase hand out.
func DSNFor(base, dbname string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(fmt.Sprintf("pgtest: DSNFor: %v", err))
	}
	u.Path = "/" + dbname
	u.RawPath = ""
	return u.String()
}

// serverURL returns DATABASE_URL, or else starts the private cluster.
func serverURL(ctx context.Context) (string, error) {
	if dsn := os.Getenv("DATABASE_URL"); dsn != "" {
		u, err := url.Parse(dsn)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return "", errors.New("DATABASE_URL must be a postgres:// URL")
		}
		return dsn, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return devdb.Ensure(ctx, filepath.Join(root, ".data"))
}

// repoRoot walks up from the working directory, a package directory under go
// test, to the directory holding go.mod.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("no go.mod in %s or above it; set DATABASE_URL", wd)
		}
	}
}

// createDatabase creates a database named after the test package and returns its
// name; migrated says whether to apply the migrations, which it does by
// copying the migrated template (migratedTemplate).
func createDatabase(ctx context.Context, migrated bool) (string, error) {
	name := "test_" + packageName() + "_" + randomHex()
	admin, err := postgres.Open(ctx, server, postgres.Pool{})
	if err != nil {
		return "", err
	}
	defer admin.Close()
	if !migrated {
		if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
		return name, nil
	}
	for try := 0; ; try++ {
		template, err := migratedTemplate(ctx)
		if err != nil {
			return "", err
		}
		_, err = admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)+` TEMPLATE `+pq.QuoteIdentifier(template))
		var pqErr *pq.Error
		if try == 0 && errors.As(err, &pqErr) && pqErr.Code == "3D000" {
			// The template is gone (dropped by a test binary of other
			// migrations): build it again.
			forgetTemplate(template)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create database %s from %s: %w", name, template, err)
		}
		return name, nil
	}
}

// Migrating a database takes 2-4 s (a second of the server's CPU); copying
// a migrated one takes a tenth of that. The template is built once per
// server and set of migrations, by whichever test binary needs it first,
// and named after the migrations' hash, so a changed migration builds a new
// one; then all but the newest keptTemplates of other migrations are dropped.
var (
	templateMu   sync.Mutex
	templateName string
)

// keptTemplates is how many templates of other migrations building one
// keeps (the newest, by oid).
const keptTemplates = 6

// templateLock is the advisory lock key under which one test binary at a
// time looks for the template and builds it.
const templateLock = 0x7067746573742d74 // "pgtest-t"

func migratedTemplate(ctx context.Context) (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	if templateName != "" {
		return templateName, nil
	}
	name, err := templateFor()
	if err != nil {
		return "", err
	}
	admin, err := postgres.Open(ctx, server, postgres.Pool{MaxOpenConns: 1})
	if err != nil {
		return "", err
	}
	defer admin.Close()
	conn, err := admin.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(templateLock)); err != nil {
		return "", fmt.Errorf("lock the template: %w", err)
	}
	defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(templateLock))

	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if err := buildTemplate(ctx, conn, name); err != nil {
			return "", err
		}
	}
	templateName = name
	return name, nil
}

// buildTemplate migrates a new database, then renames it to name, so that
// a template that exists is complete.
func buildTemplate(ctx context.Context, conn *sql.Conn, name string) error {
	// Other migrations' templates beyond the newest few (several checkouts
	// of other migrations may share the server and test at once: theirs
	// stay), and a build left by a binary that died.
	stale, err := conn.QueryContext(ctx, `SELECT datname FROM pg_database
		WHERE datname LIKE 'pgtest\_template\_%\_building'
		   OR datname IN (SELECT datname FROM pg_database WHERE datname LIKE 'pgtest\_template\_%' AND datname <> $1
		                  ORDER BY oid DESC OFFSET $2)`, name, keptTemplates)
	if err != nil {
		return err
	}
	var names []string
	for stale.Next() {
		var n string
		if err := stale.Scan(&n); err != nil {
			stale.Close()
			return err
		}
		names = append(names, n)
	}
	stale.Close()
	if err := stale.Err(); err != nil {
		return err
	}
	for _, n := range names {
		q := pq.QuoteIdentifier(n)
		if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+q+` IS_TEMPLATE false`); err != nil {
			return fmt.Errorf("drop stale template %s: %w", n, err)
		}
		if _, err := conn.ExecContext(ctx, `DROP DATABASE `+q+` WITH (FORCE)`); err != nil {
			return fmt.Errorf("drop stale template %s: %w", n, err)
		}
	}
	building := name + "_building"
	if _, err := conn.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(building)); err != nil {
		return fmt.Errorf("create template %s: %w", building, err)
	}
	if err := migrateDatabase(ctx, building); err != nil {
		if _, dropErr := conn.ExecContext(context.Background(), `DROP DATABASE IF EXISTS `+pq.QuoteIdentifier(building)+` WITH (FORCE)`); dropErr != nil {
			return fmt.Errorf("%w (%w)", err, dropErr)
		}
		return err
	}
	// The server waits up to 5 s for the migration's connections to end.
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+pq.QuoteIdentifier(building)+` RENAME TO `+pq.QuoteIdentifier(name)); err != nil {
		return fmt.Errorf("rename template %s: %w", building, err)
	}
	// No connections: CREATE DATABASE refuses to copy a template in use.
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+pq.QuoteIdentifier(name)+` WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`); err != nil {
		return fmt.Errorf("mark template %s: %w", name, err)
	}
	return nil
}

func forgetTemplate(name string) {
	templateMu.Lock()
	defer templateMu.Unlock()
	if templateName == name {
		templateName = ""
	}
}

// templateFor is the template's name for the migrations this binary holds:
// pgtest_template_ and 16 hex digits of their hash.
func templateFor() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(schema.Migrations, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(schema.Migrations, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash the migrations: %w", err)
	}
	return "pgtest_template_" + hex.EncodeToString(h.Sum(nil)[:8]), nil
}

func migrateDatabase(ctx context.Context, name string) error {
	db, err := postgres.Open(ctx, DSNFor(server, name), postgres.Pool{})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := postgres.Migrate(ctx, db.DB); err != nil {
		return fmt.Errorf("database %s: %w", name, err)
	}
	return nil
}

// dropDatabase drops the database, ending any connections to it that are left.
func dropDatabase(ctx context.Context, name string) error {
	admin, err := postgres.Open(ctx, server, postgres.Pool{})
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pq.QuoteIdentifier(name)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

var notIdentifier = regexp.MustCompile(`[^a-z0-9]+`)

// packageName is the test binary's name, like "invoice" for invoice.test, made
// fit for a database name.
func packageName() string {
	name := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	name = notIdentifier.ReplaceAllString(strings.ToLower(name), "_")
	return name[:min(len(name), 40)]
}

func randomHex() string {
	b := make([]byte, 4)
	rand.Read(b) // never fails, as documented
	return hex.EncodeToString(b)
}
