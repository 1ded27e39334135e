package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/devdb"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/terminal"
)

// settings of the bench cluster: a database server on this machine would
// keep its working set in memory, so shared_buffers holds the 1,000,000
// invoices (devdb's 128MB is for tests); pg_stat_statements counts each
// run's statements, their planning included. Applied with a restart when
// they differ.
var clusterSettings = []struct{ name, value string }{
	{"shared_buffers", "1GB"},
	{"shared_preload_libraries", "pg_stat_statements"},
	// Known once the library is loaded: set after the restart that loads it.
	{"pg_stat_statements.track_planning", "on"},
}

// startCluster starts (or reuses) the private bench cluster under
// dataDir/postgres, tuned, and returns the URL of its "postgres" database.
func startCluster(ctx context.Context, dataDir string) (string, error) {
	dsn, err := devdb.Ensure(ctx, dataDir)
	if err != nil {
		return "", err
	}
	admin := withDatabase(dsn, "postgres")
	for range 2 {
		restart, err := applySettings(ctx, admin)
		if err != nil || !restart {
			return admin, err
		}
		logf("restarting the bench cluster for %v", clusterSettings)
		if err := devdb.Stop(dataDir); err != nil {
			return "", err
		}
		if _, err := devdb.Ensure(ctx, dataDir); err != nil {
			return "", err
		}
	}
	return admin, nil
}

// applySettings sets what differs of clusterSettings with ALTER SYSTEM and
// says whether the cluster must restart; it stops at a setting unknown
// before that restart.
func applySettings(ctx context.Context, admin string) (bool, error) {
	db, err := sql.Open("postgres", admin)
	if err != nil {
		return false, err
	}
	defer db.Close()
	restart := false
	for _, s := range clusterSettings {
		var have string
		if err := db.QueryRowContext(ctx, "SHOW "+s.name).Scan(&have); err != nil && restart {
			break
		}
		if have != s.value {
			if _, err := db.ExecContext(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", s.name, s.value)); err != nil {
				return false, fmt.Errorf("bench cluster: set %s: %w", s.name, err)
			}
			restart = true
		}
	}
	return restart, nil
}

func withDatabase(dsn, name string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err) // devdb makes URLs
	}
	u.Path = "/" + name
	return u.String()
}

// dataset is one loaded database and what the load needs to know of it.
type dataset struct {
	dsn       string
	org       uuid.UUID   // the organization under test
	mids      []uuid.UUID // its MIDs
	sample    []uuid.UUID // invoices read and sent (part paid, with payments and saved cards)
	editable  []uuid.UUID // open invoices with nothing paid, which PATCH changes
	terminals []terminal.Terminal
	invoices  int
}

