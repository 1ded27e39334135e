package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
)

// RetryAfter is the Retry-After, in seconds, of every answer that failed
// for an outage, on every front (API, portal, pay page, sign-up page):
// about what a restarting or failing-over database takes to answer again
// (5 to 8 s measured under Patroni), so that a client retrying after it
// mostly finds the service back rather than waiting a minute for nothing.
const RetryAfter = 5

// Outage is what a request failed for want of: a passing trouble, not a
// bug, answered 503 with Retry-After unless openapi.yaml documents another
// answer for the operation (a 502 when the processor fails a refund).
type Outage int

const (
	// Database: down, restarting, or too slow (postgres.Unavailable).
	Database Outage = iota + 1
	// Processor: the card processor could not be reached
	// (processor.ErrUnavailable).
	Processor
)

// OutageOf is the outage err is, or 0 when it is none: the one classifier
// of every front.
func OutageOf(err error) Outage {
	switch {
	case postgres.Unavailable(err):
		return Database
	case errors.Is(err, processor.ErrUnavailable):
		return Processor
	}
	return 0
}

// RetryLater sets Retry-After on c's answer: RetryAfter seconds.
func RetryLater(c echo.Context) {
	c.Response().Header().Set("Retry-After", strconv.Itoa(RetryAfter))
}

// FailureStatus is the status of a page that failed with err: 503 with
// Retry-After for an outage, else 500 (a bug).
func FailureStatus(c echo.Context, err error) int {
	if OutageOf(err) != 0 {
		RetryLater(c)
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
