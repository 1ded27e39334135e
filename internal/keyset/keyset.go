// Package keyset pages lists newest first by (time, id): the one way every
// list of payreq builds its statement, fetches one row more than the page to
// tell whether another follows, and makes the opaque cursor of the next page.
// Inserts while a client pages neither repeat nor skip an item.
package keyset

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ErrInvalid is a cursor this service did not make.
var ErrInvalid = errors.New("invalid cursor")

// Cursor is the (time, id) of the last item of a page.
type Cursor struct {
	At time.Time `json:"t"`
	ID uuid.UUID `json:"id"`
}

// Encode is the cursor as clients see it: base64url of its JSON.
func (c Cursor) Encode() string {
	b, _ := json.Marshal(c) // a time and a uuid always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode reads a cursor made by Encode.
func Decode(s string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrInvalid
	}
	var c Cursor
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.At.IsZero() || c.ID == uuid.Nil {
		return Cursor{}, ErrInvalid
	}
	return c, nil
}

// Query is the statement of one page: a SELECT … FROM …, the conditions
// given, and the order by its time and id columns, newest first.
type Query struct {
	from     string // SELECT … FROM …, without WHERE
	time, id string // the ordering columns
	where    []string
	args     []any
}

// NewQuery starts the page query of selectFrom ordered by the columns
// timeCol and idCol.
func NewQuery(selectFrom, timeCol, idCol string) *Query {
	return &Query{from: selectFrom, time: timeCol, id: idCol}
}

// Where adds a condition; each %d in cond stands for the placeholder of the
// next of values ("i.status = $%d"). Only the conditions given become SQL:
// each combination is its own statement with a plan that fits it (a plan
// for "$n IS NULL OR …" could not use the indexes).
func (q *Query) Where(cond string, values ...any) {
	refs := make([]any, len(values))
	for i, v := range values {
		q.args = append(q.args, v)
		refs[i] = len(q.args)
	}
	q.where = append(q.where, fmt.Sprintf(cond, refs...))
}

// Created narrows the page to items made at or after from and before to,
// by its time column, each when it is given.
func (q *Query) Created(from, to *time.Time) {
	if from != nil {
		q.Where(q.time+" >= $%d", *from)
	}
	if to != nil {
		q.Where(q.time+" < $%d", *to)
	}
}

// After starts the page after the item a cursor names; "" is the first
// page. A cursor not made by this package is ErrInvalid.
func (q *Query) After(cursor string) error {
	if cursor == "" {
		return nil
	}
	c, err := Decode(cursor)
	if err != nil {
		return err
	}
	q.Where("("+q.time+", "+q.id+") < ($%d::timestamptz, $%d::uuid)", c.At, c.ID)
	return nil
}

// SQL is the statement and its arguments for a page of limit items: one
// more is fetched, for Page to tell whether another page follows.
func (q *Query) SQL(limit int) (string, []any) {
	args := q.args
	var b strings.Builder
	b.WriteString(q.from)
	for i, w := range q.where {
		if i == 0 {
			b.WriteString("\n\tWHERE ")
		} else {
			b.WriteString("\n\t\tAND ")
		}
		b.WriteString(w)
	}
	// The limit is written into the statement, not sent: a generic plan
	// of LIMIT $n assumes every matching row is fetched, so PostgreSQL
	// kept planning each page anew (some 700 µs a first page at 100,000
	// invoices). An API limit is one of at most 100 values.
	fmt.Fprintf(&b, "\n\tORDER BY %s DESC, %s DESC\n\tLIMIT %d", q.time, q.id, limit+1)
	return b.String(), args
}

// Page cuts the rows a Query's statement fetched to limit and returns the
// cursor of the next page, or "" on the last; position is an item's (time, id).
func Page[T any](rows []T, limit int, position func(T) Cursor) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, position(rows[limit-1]).Encode()
}

// Querier runs a statement; *sql.DB and *sqlx.DB are ones.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Fetch runs q's statement for a page of limit, reads each row with scan,
// and returns the page and the cursor of the next one ("" on the last);
// position is an item's (time, id).
func Fetch[T any](ctx context.Context, db Querier, q *Query, limit int, scan func(*sql.Rows) (T, error), position func(T) Cursor) ([]T, string, error) {
	query, args := q.SQL(limit)
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	list := make([]T, 0, limit+1) // a page and the row that tells whether another follows
	for rows.Next() {
		item, err := scan(rows)
		if err != nil {
			return nil, "", err
		}
		list = append(list, item)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	list, next := Page(list, limit, position)
	return list, next, nil
}
