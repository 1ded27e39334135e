package api

import (
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
)

// defaultPageSize is the page size of lists when the client sends no limit.
const defaultPageSize = 25

// page is what a list request asks for: its size and where it starts.
type page struct {
	limit  int
	cursor string
}

func pageOf(limit *models.Limit, cursor *models.Cursor) page {
	p := page{limit: defaultPageSize}
	if limit != nil {
		p.limit = int(*limit)
	}
	if cursor != nil {
		p.cursor = *cursor
	}
	return p
}

// invalidCursor is the answer to a cursor the list did not make.
func invalidCursor() *problem {
	return invalidField("query.cursor", "is not a cursor from a Link header of this list; start again without it")
}

// filters are a list request's filters, as the next page's address repeats them.
type filters url.Values

func (f filters) text(name string, v *string) {
	if v != nil {
		url.Values(f).Set(name, *v)
	}
}

func (f filters) id(name string, v *uuid.UUID) {
	if v != nil {
		url.Values(f).Set(name, v.String())
	}
}

func (f filters) time(name string, v *time.Time) {
	if v != nil {
		url.Values(f).Set(name, v.Format(time.RFC3339Nano))
	}
}

// nextLink is the Link header of a page: the address of the next page, with
// the same filters and size; nil on the last page.
func (s *Server) nextLink(path string, f filters, p page, next string) *string {
	if next == "" {
		return nil
	}
	q := url.Values(f)
	q.Set("limit", strconv.Itoa(p.limit))
	q.Set("cursor", next)
	link := "<" + s.publicURL + path + "?" + q.Encode() + `>; rel="next"`
	return &link
}
