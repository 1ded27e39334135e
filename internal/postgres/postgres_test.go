package postgres_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jmoiron/sqlx"

	schema "github.com/payreq/payreq/db"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/postgres"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

func TestOpen(t *testing.T) {
	db := open(t, testDSN)
	if got := db.Stats().MaxOpenConnections; got != postgres.DefaultMaxOpenConns {
		t.Errorf("MaxOpenConnections = %d, want %d", got, postgres.DefaultMaxOpenConns)
	}

	_, err := postgres.Open(t.Context(), "postgres://postgres@127.0.0.1:1/payreq?sslmode=disable", postgres.Pool{})
	if err == nil || !strings.HasPrefix(err.Error(), "postgres: ping: ") {
		t.Errorf("Open of a closed port: err = %v, want a ping error", err)
	}
}

func TestInTx(t *testing.T) {
	db := open(t, pgtest.NewDatabase(t))
	// The deferred unique constraint lets a test make the commit itself fail.
	_, err := db.Exec(`CREATE TABLE intx_probe (id int PRIMARY KEY, ref int, UNIQUE (ref) DEFERRABLE INITIALLY DEFERRED)`)
	if err != nil {
		t.Fatal(err)
	}
	insert := func(tx *sqlx.Tx, id, ref int) error {
		_, err := tx.Exec(`INSERT INTO intx_probe (id, ref) VALUES ($1, $2)`, id, ref)
		return err
	}
	stored := func(id int) bool {
		t.Helper()
		var ok bool
		if err := db.Get(&ok, `SELECT EXISTS (SELECT 1 FROM intx_probe WHERE id = $1)`, id); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	t.Run("commits", func(t *testing.T) {
		err := postgres.InTx(t.Context(), db, func(tx *sqlx.Tx) error { return insert(tx, 1, 1) })
		if err != nil {
			t.Fatal(err)
		}
		if !stored(1) {
			t.Error("row not committed")
		}
	})

	t.Run("rolls back on error", func(t *testing.T) {
		errStop := errors.New("stop")
		err := postgres.InTx(t.Context(), db, func(tx *sqlx.Tx) error {
			if err := insert(tx, 2, 2); err != nil {
				return err
			}
			return errStop
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("err = %v, want %v", err, errStop)
		}
		if stored(2) {
			t.Error("row committed despite the error")
		}
	})

	t.Run("rolls back on panic and panics on", func(t *testing.T) {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want boom", p)
			}
			if stored(3) {
				t.Error("row committed despite the panic")
			}
		}()
		_ = postgres.InTx(t.Context(), db, func(tx *sqlx.Tx) error {
			if err := insert(tx, 3, 3); err != nil {
				return err
			}
			panic("boom")
		})
	})

	t.Run("reports a failed commit", func(t *testing.T) {
		err := postgres.InTx(t.Context(), db, func(tx *sqlx.Tx) error {
			if err := insert(tx, 4, 4); err != nil {
				return err
			}
			return insert(tx, 5, 4) // violates the unique ref only at commit
		})
		if err == nil || !strings.HasPrefix(err.Error(), "postgres: commit: ") {
			t.Fatalf("err = %v, want a commit error", err)
		}
		if stored(4) {
			t.Error("row committed despite the failed commit")
		}
	})

	t.Run("releases the connection", func(t *testing.T) {
		if n := db.Stats().InUse; n != 0 {
			t.Errorf("%d connections still in use", n)
		}
	})
}

func TestMigrateTwice(t *testing.T) {
	// pgtest.Run migrated the database already: this run must find nothing to do.
	if err := postgres.Migrate(t.Context(), open(t, testDSN).DB); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	dsn := pgtest.NewEmptyDatabase(t)
	migrations := fstest.MapFS{
		"00001_widgets.sql": {Data: []byte(`-- +goose Up
CREATE TABLE widgets (id int PRIMARY KEY);
-- +goose Down
DROP TABLE widgets;
`)},
	}
	// The first migration also creates goose's version table, so that the
	// concurrent runs below meet in the second migration and nowhere else.
	if err := postgres.MigrateFS(t.Context(), open(t, dsn).DB, migrations); err != nil {
		t.Fatal(err)
	}
	migrations["00002_first_widget.sql"] = &fstest.MapFile{Data: []byte(`-- +goose Up
INSERT INTO widgets VALUES (1);
SELECT pg_sleep(0.5); -- keep the other migrator waiting
-- +goose Down
DELETE FROM widgets;
`)}

	// Two pools stand for two processes: each migrates on its own connections.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		db := open(t, dsn)
		wg.Go(func() { errs[i] = postgres.MigrateFS(context.Background(), db.DB, migrations) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}

	db := open(t, dsn)
	if err := postgres.MigrateFS(t.Context(), db.DB, migrations); err != nil {
		t.Errorf("third run: %v", err)
	}
	var widgets, applied int
	if err := db.Get(&widgets, `SELECT count(*) FROM widgets`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&applied, `SELECT count(*) FROM goose_db_version WHERE version_id = 2`); err != nil {
		t.Fatal(err)
	}
	if widgets != 1 || applied != 1 {
		t.Errorf("migration ran %d times and was recorded %d times, want once", widgets, applied)
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

// migrateBefore applies to db the migrations whose names sort before
// first: the schema as it was, for a test of the migrations after it.
func migrateBefore(t *testing.T, db *sqlx.DB, first string) {
	t.Helper()
	all, err := fs.Sub(schema.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(all, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	for _, name := range names {
		if name >= first {
			break
		}
		b, err := fs.ReadFile(all, name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = &fstest.MapFile{Data: b}
	}
	if err := postgres.MigrateFS(t.Context(), db.DB, before); err != nil {
		t.Fatal(err)
	}
}
