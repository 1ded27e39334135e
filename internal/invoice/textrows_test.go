package invoice

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseTextRows(f *testing.F) {
	for _, seed := range []string{
		`[["Item 1 of the catalogue", "2", "70.07", "EA", "43211503", null], ["Item", "3", "70.20", null, null, null]]`,
		`[["say \"hi\"\n", "1", "0.5", "\u00e9t\u00e9 \ud83d\ude00", null, "a\\b"]]`,
		`[]`,
		`[ [ "é", "1" , "2", null,null , null ] ]`,
		`[["a", "1", "2", null, null]]`,
		`[["a", "1", "2", null, null, null, null]]`,
		`[["a", 1, "2", null, null, null]]`,
		`[["a", "1", "2", null, null, null]] x`,
		`[["unterminated]]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseTextRows([]byte(in), 6)
		var want [][]*string
		jsonErr := json.Unmarshal([]byte(in), &want)
		if jsonErr == nil && want != nil && utf8.ValidString(in) && !slices.ContainsFunc(want, func(r []*string) bool { return len(r) != 6 }) {
			if err != nil {
				t.Fatalf("%q: %v; encoding/json reads %v", in, err, texts(want))
			}
		}
		if err == nil {
			if jsonErr != nil {
				t.Fatalf("%q: read as %v, but encoding/json says %v", in, texts(got), jsonErr)
			}
			if utf8.ValidString(in) && !slices.Equal(texts(got), texts(want)) {
				t.Fatalf("%q: %v, encoding/json %v", in, texts(got), texts(want))
			}
		}
	})
}

// texts shows rows of text, NULL for nil.
func texts(rows [][]*string) []string {
	var out []string
	for _, r := range rows {
		var vs []string
		for _, v := range r {
			if v == nil {
				vs = append(vs, "NULL")
			} else {
				vs = append(vs, `"`+*v+`"`)
			}
		}
		out = append(out, strings.Join(vs, "|"))
	}
	return out
}
