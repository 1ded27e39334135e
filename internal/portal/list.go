package portal

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/web"
)

// The list page pattern, which every list of the portal follows (invoices,
// card payments, deposits, events, …):
//
//   - a GET form of filters above the table, which shows their values again;
//   - a listQuery reads them, each with the method of its kind, and notes
//     what is wrong beside its field: the page then answers 400 with the
//     form, the messages and no rows (Failed);
//   - the rows come a page at a time from the domain's list function, as
//     the API pages them (limit 1–100, default 25, and an opaque cursor);
//   - a table with a caption and scope'd headers (the page's template);
//   - a "Next page" link carrying the cursor and the filters (the
//     "list-next" template), and the same filters exported as CSV
//     (?format=csv; the "list-csv" template and streamCSV).
//
// A handler, in short:
//
//	q, err := h.listQuery(c)
//	f := invoice.Filter{Status: q.Choice("status", statuses)}
//	f.CreatedFrom, f.CreatedTo = q.Dates("createdFrom", "createdTo")
//	if q.Failed() {
//		return h.render(c, http.StatusBadRequest, "invoices", q.Page("Invoices", data))
//	}
//	if q.CSV {
//		return streamCSV(h, c, csvExport[T]{…, Page: func(ctx, limit, cursor) { return store.List(ctx, org, f, limit, cursor) }})
//	}
//	if err := fillList(ctx, q, &data.listData, "/portal/invoices", list, rowOf); err != nil {
//		return h.failure(c, err)
//	}
//	return h.renderList(c, q, "invoices", "Invoices", data)

// Page sizes of lists, as the API has them.
const (
	defaultListLimit = 25
	maxListLimit     = 100
)

// listQuery is a list page's query string, read and checked.
type listQuery struct {
	// Values are the query as sent, which the filter form shows again.
	Values url.Values
	// Errors are the messages of what was refused, beside their fields.
	Errors web.Errors
	// Zone is the time zone of the date filters (zoneOf).
	Zone   *time.Location
	Limit  int
	Cursor string
	// CSV: the export is asked for (format=csv).
	CSV bool
	// filters are the names of the filters read, in order, to carry on.
	filters []string
}

// listQuery reads the query of a list page of the member's organization.
// A query that cannot be decoded (%zz) is refused as a whole: no filter is
// ever silently dropped.
func (h *handler) listQuery(c echo.Context) (*listQuery, error) {
	zone, err := h.zoneOf(c)
	if err != nil {
		return nil, err
	}
	return readListQuery(c.Request().URL.RawQuery, zone), nil
}

// readListQuery reads a list page's raw query, its dates in zone.
func readListQuery(raw string, zone *time.Location) *listQuery {
	values, err := url.ParseQuery(raw)
	q := &listQuery{Values: values, Zone: zone, Limit: defaultListLimit}
	if err != nil {
		q.Errors.Add("", "The address of this page could not be read, so its filters were not applied. Choose them again in the form.")
	}
	if s := q.one("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListLimit || s != strconv.Itoa(n) {
			q.Errors.Add("", "The page size (limit) must be a whole number from 1 to 100.")
		} else {
			q.Limit = n
		}
	}
	q.Cursor = q.one("cursor")
	switch q.one("format") {
	case "":
	case "csv":
		q.CSV = true
	default:
		q.Errors.Add("", "The only format of a list besides this page is csv.")
	}
	return q
}

// Failed says whether anything was refused: the page answers 400.
func (q *listQuery) Failed() bool { return len(q.Errors) > 0 }

// StaleCursor refuses a cursor the list did not make (an address edited
// by hand, or from an older version).
func (q *listQuery) StaleCursor() {
	q.Errors.Add("", "This page's address is out of date. Start again from the first page.")
}

// one is the single value of name, trimmed; a name sent twice is refused
// beside its field.
func (q *listQuery) one(name string) string {
	vs := q.Values[name]
	if len(vs) > 1 {
		q.Errors.Add(name, "Choose one value.")
		return ""
	}
	if len(vs) == 0 {
		return ""
	}
	return strings.TrimSpace(vs[0])
}

func (q *listQuery) filter(name string) string {
	q.filters = append(q.filters, name)
	return q.one(name)
}

// Text is a text filter of at most max characters; nil when empty.
func (q *listQuery) Text(name string, max int) *string {
	s := q.filter(name)
	switch {
	case s == "":
		return nil
	case !utf8.ValidString(s) || utf8.RuneCountInString(s) > max:
		q.Errors.Add(name, "Enter at most "+strconv.Itoa(max)+" characters.")
		return nil
	}
	return &s
}

// Choice is a filter that must be one of choices; nil when empty.
func (q *listQuery) Choice(name string, choices []string) *string {
	s := q.filter(name)
	if s == "" {
		return nil
	}
	for _, ch := range choices {
		if s == ch {
			return &s
		}
	}
	q.Errors.Add(name, "Choose one of the values offered.")
	return nil
}

