package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// explain writes the plans of list page 1 and page 1,000 (the statements of
// bench/pgbench/list_*.sql, run as prepared statements the way the server's
// driver runs them, after enough executions for PostgreSQL to settle on a
// plan) to bench/explain.txt.
func (h *harness) explain(ctx context.Context) error {
	db, err := sqlx.Open("postgres", h.big.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Connx(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var out strings.Builder
	fmt.Fprintf(&out, "EXPLAIN (ANALYZE, BUFFERS) of the list pages on %s (%s invoices of the organization\n"+
		"under test), written by make bench. The statements are bench/pgbench/list_first.sql and list_deep.sql, which\n"+
		"are what internal/invoice Store.List sends; each runs prepared, 10 times before it is explained.\n\n", dbName(h.big.invoices), thousands(h.big.invoices))
	for _, page := range []struct{ key, label string }{{"list_first", "page 1"}, {"list_deep", "page 1,000"}} {
		if page.key == "list_deep" && h.big.invoices < 1000*25 {
			continue // no page 1,000 in a small database (a short trial run's)
		}
		vars, err := h.pgbenchVars(ctx, page.key)
		if err != nil {
			return err
		}
		script, err := os.ReadFile(filepath.Join(h.o.benchDir, "pgbench", page.key+".sql"))
		if err != nil {
			return err
		}
		// The page's own statement, the first: the reads of its MIDs and
		// customers that follow are other owners' (and PREPARE takes one).
		page1, _, _ := strings.Cut(string(script), ";\n")
		sql, args := parameterize(page1, vars)
		if _, err := conn.ExecContext(ctx, "DEALLOCATE ALL"); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, "PREPARE page AS "+sql); err != nil {
			return fmt.Errorf("explain %s: %w", page.key, err)
		}
		literals := make([]string, len(args))
		for i, a := range args {
			literals[i] = pq.QuoteLiteral(a)
		}
		execute := "EXECUTE page(" + strings.Join(literals, ", ") + ")"
		for range 10 {
			if _, err := conn.ExecContext(ctx, execute); err != nil {
				return fmt.Errorf("explain %s: %w", page.key, err)
			}
		}
		var plan []string
		if err := conn.SelectContext(ctx, &plan, "EXPLAIN (ANALYZE, BUFFERS) "+execute); err != nil {
			return fmt.Errorf("explain %s: %w", page.key, err)
		}
		fmt.Fprintf(&out, "== %s (%s)\n\n%s\n\n%s\n\n", page.label, page.key, strings.TrimSpace(sql), strings.Join(plan, "\n"))
	}
	return os.WriteFile(h.o.explainOut, []byte(out.String()), 0o644)
}

var pgbenchVar = regexp.MustCompile(`(^|[^:]):([A-Za-z_][A-Za-z0-9_]*)`)

// parameterize turns one statement of a pgbench script into SQL with $n
// placeholders and their values, as pgbench -M prepared does.
func parameterize(script string, vars map[string]string) (string, []string) {
	var lines []string
	for _, l := range strings.Split(script, "\n") {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "--") || strings.HasPrefix(t, `\`) {
			continue
		}
		lines = append(lines, l)
	}
	sql := strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";")
	index := map[string]int{}
	var args []string
	sql = pgbenchVar.ReplaceAllStringFunc(sql, func(m string) string {
		sub := pgbenchVar.FindStringSubmatch(m)
		name := sub[2]
		if _, ok := vars[name]; !ok {
			return m
		}
		if _, ok := index[name]; !ok {
			args = append(args, vars[name])
			index[name] = len(args)
		}
		return fmt.Sprintf("%s$%d", sub[1], index[name])
	})
	return sql, args
}
