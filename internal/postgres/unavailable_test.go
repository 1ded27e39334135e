package postgres_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

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
	} {
		if got := postgres.Unavailable(tt.err); got != tt.want {
			t.Errorf("Unavailable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