// ID is a filter naming a uuid (a MID, a location, an invoice); nil when
// empty. One of another organization matches nothing, as in the API.
func (q *listQuery) ID(name string) *uuid.UUID {
	s := q.filter(name)
	if s == "" {
		return nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		q.Errors.Add(name, "Choose one of the values offered.")
		return nil
	}
	return &id
}

// Dates is a range of days, each a date (YYYY-MM-DD, as a date input
// sends it) in Zone, both included: from is the start of its day, to the
// start of the day after its own, as the domain's CreatedFrom and
// CreatedTo take them. Either may be empty (nil).
func (q *listQuery) Dates(fromName, toName string) (from, to *time.Time) {
	read := func(name string) *time.Time {
		s := q.filter(name)
		if s == "" {
			return nil
		}
		d, err := time.ParseInLocation(time.DateOnly, s, q.Zone)
		if err != nil || d.Year() < 2000 || d.Year() > 9998 {
			q.Errors.Add(name, "Enter a date as YYYY-MM-DD, such as 2026-11-30.")
			return nil
		}
		return &d
	}
	from, to = read(fromName), read(toName)
	if to != nil {
		next := to.AddDate(0, 0, 1)
		if from != nil && from.After(*to) {
			q.Errors.Add(toName, "Enter a date on or after the first date.")
			return nil, nil
		}
		to = &next
	}
	return from, to
}

// Filtered says whether a filter narrows the list.
func (q *listQuery) Filtered() bool {
	for _, name := range q.filters {
		if strings.TrimSpace(q.Values.Get(name)) != "" {
			return true
		}
	}
	return false
}

// address is path with the filters read and extra (which wins).
func (q *listQuery) address(path string, extra url.Values) string {
	v := url.Values{}
	for _, name := range q.filters {
		if s := strings.TrimSpace(q.Values.Get(name)); s != "" {
			v.Set(name, s)
		}
	}
	for k, vs := range extra {
		v[k] = vs
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// listData is what every list page shows: its rows, the next page's
// address ("" on the last) carrying the cursor and the filters, and the
// CSV export's address, the filters applied. A page's data embeds it
// beside what its form offers.
type listData[T any] struct {
	Rows     []T
	Next     string
	CSV      string
	Filtered bool
	// Zone names the time zone of the date filters, for their hint.
	Zone string
}

// listOf is the list data of a page of rows at path, next being the
// cursor of the page after it ("" on the last).
func listOf[T any](q *listQuery, path string, rows []T, next string) listData[T] {
	d := listData[T]{Rows: rows, Filtered: q.Filtered(), Zone: q.Zone.String(),
		CSV: q.address(path, url.Values{"format": {"csv"}})}
	if next != "" {
		extra := url.Values{"cursor": {next}}
		if q.Limit != defaultListLimit {
			extra.Set("limit", strconv.Itoa(q.Limit))
		}
		d.Next = q.address(path, extra)
	}
	return d
}

// listPage reads one page of a list: limit items after cursor, and the
// cursor of the page after it ("" on the last). The CSV export reads the
// same function until the last page.
type listPage[T any] func(ctx context.Context, limit int, cursor string) ([]T, string, error)

// fillList fills into with the page of rows the query asks for, each item
// made a row by row. A cursor the list did not make is refused beside the
// form (q.Failed, and into is left as it is); any other failure is returned.
func fillList[T, R any](ctx context.Context, q *listQuery, into *listData[R], path string, page listPage[T], row func(T) R) error {
	list, next, err := page(ctx, q.Limit, q.Cursor)
	if errors.Is(err, keyset.ErrInvalid) {
		q.StaleCursor()
		return nil
	}
	if err != nil {
		return err
	}
	rows := make([]R, len(list))
	for i, item := range list {
		rows[i] = row(item)
	}
	*into = listOf(q, path, rows, next)
	return nil
}

// renderList answers a list page showing data: 400 when anything of its
// query was refused.
func (h *handler) renderList(c echo.Context, q *listQuery, name, title string, data any) error {
	status := http.StatusOK
	if q.Failed() {
		status = http.StatusBadRequest
	}
	return h.render(c, status, name, q.Page(title, data))
}

// Page is the page of a list showing data: its form with the values sent
// and, after a refusal, each message beside its field.
func (q *listQuery) Page(title string, data any) page {
	return page{Title: title, Form: q.Values, Errors: q.Errors, Data: data}
}

// zoneOf is the time zone in which the member reads what concerns no one
// location (a list's date range, an export's date): that of the
// organization's locations when they share one, UTC otherwise (places).
func (h *handler) zoneOf(c echo.Context) (*time.Location, error) {
	p, err := h.places(c)
	if err != nil {
		return nil, err
	}
	return p.zone, nil
}
