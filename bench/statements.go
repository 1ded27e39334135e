package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// stmts is what pg_stat_statements counted in one run's database: every
// statement of the run, the server's background workers included.
type stmts struct {
	calls      int64
	exec, plan time.Duration // PostgreSQL's time executing and planning them
	rows       []stmtRow     // the statements, most time first
}

type stmtRow struct {
	Calls int64   `db:"calls"`
	Exec  float64 `db:"exec_ms"`
	Plan  float64 `db:"plan_ms"`
	Query string  `db:"query"`
}

// resetStatements analyses the tables every run empties, then forgets
// what pg_stat_statements counted so far.
func resetStatements(ctx context.Context, dsn string) error {
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	// The tables each run starts empty (emptied) have the warm-up's rows
	// by now: analysed, as autovacuum would in a running system, their
	// size reaches the planner, and every plan made while they were empty
	// (of a prepared statement, or of a foreign key's check, each kept
	// until its tables' statistics change) is made again. Without it a
	// delivery's statements scanned tables a run had filled since.
	if _, err := db.ExecContext(ctx, `ANALYZE `+strings.Join(emptied, ", ")); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `SELECT pg_stat_statements_reset()`)
	return err
}

// readStatements is what pg_stat_statements counted in dsn's database since
// the last reset, its own statements aside.
func readStatements(ctx context.Context, dsn string) (stmts, error) {
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return stmts{}, err
	}
	defer db.Close()
	var s stmts
	err = db.SelectContext(ctx, &s.rows, `SELECT calls, total_exec_time AS exec_ms, total_plan_time AS plan_ms, query
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND query NOT LIKE '%pg_stat_statements%'
		ORDER BY total_exec_time + total_plan_time DESC`)
	for _, r := range s.rows {
		s.calls += r.Calls
		s.exec += time.Duration(r.Exec * float64(time.Millisecond))
		s.plan += time.Duration(r.Plan * float64(time.Millisecond))
	}
	return s, err
}

// statementsText lists each run's statements for bench/statements.txt.
func (r *report) statementsText() string {
	var b strings.Builder
	b.WriteString("Statements of each run, from pg_stat_statements (the server's background workers included):\n" +
		"calls per request, mean execution and planning time per call, and the statement's start.\n")
	for _, t := range scenarioTitles {
		for _, target := range runOrder {
			c, ok := r.get(t.key, target)
			if !ok || c.res.stmts.calls == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n== %s, %s: %.2f statements per request\n", t.title, runNames[target], float64(c.res.stmts.calls)/float64(c.res.requests))
			for _, s := range c.res.stmts.rows {
				q := strings.Join(strings.Fields(s.Query), " ")
				if len(q) > 110 {
					q = q[:110] + "…"
				}
				fmt.Fprintf(&b, "%8.3f/req  exec %7.1f µs  plan %6.1f µs  %s\n", float64(s.Calls)/float64(c.res.requests),
					1000*s.Exec/float64(max(s.Calls, 1)), 1000*s.Plan/float64(max(s.Calls, 1)), q)
			}
		}
	}
	return b.String()
}
