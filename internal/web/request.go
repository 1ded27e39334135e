package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/framing"
)

// Deadline gives each request at most limit (none when limit is 0 or
// less), its database work included.
func Deadline(limit time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if limit <= 0 {
				return next(c)
			}
			ctx, cancel := context.WithTimeout(c.Request().Context(), limit)
			defer cancel()
			c.SetRequest(c.Request().WithContext(ctx))
			return next(c)
		}
	}
}

// ParseForm reads a POST's form, at most max bytes. A form it cannot
// read is the client's: it answers the status and the heading of the
// page to show then, 413 for one too large, 408 for one slower than the
// server reads, 400 for one cut off or malformed; status 0 when the form
// was read.
func ParseForm(c echo.Context, max int64) (status int, heading string) {
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, max)
	return formStatus(r.ParseForm())
}

// ParseUpload is ParseForm for a form that may carry files
// (multipart/form-data, or a plain form): all of it, at most max bytes,
// is kept in memory, none on disk.
func ParseUpload(c echo.Context, max int64) (status int, heading string) {
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, max)
	err := r.ParseMultipartForm(max)
	if errors.Is(err, http.ErrNotMultipart) {
		err = nil // a plain form, read by ParseMultipartForm all the same
	}
	return formStatus(err)
}

func formStatus(err error) (status int, heading string) {
	var tooLarge *http.MaxBytesError
	var unreadable *framing.BodyError
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, "The form is too large"
	case errors.As(err, &unreadable) && unreadable.Slow:
		return http.StatusRequestTimeout, "The form could not be read"
	}
	return http.StatusBadRequest, "The form could not be read"
}
