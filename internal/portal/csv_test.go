package portal

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// What a spreadsheet would run as a formula gets a quote in front; plain
// numbers, negative ones included, and ordinary text stay as they are.
func TestCSVCell(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"Dana Whitfield":           "Dana Whitfield",
		"=HYPERLINK(\"x\")":        "'=HYPERLINK(\"x\")",
		"+1 555 0100":              "'+1 555 0100",
		"-2+3":                     "'-2+3",
		"@SUM(A1)":                 "'@SUM(A1)",
		"\tpadded":                 "'\tpadded",
		"\rline":                   "'\rline",
		"-3.20":                    "-3.20",
		"12.30":                    "12.30",
		"-":                        "'-",
		"a=b":                      "a=b",
		"dana@example.com":         "dana@example.com",
		"2026-11-30T10:00:00Z":     "2026-11-30T10:00:00Z",
		"-12.30 refunded":          "'-12.30 refunded",
		"1e5":                      "1e5",
		"'=already quoted":         "'=already quoted",
		"=cmd|' /C calc'!A0":       "'=cmd|' /C calc'!A0",
		"-0":                       "-0",
		"=1+1\nsecond line":        "'=1+1\nsecond line",
		"ordinary, with a comma":   "ordinary, with a comma",
		"\"quoted\" text":          "\"quoted\" text",
		"-1.":                      "'-1.",
		"0.5":                      "0.5",
		"+5":                       "'+5",
		"@":                        "'@",
		"=":                        "'=",
		"\t":                       "'\t",
		"\r":                       "'\r",
		"- a list item, not money": "'- a list item, not money",
	} {
		if got := csvCell(in); got != want {
			t.Errorf("csvCell(%q) = %q, want %q", in, got, want)
		}
	}
}

// An export fetches its rows a page of csvPageSize at a time, each after
// the cursor of the one before, writes a header and every row once, and
// names its file with today's date in the export's zone.
func TestStreamCSV(t *testing.T) {
	const total = 2*csvPageSize + 7
	var asked []string
	page := func(_ context.Context, limit int, cursor string) ([]int, string, error) {
		if limit != csvPageSize {
			t.Errorf("asked for %d rows, want %d", limit, csvPageSize)
		}
		asked = append(asked, cursor)
		start := 0
		if cursor != "" {
			start, _ = strconv.Atoi(cursor)
		}
		end := min(start+limit, total)
		rows := make([]int, 0, end-start)
		for i := start; i < end; i++ {
			rows = append(rows, i)
		}
		next := ""
		if end < total {
			next = strconv.Itoa(end)
		}
		return rows, next, nil
	}
	chicago, err := time.LoadLocation("America/Chicago")
	if err != nil {
		t.Fatal(err)
	}
	// 03:00 UTC on 1 December is still 30 November in Chicago.
	h := &handler{Deps: Deps{Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC) }}}
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/portal/things?format=csv", nil), rec)
	err = streamCSV(h, c, csvExport[int]{Name: "things", Zone: chicago, Page: page, Columns: []csvColumn[int]{
		{"number", strconv.Itoa},
		{"formula", func(i int) string { return "=" + strconv.Itoa(i) }},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Header().Get("Content-Disposition"); got != `attachment; filename=things-2026-11-30.csv` {
		t.Errorf("Content-Disposition %q", got)
	}
	if got := rec.Header().Get("Content-Type"); got != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type %q", got)
	}
	if want := []string{"", strconv.Itoa(csvPageSize), strconv.Itoa(2 * csvPageSize)}; len(asked) != len(want) || asked[1] != want[1] || asked[2] != want[2] {
		t.Errorf("pages asked after %q, want %q", asked, want)
	}
	records, err := csv.NewReader(bytes.NewReader(rec.Body.Bytes())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != total+1 || records[0][0] != "number" || records[0][1] != "formula" {
		t.Fatalf("%d records, header %q", len(records), records[0])
	}
	for i, r := range records[1:] {
		if r[0] != strconv.Itoa(i) || r[1] != "'="+strconv.Itoa(i) {
			t.Fatalf("row %d is %q", i, r)
		}
	}
}

// A list that fails before anything is sent is an error page; one that
// fails after the first page cuts the connection (http.ErrAbortHandler),
// so that the file is never taken for whole.
func TestStreamCSVFailures(t *testing.T) {
	h := &handler{Deps: Deps{Log: slog.New(slog.DiscardHandler), Now: time.Now}}
	cols := []csvColumn[int]{{"n", strconv.Itoa}}
	down := errors.New("database down")

	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/portal/things?format=csv", nil), rec)
	err := streamCSV(h, c, csvExport[int]{Name: "things", Columns: cols,
		Page: func(context.Context, int, string) ([]int, string, error) { return nil, "", down }})
	if !errors.Is(err, down) || rec.Code != http.StatusInternalServerError || rec.Header().Get("Content-Disposition") != "" {
		t.Errorf("a failure at once: %v, %d %q", err, rec.Code, rec.Header().Get("Content-Disposition"))
	}

	rec = httptest.NewRecorder()
	c = echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/portal/things?format=csv", nil), rec)
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Errorf("a failure after the first page: recovered %v, want http.ErrAbortHandler", r)
		}
	}()
	_ = streamCSV(h, c, csvExport[int]{Name: "things", Columns: cols,
		Page: func(_ context.Context, _ int, cursor string) ([]int, string, error) {
			if cursor == "" {
				return []int{1, 2}, "more", nil
			}
			return nil, "", down
		}})
	t.Error("the export went on after a failure")
}
