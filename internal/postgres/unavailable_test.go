package postgres_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/postgres"
)

func TestUnavailable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{sql.ErrNoRows, false},
		{errors.New("invoice: something else"), false},
		{&pq.Error{Code: "23505"}, false}, // unique violation: the request's fault
		{&pq.Error{Code: "40001"}, false},
		{&pq.Error{Code: "57P01"}, true}, // terminating connection due to administrator command
		{&pq.Error{Code: "57P03"}, true}, // the database system is shutting down / starting up
		{&pq.Error{Code: "08006"}, true},
		{&pq.Error{Code: "53300"}, true}, // too many connections
		{&pq.Error{Code: "57014"}, true}, // cancelled by a context
		{fmt.Errorf("invoice: unable to read: %w", driver.ErrBadConn), true},
		{sql.ErrConnDone, true},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("postgres: begin: %w", syscall.ECONNRESET), true},
		// A failover: the leader's connections end or break, a server that
		// became a standby refuses writes, a commit's outcome is unknown.
		{&pq.Error{Code: "25006"}, true}, // read_only_sql_transaction
		{fmt.Errorf("postgres: begin: %w", &pq.Error{Code: "0A000", Message: "cannot set transaction read-write mode during recovery"}), true},
		{&pq.Error{Code: "0A000", Message: "cached plan must not change result type"}, false},
		{fmt.Errorf("postgres: commit: %w", io.EOF), true},
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("postgres: commit: %w", postgres.ErrCommitUnknown), true},
	} {
		if got := postgres.Unavailable(tt.err); got != tt.want {
			t.Errorf("Unavailable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// Retry tries again while the database is unavailable, stops at an error
// of another kind, and gives up when its context ends.
func TestRetry(t *testing.T) {
	tries := 0
	err := postgres.Retry(context.Background(), func() error {
		if tries++; tries < 3 {
			return &pq.Error{Code: "57P01"}
		}
		return nil
	})
	if err != nil || tries != 3 {
		t.Errorf("unavailable twice, then done: %v after %d tries", err, tries)
	}
	tries = 0
	refused := &pq.Error{Code: "23505"}
	if err := postgres.Retry(context.Background(), func() error { tries++; return refused }); err != refused || tries != 1 {
		t.Errorf("refused: %v after %d tries, want the refusal after 1", err, tries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	tries = 0
	if err := postgres.Retry(ctx, func() error { tries++; return syscall.ECONNREFUSED }); !errors.Is(err, syscall.ECONNREFUSED) || tries < 2 || tries > 4 {
		t.Errorf("down until the context ends: %v after %d tries", err, tries)
	}
}
