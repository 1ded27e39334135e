package portal

import (
	"strings"
	"testing"
	"time"
)

// A list's query: each filter read by its kind, what is wrong noted beside
// its field, dates as whole days in the zone, and the next page's address
// carrying the filters, the size and the cursor (never the format).
func TestListQuery(t *testing.T) {
	chicago, err := time.LoadLocation("America/Chicago")
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		status, search *string
		from, to       *time.Time
	}
	statuses := []string{"open", "paid"}
	readAll := func(q *listQuery) read {
		var r read
		r.status = q.Choice("status", statuses)
		r.search = q.Text("search", 5)
		r.from, r.to = q.Dates("createdFrom", "createdTo")
		return r
	}
	for _, c := range []struct {
		name, raw string
		errors    map[string]string // field → part of its message; "" a message about the page
		check     func(*testing.T, *listQuery, read)
	}{
		{name: "nothing", raw: "", check: func(t *testing.T, q *listQuery, r read) {
			if r.status != nil || r.search != nil || r.from != nil || r.to != nil || q.Limit != 25 || q.CSV || q.Filtered() {
				t.Errorf("read %+v from nothing (limit %d, csv %v)", r, q.Limit, q.CSV)
			}
		}},
		{name: "every filter", raw: "status=paid&search=+INV-1+&createdFrom=2026-11-01&createdTo=2026-11-30&limit=50&cursor=abc", check: func(t *testing.T, q *listQuery, r read) {
			if *r.status != "paid" || *r.search != "INV-1" || q.Limit != 50 || q.Cursor != "abc" || !q.Filtered() {
				t.Errorf("read %+v, limit %d, cursor %q", r, q.Limit, q.Cursor)
			}
			if want := time.Date(2026, 11, 1, 0, 0, 0, 0, chicago); !r.from.Equal(want) {
				t.Errorf("from %v, want %v", r.from, want)
			}
			if want := time.Date(2026, 12, 1, 0, 0, 0, 0, chicago); !r.to.Equal(want) {
				t.Errorf("to %v, want the start of the day after, %v", r.to, want)
			}
			d := listOf(q, "/portal/things", []int{1}, "next-cursor")
			if want := "/portal/things?createdFrom=2026-11-01&createdTo=2026-11-30&cursor=next-cursor&limit=50&search=INV-1&status=paid"; d.Next != want {
				t.Errorf("next %q, want %q", d.Next, want)
			}
			if want := "/portal/things?createdFrom=2026-11-01&createdTo=2026-11-30&format=csv&search=INV-1&status=paid"; d.CSV != want {
				t.Errorf("csv %q, want %q", d.CSV, want)
			}
			if last := listOf(q, "/portal/things", []int{1}, ""); last.Next != "" {
				t.Errorf("the last page links to %q", last.Next)
			}
		}},
		{name: "the export", raw: "format=csv&status=open", check: func(t *testing.T, q *listQuery, r read) {
			if !q.CSV || *r.status != "open" {
				t.Errorf("csv %v, status %v", q.CSV, r.status)
			}
		}},
		{name: "unknown status", raw: "status=lost", errors: map[string]string{"status": "Choose one"}},
		{name: "status twice", raw: "status=open&status=paid", errors: map[string]string{"status": "Choose one value"}},
		{name: "too long", raw: "search=abcdef", errors: map[string]string{"search": "at most 5"}},
		{name: "not a date", raw: "createdFrom=30/11/2026", errors: map[string]string{"createdFrom": "YYYY-MM-DD"}},
		{name: "impossible date", raw: "createdTo=2026-02-30", errors: map[string]string{"createdTo": "YYYY-MM-DD"}},
		{name: "dates reversed", raw: "createdFrom=2026-12-01&createdTo=2026-11-01", errors: map[string]string{"createdTo": "on or after"}},
		{name: "limit too big", raw: "limit=101", errors: map[string]string{"": "1 to 100"}},
		{name: "limit with a sign", raw: "limit=%2B5", errors: map[string]string{"": "1 to 100"}},
		{name: "another format", raw: "format=xlsx", errors: map[string]string{"": "csv"}},
		{name: "undecodable", raw: "status=%zz", errors: map[string]string{"": "could not be read"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := readListQuery(c.raw, chicago)
			r := readAll(q)
			if c.check != nil {
				c.check(t, q, r)
			}
			if q.Failed() != (len(c.errors) > 0) {
				t.Fatalf("failed %v, errors %+v", q.Failed(), q.Errors)
			}
			for field, part := range c.errors {
				found := false
				for _, e := range q.Errors {
					found = found || (e.Field == field && strings.Contains(e.Message, part))
				}
				if !found {
					t.Errorf("no message holding %q beside %q: %+v", part, field, q.Errors)
				}
			}
		})
	}
}
