package keyset

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestRoundTripAndRefusals(t *testing.T) {
	c := Cursor{At: time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC), ID: uuid.New()}
	got, err := Decode(c.Encode())
	if err != nil || !got.At.Equal(c.At) || got.ID != c.ID {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "not a cursor", base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2025-01-01T00:00:00Z"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2025-01-01T00:00:00Z","id":"` + uuid.NewString() + `","x":1}`))} {
		if _, err := Decode(bad); err != ErrInvalid {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestQueryNumbersPlaceholdersInOrder(t *testing.T) {
	q := NewQuery("SELECT x FROM t", "t.at", "t.id")
	q.Where("t.org = $%d", "org")
	q.Where("t.a BETWEEN $%d AND $%d", 1, 2)
	c := Cursor{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ID: uuid.New()}
	if err := q.After(c.Encode()); err != nil {
		t.Fatal(err)
	}
	sql, args := q.SQL(25)
	want := "SELECT x FROM t\n\tWHERE t.org = $1\n\t\tAND t.a BETWEEN $2 AND $3\n\t\tAND (t.at, t.id) < ($4::timestamptz, $5::uuid)\n\tORDER BY t.at DESC, t.id DESC\n\tLIMIT 26"
	if sql != want {
		t.Errorf("sql\n%s\nwant\n%s", sql, want)
	}
	if len(args) != 5 {
		t.Fatalf("%d args, want 5 (the limit, one more than the page, is in the statement)", len(args))
	}
	if got := args[4]; got != c.ID {
		t.Errorf("cursor id argument %v, want %v", got, c.ID)
	}
}

func TestQueryRefusesForeignCursor(t *testing.T) {
	if err := NewQuery("SELECT 1", "a", "b").After("bm90IGEgY3Vyc29y"); err != ErrInvalid {
		t.Errorf("got %v, want ErrInvalid", err)
	}
}

func TestPageTrimsAndPointsAtTheLastItem(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	pos := func(id uuid.UUID) Cursor { return Cursor{At: at, ID: id} }

	page, next := Page(ids, 2, pos)
	if len(page) != 2 {
		t.Fatalf("page of %d, want 2", len(page))
	}
	c, err := Decode(next)
	if err != nil {
		t.Fatalf("next cursor: %v", err)
	}
	if c.ID != ids[1] {
		t.Errorf("next cursor names %v, want the page's last item %v", c.ID, ids[1])
	}

	page, next = Page(ids, 3, pos)
	if len(page) != 3 {
		t.Errorf("last page of %d, want 3", len(page))
	}
	if next != "" {
		t.Errorf("last page has next cursor %q, want none", next)
	}
}
