package portal

import (
	"context"
	"encoding/csv"
	"mime"
	"net/http"
	"regexp"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/labstack/echo/v4"
)

// csvPageSize is how many rows an export fetches at a time: what it holds
// in memory, however long the list.
const csvPageSize = 500

// csvColumn is a column of an export: its header and its cell of a row.
type csvColumn[T any] struct {
	Header string
	Cell   func(T) string
}

// csvExport is a list exported as CSV (?format=csv on a list page).
type csvExport[T any] struct {
	// Name names the file: "invoices" is invoices-2026-11-30.csv, dated
	// today in Zone (UTC when nil).
	Name    string
	Zone    *time.Location
	Columns []csvColumn[T]
	// Page is the domain's list function with the page's filters applied.
	Page listPage[T]
}

// unboundedKey is where deadline keeps the request's context before its
// time limit: an export bounds each page by that limit, not the whole.
const unboundedKey = "portal.unbounded"

// streamCSV answers an export: a header row, then every row, fetched a
// keyset page at a time through the domain's list function and written
// and flushed as it comes, so that an export of any length holds one page
// in memory. Each page (its query and its writing to the client) has the
// request's time limit; the export as a whole runs as long as the client
// reads it. Every cell is made safe to open in a spreadsheet (csvCell).
// A failure before the first byte is an error page; one after it cuts the
// connection, so that a client never takes a cut-off file for a whole one.
func streamCSV[T any](h *handler, c echo.Context, x csvExport[T]) error {
	base, ok := c.Get(unboundedKey).(context.Context)
	if !ok {
		base = c.Request().Context()
	}
	limit := h.RequestTimeout
	if limit <= 0 {
		limit = time.Minute
	}
	res := c.Response()
	rc := http.NewResponseController(res)
	page := func(cursor string) ([]T, string, error) {
		ctx, cancel := context.WithTimeout(base, limit)
		defer cancel()
		// The server's write timeout would cut a long export: each page
		// gets its own time to reach the client (not every writer has one).
		_ = rc.SetWriteDeadline(time.Now().Add(2 * limit))
		return x.Page(ctx, csvPageSize, cursor)
	}
	rows, next, err := page("")
	if err != nil {
		return h.failure(c, err)
	}
	zone := x.Zone
	if zone == nil {
		zone = time.UTC
	}
	name := x.Name + "-" + h.Now().In(zone).Format(time.DateOnly) + ".csv"
	res.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	res.Header().Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	res.WriteHeader(http.StatusOK)
	w := csv.NewWriter(res)
	record := make([]string, len(x.Columns))
	for i, col := range x.Columns {
		record[i] = csvCell(col.Header)
	}
	if err := w.Write(record); err != nil {
		return cut(h, c, err)
	}
	for {
		for _, row := range rows {
			for i, col := range x.Columns {
				record[i] = csvCell(col.Cell(row))
			}
			if err := w.Write(record); err != nil {
				return cut(h, c, err)
			}
		}
		w.Flush()
		if err := w.Error(); err != nil {
			return cut(h, c, err)
		}
		res.Flush()
		if next == "" {
			return nil
		}
		if rows, next, err = page(next); err != nil {
			return cut(h, c, err)
		}
	}
}

// cut ends an answer already under way that cannot be finished: the
// failure is logged (the status sent was 200, so the request's own line
// does not say it), and the connection is closed without the end of the
// body.
func cut(h *handler, c echo.Context, err error) error {
	if base, ok := c.Get(unboundedKey).(context.Context); !ok || base.Err() == nil { // not the client leaving
		h.Log.ErrorContext(c.Request().Context(), "portal: export cut off", "path", c.Path(), "error", err.Error())
	}
	panic(http.ErrAbortHandler)
}

// plainNumber is a decimal number a spreadsheet reads as a number, never
// as a formula: "-3.20" stays as it is.
var plainNumber = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// csvCell is s as a cell that no spreadsheet runs as a formula (OWASP,
// CSV injection): one starting with =, +, -, @, a tab or a carriage return
// is prefixed with a single quote, unless it is a plain decimal number (a
// negative amount). encoding/csv quotes what needs quoting.
func csvCell(s string) string {
	if s == "" || plainNumber.MatchString(s) {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// csvMinus is an amount taken away (a refund) in a cell, negative as the
// pages show it (minus).
func csvMinus(d apd.Decimal) string {
	if d.Sign() > 0 {
		var n apd.Decimal
		n.Neg(&d)
		return n.Text('f')
	}
	return d.Text('f')
}

// csvTime is an instant in a cell: ISO 8601 in zone (UTC when nil), as
// spreadsheets read it; "" for none.
func csvTime(t *time.Time, zone *time.Location) string {
	if t == nil {
		return ""
	}
	if zone == nil {
		zone = time.UTC
	}
	return t.In(zone).Format(time.RFC3339)
}

// csvDate is a calendar date in a cell (YYYY-MM-DD); "" for none.
func csvDate(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.Format(time.DateOnly)
}
