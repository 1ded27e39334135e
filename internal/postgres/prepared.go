package postgres

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"

	"github.com/lib/pq"
)

// preparedStatementsPerConn bounds each connection's cache of prepared
// statements; payreq runs a few dozen distinct statements.
const preparedStatementsPerConn = 256

// preparing makes each connection keep the statements it runs prepared. By
// itself lib/pq sends a statement with arguments as an unnamed one: a round
// trip to parse it and another to bind and run it, with the server parsing
// and planning it every time. Prepared once per connection, a statement
// costs one round trip and reuses its plan. Statements without arguments
// (BEGIN, COMMIT, migrations) keep lib/pq's simple protocol.
type preparing struct{ driver.Connector }

func (c preparing) Connect(ctx context.Context) (driver.Conn, error) {
	inner, err := connect(ctx, c.Connector)
	if err != nil {
		return nil, err
	}
	// Each prepared statement runs its generic plan from the start. Left to
	// choose, PostgreSQL compares the generic plan's estimate with the
	// custom plans' and, where a parameter's estimate is skewed, plans every
	// execution anew with the same result: a list page of the organization
	// with 1,000,000 of 1,050,000 invoices estimated 55.5 generic against
	// 11.9 custom for the same index scan, and cost about 1.4 ms of planning
	// a page (make bench). payreq's statements are index lookups and
	// keyset pages built for the filters given, whose plans do not depend
	// on the values.
	if _, err := inner.ExecContext(ctx, `SET plan_cache_mode = force_generic_plan`, nil); err != nil {
		inner.Close()
		return nil, err
	}
	return &preparedConn{pqConn: inner, stmts: map[string]*list.Element{}, lru: list.New()}, nil
}

// connect opens a connection of c: lib/pq's, or one that wraps it as
// preparing and traced do.
func connect(ctx context.Context, c driver.Connector) (pqConn, error) {
	conn, err := c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(pqConn)
	if !ok {
		conn.Close()
		return nil, errors.New("postgres: the driver's connection lacks the interfaces payreq uses")
	}
	return inner, nil
}

// pqConn is what lib/pq's connection implements and database/sql uses.
type pqConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// preparedConn is one connection and its prepared statements, most
// recently used first. database/sql uses a connection from one goroutine
// at a time, so it needs no lock.
type preparedConn struct {
	pqConn
	stmts map[string]*list.Element
	lru   *list.List
	// cancelled: a statement failed as its context ended. lib/pq drops a
	// connection whose unnamed statement was cancelled; this one is dropped
	// too, rather than trusted again.
	cancelled bool
}

// IsValid and ResetSession keep database/sql from reusing a connection
// whose statement was cancelled.
func (c *preparedConn) IsValid() bool { return !c.cancelled && c.pqConn.IsValid() }

func (c *preparedConn) ResetSession(ctx context.Context) error {
	if c.cancelled {
		return driver.ErrBadConn
	}
	return c.pqConn.ResetSession(ctx)
}

type preparedStmt struct {
	query string
	stmt  ctxStmt
}

// ctxStmt is what lib/pq's statement implements and payreq uses.
type ctxStmt interface {
	driver.Stmt
	driver.StmtQueryContext
	driver.StmtExecContext
}

// prepare prepares query on conn, as a ctxStmt.
func prepare(ctx context.Context, conn driver.ConnPrepareContext, query string) (ctxStmt, error) {
	s, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := s.(ctxStmt)
	if !ok {
		s.Close()
		return nil, errors.New("postgres: the driver's statement lacks the interfaces payreq uses")
	}
	return st, nil
}

func (c *preparedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 {
		return c.pqConn.QueryContext(ctx, query, args)
	}
	st, err := c.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.stmt.QueryContext(ctx, args)
	c.failed(ctx, st, err)
	return rows, err
}

func (c *preparedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 0 {
		return c.pqConn.ExecContext(ctx, query, args)
	}
	st, err := c.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	res, err := st.stmt.ExecContext(ctx, args)
	c.failed(ctx, st, err)
	return res, err
}

// prepared returns the connection's statement for query, preparing it on
// first use and closing the least recently used one past the bound.
func (c *preparedConn) prepared(ctx context.Context, query string) (*preparedStmt, error) {
	if e, ok := c.stmts[query]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*preparedStmt), nil
	}
	stmt, err := prepare(ctx, c.pqConn, query)
	if err != nil {
		return nil, err
	}
	st := &preparedStmt{query: query, stmt: stmt}
	c.stmts[query] = c.lru.PushFront(st)
	if c.lru.Len() > preparedStatementsPerConn {
		c.forget(c.lru.Back().Value.(*preparedStmt))
	}
	return st, nil
}

// failed notes what an error says of the connection: cancelled, or a
// statement the server no longer knows or whose plan no longer fits its
// table (after a schema change), which the next use prepares again.
func (c *preparedConn) failed(ctx context.Context, st *preparedStmt, err error) {
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		c.cancelled = true
		return
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && (pqErr.Code == "26000" || pqErr.Code == "0A000") {
		c.forget(st)
	}
}

func (c *preparedConn) forget(st *preparedStmt) {
	if e, ok := c.stmts[st.query]; ok {
		c.lru.Remove(e)
		delete(c.stmts, st.query)
		_ = st.stmt.Close() // a failure here shows on the connection's next use
	}
}
