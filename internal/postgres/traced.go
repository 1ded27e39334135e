package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/payreq/payreq/internal/tracing"
)

// traced runs each statement in a client span named by its first word
// (SELECT, INSERT, …) with the statement's text, never its arguments.
// Statements prepared on a connection are spanned when they run.
type traced struct{ driver.Connector }

func (c traced) Connect(ctx context.Context) (driver.Conn, error) {
	inner, err := connect(ctx, c.Connector)
	if err != nil {
		return nil, err
	}
	return &tracedConn{pqConn: inner}, nil
}

type tracedConn struct{ pqConn }

func span(ctx context.Context, query string) (context.Context, trace.Span) {
	name, _, _ := strings.Cut(strings.TrimSpace(query), " ")
	return tracing.Tracer().Start(ctx, strings.ToUpper(name), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBSystemPostgreSQL, semconv.DBQueryText(query)))
}

func end(s trace.Span, err error) {
	if err != nil && !errors.Is(err, driver.ErrSkip) {
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

func (c *tracedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	ctx, s := span(ctx, query)
	rows, err := c.pqConn.QueryContext(ctx, query, args)
	end(s, err)
	return rows, err
}

func (c *tracedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ctx, s := span(ctx, query)
	res, err := c.pqConn.ExecContext(ctx, query, args)
	end(s, err)
	return res, err
}

func (c *tracedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	inner, err := prepare(ctx, c.pqConn, query)
	if err != nil {
		return nil, err
	}
	return &tracedStmt{inner: inner, query: query}, nil
}

type tracedStmt struct {
	inner ctxStmt
	query string
}

func (s *tracedStmt) Close() error  { return s.inner.Close() }
func (s *tracedStmt) NumInput() int { return s.inner.NumInput() }

// Exec and Query are never used: database/sql calls the context forms.
func (s *tracedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("postgres: Exec without a context")
}

func (s *tracedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("postgres: Query without a context")
}

func (s *tracedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	ctx, sp := span(ctx, s.query)
	rows, err := s.inner.QueryContext(ctx, args)
	end(sp, err)
	return rows, err
}

func (s *tracedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	ctx, sp := span(ctx, s.query)
	res, err := s.inner.ExecContext(ctx, args)
	end(sp, err)
	return res, err
}