// ensureData makes database name hold what bench/load.sql makes with these
// sizes, loading it again (from an empty database) when the stamp the script
// leaves differs; the load takes a few minutes for 1,000,000 invoices.
func ensureData(ctx context.Context, admin, name, loadScript string, invoices, others, otherInvoices int) (*dataset, error) {
	script, err := os.ReadFile(loadScript)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(script)
	hash := hex.EncodeToString(sum[:8])
	dsn := withDatabase(admin, name)
	if !stamped(ctx, dsn, invoices, others, otherInvoices, hash) {
		logf("loading %s: %d invoices for the organization under test, %d × %d for %d others (once; kept for later runs)",
			name, invoices, otherInvoices, others, others)
		t0 := time.Now()
		adm, err := sql.Open("postgres", admin)
		if err != nil {
			return nil, err
		}
		_, err = adm.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		if err == nil {
			_, err = adm.ExecContext(ctx, "CREATE DATABASE "+name)
		}
		adm.Close()
		if err != nil {
			return nil, fmt.Errorf("create database %s: %w", name, err)
		}
		db, err := postgres.Open(ctx, dsn, postgres.Pool{})
		if err != nil {
			return nil, err
		}
		err = postgres.Migrate(ctx, db.DB)
		db.Close()
		if err != nil {
			return nil, err
		}
		psql, err := pgBin("psql")
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, psql, "-X", "-q", "-v", "invoices="+strconv.Itoa(invoices), "-v", "others="+strconv.Itoa(others),
			"-v", "other_invoices="+strconv.Itoa(otherInvoices), "-v", "script_hash="+hash, "-f", loadScript, dsn)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("load %s: %w: %s", name, err, lastLines(out, 5))
		}
		logf("loaded %s in %s", name, time.Since(t0).Round(time.Second))
	}
	// A database kept from an earlier run gets the migrations added since
	// (as payreq serve would apply them), before the reset names their tables.
	pdb, err := postgres.Open(ctx, dsn, postgres.Pool{})
	if err != nil {
		return nil, err
	}
	err = postgres.Migrate(ctx, pdb.DB)
	pdb.Close()
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// What earlier runs made goes, so every run measures the data as loaded.
	_, err = db.ExecContext(ctx, `
		CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
		TRUNCATE `+strings.Join(emptied, ", ")+`;
		DELETE FROM terminal_payments;
		DELETE FROM card_payments c USING invoices i WHERE i.id = c.invoice_id AND i.created_by_name <> 'Bench key';
		DELETE FROM terminals;
		DELETE FROM recurring_occurrences;
		DELETE FROM recurring_invoices;
		DELETE FROM invoice_lines il USING invoices i WHERE i.id = il.invoice_id AND i.created_by_name <> 'Bench key';
		DELETE FROM invoices WHERE created_by_name <> 'Bench key';`)
	if err == nil {
		_, err = db.ExecContext(ctx, `VACUUM (ANALYZE) invoices, invoice_lines, outbox, idempotency_keys`)
	}
	if err != nil {
		return nil, fmt.Errorf("reset %s: %w", name, err)
	}
	ds := &dataset{dsn: dsn, invoices: invoices}
	if err := db.GetContext(ctx, &ds.org, `SELECT bench_uuid('bench-org-0')`); err != nil {
		return nil, err
	}
	if err := db.SelectContext(ctx, &ds.mids, `SELECT id FROM merchant_accounts WHERE organization_id = $1 ORDER BY mid`, ds.org); err != nil {
		return nil, err
	}
	if err := db.SelectContext(ctx, &ds.sample, `SELECT invoice_id FROM bench_sample ORDER BY n`); err != nil {
		return nil, err
	}
	if err := db.SelectContext(ctx, &ds.editable, `SELECT id FROM invoices
		WHERE organization_id = $1 AND status = 'open' AND amount_paid = 0
		ORDER BY created_at DESC, id DESC LIMIT 25000`, ds.org); err != nil {
		return nil, err
	}
	if len(ds.mids) == 0 || len(ds.sample) == 0 || len(ds.editable) == 0 {
		return nil, errors.New("bench data: no MIDs, no sample invoices or no open invoices")
	}
	return ds, nil
}

// emptied are the tables every run starts without a row (what earlier
// runs wrote).
var emptied = []string{"outbox", "idempotency_keys", "token_requests", "webhook_attempts", "webhook_deliveries", "events",
	"events_to_fan_out", "webhook_endpoints"}

func stamped(ctx context.Context, dsn string, invoices, others, otherInvoices int, hash string) bool {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return false
	}
	defer db.Close()
	var i, o, oi int
	var h string
	err = db.QueryRowContext(ctx, `SELECT invoices, others, other_invoices, script FROM bench_stamp`).Scan(&i, &o, &oi, &h)
	return err == nil && i == invoices && o == others && oi == otherInvoices && h == hash
}

// pgBin finds a PostgreSQL client program beside the server binaries.
func pgBin(name string) (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found: it comes with the PostgreSQL server binaries (apt-get install postgresql)", name)
}
