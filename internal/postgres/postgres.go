// Package postgres opens the database, applies the migrations, runs
// transactions and says whether the database takes writes. It owns no
// table.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	schema "github.com/payreq/payreq/db"
)

// DefaultMaxOpenConns is the connection limit when Pool sets none.
const DefaultMaxOpenConns = 20

// Pool is how connections are kept; the zero value is the default.
type Pool struct {
	MaxOpenConns int // 0: DefaultMaxOpenConns
	MaxIdleConns int // 0: as many as MaxOpenConns
	// Unprepared sends every statement unnamed, in one round trip
	// (lib/pq's binary_parameters), for PgBouncer in transaction pooling
	// mode, where a statement prepared on one server connection is not on
	// the next. Otherwise each connection keeps its statements prepared.
	Unprepared bool
	// Traced runs each statement in a client span (when tracing is on).
	Traced bool
}

// Open connects to the database at dsn and checks that it answers.
func Open(ctx context.Context, dsn string, p Pool) (*sqlx.DB, error) {
	dsn = withConnectTimeout(dsn)
	if p.Unprepared {
		dsn = withParam(dsn, "binary_parameters", "yes")
	}
	connector, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	var c driver.Connector = guarded{connector}
	if p.Traced {
		c = traced{c}
	}
	if !p.Unprepared {
		c = preparing{c}
	}
	db := sqlx.NewDb(sql.OpenDB(c), "postgres")
	if p.MaxOpenConns <= 0 {
		p.MaxOpenConns = DefaultMaxOpenConns
	}
	if p.MaxIdleConns <= 0 || p.MaxIdleConns > p.MaxOpenConns {
		p.MaxIdleConns = p.MaxOpenConns
	}
	db.SetMaxOpenConns(p.MaxOpenConns)
	db.SetMaxIdleConns(p.MaxIdleConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: ping: %w", err)
	}
	return db, nil
}

// connectTimeout bounds each new connection when the DSN does not say
// otherwise, so that work with no deadline of its own (the delivery worker,
// housekeeping) cannot hang on a database host that does not answer.
const connectTimeout = "5"

// withConnectTimeout adds connect_timeout to a URL or key=value DSN that
// lacks one.
func withConnectTimeout(dsn string) string {
	if strings.Contains(dsn, "connect_timeout") {
		return dsn
	}
	return withParam(dsn, "connect_timeout", connectTimeout)
}

// withParam sets a connection parameter in a URL or key=value DSN.
func withParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(dsn) + " " + key + "=" + value
}

// Migrate applies the migrations in db/migrations that the database lacks. It is
// safe to run twice, and from two processes at once: the second waits for the
// first and then finds nothing to do.
func Migrate(ctx context.Context, db *sql.DB) error {
	migrations, err := fs.Sub(schema.Migrations, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return migrate(ctx, db, migrations)
}

func migrate(ctx context.Context, db *sql.DB, migrations fs.FS) error {
	// A lock row in a table serialises migrators: unlike a session advisory
	// lock it holds through PgBouncer in transaction pooling mode, where
	// lock and unlock may reach different server connections. Polled every
	// second for at most five minutes; a migrator that died leaves a lease
	// that ends by itself.
	locker, err := lock.NewPostgresTableLocker(lock.WithTableLockTimeout(time.Second, 300))
	if err != nil {
		return fmt.Errorf("postgres: migrate: create locker: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations, goose.WithLocker(locker))
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// InTx runs fn in a transaction, and commits it if fn returns nil. It rolls back
// if fn returns an error or panics; the panic goes on after the rollback.
func InTx(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	return inTx(ctx, db, nil, fn)
}

// InBatches runs batch in a transaction of its own again and again until a
// batch does nothing (returns 0), and returns the sum of what the committed
// batches did: work done a batch of rows at a time (re-sealing values under
// a new key), each batch under its rows' locks.
func InBatches(ctx context.Context, db *sqlx.DB, batch func(tx *sqlx.Tx) (int, error)) (int, error) {
	total := 0
	for {
		n := 0
		err := InTx(ctx, db, func(tx *sqlx.Tx) error {
			var err error
			n, err = batch(tx)
			return err
		})
		if err != nil || n == 0 {
			return total, err
		}
		total += n
	}
}

// InSnapshot is InTx for reads that must agree with each other (an
// invoice and its payments, read by their owners one after the other):
// a read-only transaction whose statements all see one snapshot.
func InSnapshot(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	return inTx(ctx, db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, fn)
}

func inTx(ctx context.Context, db *sqlx.DB, opts *sql.TxOptions, fn func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, opts)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback() // the panic says more than a failed rollback could
			panic(p)
		}
	}()

	if err := fn(tx); err != nil {
		// A cancelled context has already rolled the transaction back.
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return fmt.Errorf("%w (postgres: rollback: %w)", err, rbErr)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

// WriteState is whether the database takes writes now.
type WriteState string

const (
	Writable WriteState = "writable"
	// ReadOnly: a replica, or a primary in recovery or set read-only
	// (after a failover gone wrong).
	ReadOnly WriteState = "read-only"
	// NoStandby: a leader in strict synchronous mode (deploy/ha) with no
	// standby streaming, whose commits wait until one holds them.
	NoStandby WriteState = "no standby"
)

// Writes says whether the database takes writes now.
func Writes(ctx context.Context, db *sqlx.DB) (WriteState, error) {
	var state WriteState
	err := db.GetContext(ctx, &state, `SELECT CASE
		WHEN pg_is_in_recovery() OR current_setting('transaction_read_only')::boolean THEN 'read-only'
		WHEN current_setting('synchronous_standby_names') <> '' AND NOT EXISTS (SELECT FROM pg_stat_replication) THEN 'no standby'
		ELSE 'writable' END`)
	return state, err
}
