package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/lib/pq"
)

// Unavailable reports whether err says that the database could not be used
// at all — it is down, starting, shutting down, out of connections or out of
// time — rather than that it refused what was asked. Such a request may
// succeed if it is sent again later, so the API answers 503, not 500.
func Unavailable(err error) bool {
	if err == nil {
		return false
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
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &opErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
