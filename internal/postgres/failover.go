package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"strings"

	"github.com/lib/pq"
)

// ErrCommitUnknown: the server committed locally, but its wait for the
// synchronous standby was cancelled (the request's deadline, a client
// gone), so the commit may be lost in a failover. Neither a success nor a
// failure: answered 503, and a retry with its Idempotency-Key finds what
// happened on the server that then leads.
var ErrCommitUnknown = errors.New("postgres: the commit's outcome is unknown: its wait for a synchronous standby was cancelled")

// guarded is the connector beneath every other: its connections note what
// a failover does to them. A commit whose wait for the synchronous standby
// was cancelled is ErrCommitUnknown, never a success; a connection whose
// server became a standby ("read-only", SQLSTATE 25006) leaves the pool,
// so the next one reaches the new leader through HAProxy.
type guarded struct{ *pq.Connector }

func (c guarded) Connect(ctx context.Context) (driver.Conn, error) {
	inner, err := connect(ctx, c.Connector)
	if err != nil {
		return nil, err
	}
	g := &guardedConn{pqConn: inner}
	pq.SetNoticeHandler(inner, g.notice) // inner is lib/pq's own connection
	return g, nil
}

// guardedConn is one lib/pq connection. database/sql uses it from one
// goroutine at a time, and lib/pq calls the notice handler from the
// statement that reads the notice, so its fields need no lock.
type guardedConn struct {
	pqConn
	// unreplicated: the last statement's commit was not confirmed by a
	// synchronous standby.
	unreplicated bool
	// standby: the server refused a write as a standby does.
	standby bool
}

// syncWaitCancelled begins the warning PostgreSQL sends when a commit's
// wait for synchronous replication ends early ("… due to user request",
// "… and terminated connection due to administrator command").
const syncWaitCancelled = "canceling wait for synchronous replication"

func (c *guardedConn) notice(e *pq.Error) {
	if strings.HasPrefix(e.Message, syncWaitCancelled) {
		c.unreplicated = true
	}
}

// begin readies the connection for a statement.
func (c *guardedConn) begin() { c.unreplicated = false }

// observe turns a statement's outcome into what it means after a failover.
func (c *guardedConn) observe(err error) error {
	if standby(err) {
		c.standby = true
	}
	if err == nil && c.unreplicated {
		return ErrCommitUnknown
	}
	return err
}

// standby reports whether err is a standby's refusal of a write: read-only
// SQL (read_only_sql_transaction) or a read-write transaction begun during
// recovery, as a connection made while HAProxy still sent it to a former
// leader finds.
func standby(err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	return pqErr.Code == "25006" || pqErr.Code == "0A000" && strings.Contains(pqErr.Message, "during recovery")
}

func (c *guardedConn) IsValid() bool { return !c.standby && c.pqConn.IsValid() }

func (c *guardedConn) ResetSession(ctx context.Context) error {
	if c.standby {
		return driver.ErrBadConn
	}
	return c.pqConn.ResetSession(ctx)
}

func (c *guardedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.begin()
	return c.rows(c.pqConn.QueryContext(ctx, query, args))
}

func (c *guardedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.begin()
	res, err := c.pqConn.ExecContext(ctx, query, args)
	if err = c.observe(err); err != nil {
		return nil, err
	}
	return res, nil
}

// rows checks a query's rows when they are read to their end: an
// autocommitted INSERT … RETURNING hears of its commit there.
func (c *guardedConn) rows(rows driver.Rows, err error) (driver.Rows, error) {
	if err = c.observe(err); err != nil {
		if rows != nil {
			rows.Close()
		}
		return nil, err
	}
	return &guardedRows{Rows: rows, conn: c}, nil
}

func (c *guardedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.begin()
	st, err := prepare(ctx, c.pqConn, query)
	if err = c.observe(err); err != nil {
		return nil, err
	}
	return &guardedStmt{ctxStmt: st, conn: c}, nil
}

func (c *guardedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.begin()
	tx, err := c.pqConn.BeginTx(ctx, opts)
	if err = c.observe(err); err != nil {
		return nil, err
	}
	return guardedTx{Tx: tx, conn: c}, nil
}

type guardedTx struct {
	driver.Tx
	conn *guardedConn
}

func (t guardedTx) Commit() error {
	t.conn.begin()
	return t.conn.observe(t.Tx.Commit())
}

type guardedStmt struct {
	ctxStmt
	conn *guardedConn
}

func (s *guardedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.conn.begin()
	return s.conn.rows(s.ctxStmt.QueryContext(ctx, args))
}

func (s *guardedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.conn.begin()
	res, err := s.ctxStmt.ExecContext(ctx, args)
	if err = s.conn.observe(err); err != nil {
		return nil, err
	}
	return res, nil
}

type guardedRows struct {
	driver.Rows
	conn *guardedConn
}

func (r *guardedRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err == io.EOF && r.conn.unreplicated {
		return ErrCommitUnknown
	}
	return r.conn.observe(err)
}
