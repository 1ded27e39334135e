package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// oneConn is a database handle with a single connection, so that a test
// sees what that connection keeps.
func oneConn(t *testing.T) *sqlx.DB {
	t.Helper()
	db := open(t, testDSN)
	db.SetMaxOpenConns(1)
	return db
}

func TestStatementsArePreparedOncePerConnection(t *testing.T) {
	db := oneConn(t)
	for i := range 3 {
		var got int
		if err := db.Get(&got, `SELECT $1::int + 1`, i); err != nil || got != i+1 {
			t.Fatalf("run %d: %d, %v", i, got, err)
		}
	}
	var prepared int
	if err := db.Get(&prepared, `SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT $1::int + 1'`); err != nil {
		t.Fatal(err)
	}
	if prepared != 1 {
		t.Errorf("the statement is prepared %d times on the connection, want once", prepared)
	}
}

func TestStatementsRunTheirGenericPlan(t *testing.T) {
	db := oneConn(t)
	for i := range 3 {
		var got int
		if err := db.Get(&got, `SELECT $1::int * 2`, i); err != nil || got != 2*i {
			t.Fatalf("run %d: %d, %v", i, got, err)
		}
	}
	var plans struct {
		Generic int `db:"generic_plans"`
		Custom  int `db:"custom_plans"`
	}
	if err := db.Get(&plans, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = 'SELECT $1::int * 2'`); err != nil {
		t.Fatal(err)
	}
	if plans.Generic != 3 || plans.Custom != 0 {
		t.Errorf("%d generic and %d custom plans, want the generic plan all 3 times", plans.Generic, plans.Custom)
	}
}

func TestStatementDroppedByTheServerIsPreparedAgain(t *testing.T) {
	db := oneConn(t)
	var got int
	if err := db.Get(&got, `SELECT $1::int`, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DEALLOCATE ALL`); err != nil {
		t.Fatal(err)
	}
	// The first use after may fail; the one after that must work.
	_ = db.Get(&got, `SELECT $1::int`, 2)
	if err := db.Get(&got, `SELECT $1::int`, 3); err != nil || got != 3 {
		t.Fatalf("after DEALLOCATE ALL: %d, %v", got, err)
	}
}

func TestCancelledStatementsConnectionIsNotReused(t *testing.T) {
	db := oneConn(t)
	var before, after int
	if err := db.Get(&before, `SELECT pg_backend_pid() + $1`, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := db.ExecContext(ctx, `SELECT pg_sleep($1)`, 5); err == nil {
		t.Fatal("pg_sleep(5) finished within 100ms")
	}
	if err := db.Get(&after, `SELECT pg_backend_pid() + $1`, 0); err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Error("the connection of the cancelled statement was used again")
	}
}
