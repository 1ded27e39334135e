package pgtest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

func TestRunGivesMigratedDatabase(t *testing.T) {
	db := open(t, testDSN)
	name := currentDatabase(t, db)
	if !strings.HasPrefix(name, "test_pgtest_") || len(name) != len("test_pgtest_")+8 {
		t.Errorf("database name %q, want test_pgtest_ and 8 hex digits", name)
	}
	if !migrated(t, db) {
		t.Error("database is not migrated")
	}
}

func TestNewDatabase(t *testing.T) {
	var name string
	t.Run("use", func(t *testing.T) {
		db := open(t, pgtest.NewDatabase(t))
		name = currentDatabase(t, db)
		if name == currentDatabase(t, open(t, testDSN)) {
			t.Error("NewDatabase returned the package's database")
		}
		if !migrated(t, db) {
			t.Error("database is not migrated")
		}
	})

	var left bool
	err := open(t, testDSN).Get(&left, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name)
	if err != nil {
		t.Fatal(err)
	}
	if left {
		t.Errorf("database %s was not dropped after the test", name)
	}
}

// The migrated databases are copies of one template, which takes no
// connections (a connection would stop the next copy); of other
// migrations' templates (other checkouts sharing the server), a few stay.
func TestMigratedTemplate(t *testing.T) {
	pgtest.NewDatabase(t)
	var all, closed int
	err := open(t, testDSN).QueryRow(`SELECT count(*), count(*) FILTER (WHERE datistemplate AND NOT datallowconn)
		FROM pg_database WHERE datname LIKE 'pgtest\_template\_%' AND datname NOT LIKE '%\_building'`).Scan(&all, &closed)
	if err != nil {
		t.Fatal(err)
	}
	if all < 1 || all > 7 || closed != all {
		t.Errorf("%d templates, %d of them closed to connections: want 1 to 7, all closed", all, closed)
	}
}

func TestNewEmptyDatabase(t *testing.T) {
	if migrated(t, open(t, pgtest.NewEmptyDatabase(t))) {
		t.Error("empty database has migrations")
	}
}

func TestDSNFor(t *testing.T) {
	got := pgtest.DSNFor("postgres://postgres@127.0.0.1:20001/payreq?sslmode=disable", "test_x_01234567")
	want := "postgres://postgres@127.0.0.1:20001/test_x_01234567?sslmode=disable"
	if got != want {
		t.Errorf("DSNFor = %q, want %q", got, want)
	}
}

func open(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := postgres.Open(t.Context(), dsn, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func currentDatabase(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var name string
	if err := db.Get(&name, `SELECT current_database()`); err != nil {
		t.Fatal(err)
	}
	return name
}

func migrated(t *testing.T, db *sqlx.DB) bool {
	t.Helper()
	var applied bool
	if err := db.Get(&applied, `SELECT to_regclass('goose_db_version') IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	return applied
}
