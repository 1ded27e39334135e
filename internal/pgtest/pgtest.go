// Package pgtest gives each test package a fresh, migrated database of its own.
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
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lib/pq"

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
// name; migrated says whether to apply the migrations.
func createDatabase(ctx context.Context, migrated bool) (string, error) {
	name := "test_" + packageName() + "_" + randomHex()
	admin, err := postgres.Open(ctx, server, postgres.Pool{})
	if err != nil {
		return "", err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	if !migrated {
		return name, nil
	}
	if err := migrateDatabase(ctx, name); err != nil {
		if dropErr := dropDatabase(ctx, name); dropErr != nil {
			return "", fmt.Errorf("%w (%w)", err, dropErr)
		}
		return "", err
	}
	return name, nil
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
