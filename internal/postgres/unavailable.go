package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/lib/pq"
)

// Unavailable reports whether err says that the database could not be used
// at all — it is down, starting, shutting down, out of connections or out of
// time — rather than that it refused what was asked. Such a request may
// succeed if it is sent again later, so the API answers 503, not 500.
// A failover is such a time: the leader's connections break (or end with
// admin_shutdown), a server that became a standby refuses writes
// (read_only_sql_transaction), and a commit may end with its outcome
// unknown (ErrCommitUnknown).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrCommitUnknown) || standby(err) {
		return true
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch code := string(pqErr.Code); {
		case strings.HasPrefix(code, "08"): // connection exception
			return true
		case strings.HasPrefix(code, "53"): // insufficient resources: too many connections, disk full
			return true
		case code == "57P01", code == "57P02", code == "57P03": // admin or crash shutdown; starting up or shutting down
			return true
		case code == "57014": // query cancelled: only a context ending cancels our statements
			return true
		}
		return false
	}
	// lib/pq reports a connection lost mid-exchange (and a FATAL error) as
	// driver.ErrBadConn, and a failed dial, read or write as a *net.OpError.
	var opErr *net.OpError
	// A connection the server closed mid-read ends in io.EOF.
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &opErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Retry runs fn until it returns nil or an error that is not Unavailable,
// or until ctx ends, waiting after each unavailable try (100 ms, doubling
// up to a second), and returns fn's last error. It is for a worker that
// holds an outcome the database must record (a message sent, a terminal's
// answer): across a failover it records it once the new leader answers,
// rather than leave it to be done again once its lease ends.
func Retry(ctx context.Context, fn func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := fn()
		if !Unavailable(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}
