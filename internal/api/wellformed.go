package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/payreq/payreq/internal/jsonnum"
)

// Messages for text that is refused as sent.
const (
	notUTF8      = "must be valid UTF-8 text: it holds bytes that are not UTF-8, or an escaped lone surrogate such as \\ud800"
	hasNUL       = "must not contain the NUL character (U+0000)"
	givenTwice   = "must be given once"
	notAnInteger = "must be a whole number written in digits, such as 25"
)

// wellFormedText refuses, with a 400 naming each field, text that payreq
// could not give back exactly as sent: strings that are not valid UTF-8
// (encoding/json would quietly turn those bytes, and escaped lone
// surrogates, into U+FFFD) or that hold NUL (which PostgreSQL text cannot
// store). It looks at every operation's declared query and header
// parameters and at the strings of JSON and form bodies, before the
// validator decodes anything. Every other text, control characters and
// emoji included, is stored and returned byte for byte.
//
// It also refuses what the validator and the generated binder would read
// differently, in payreq's words: a parameter given more than once (the
// validator reads the first, the binder refuses), and an integer
// parameter not written as plain digits ("+5" and " 5" pass strconv).
func wellFormedText(op *operation) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			errs := map[string][]string{}
			add := func(field, msg string) {
				if !slices.Contains(errs[field], msg) {
					errs[field] = append(errs[field], msg)
				}
			}
			// A pair url.Values would drop (a bad %-escape, a ';') must not
			// make its filter silently disappear.
			for _, name := range undecodable(r.URL.RawQuery) {
				if slices.Contains(op.query, name) {
					add("query."+name, "cannot be decoded: write reserved characters as %XX (a ';' as %3B) and separate parameters with &")
				}
			}
			query := r.URL.Query()
			for _, name := range op.query {
				if len(query[name]) > 1 {
					add("query."+name, givenTwice)
				}
				for _, v := range query[name] {
					if msg := textProblem(v); msg != "" {
						add("query."+name, msg)
					} else if slices.Contains(op.integers, name) && !plainInteger(v) {
						add("query."+name, notAnInteger)
					}
				}
			}
			for _, name := range op.header {
				if len(r.Header.Values(name)) > 1 {
					add("header."+name, givenTwice)
				}
				for _, v := range r.Header.Values(name) {
					if msg := textProblem(v); msg != "" {
						add("header."+name, msg)
					}
				}
			}
			if r.Body != nil && r.Body != http.NoBody && (op.json || op.form) {
				contentType := r.Header.Get("Content-Type")
				if _, _, err := mime.ParseMediaType(contentType); err != nil && contentType != "" {
					return unsupportedMediaType("The Content-Type header is not a media type: " + err.Error() + ".")
				}
				// Chosen as the generated handlers choose how to decode the body.
				isJSON := op.json && (strings.HasPrefix(contentType, "application/json") ||
					strings.HasPrefix(contentType, "application/merge-patch+json"))
				isForm := op.form && strings.HasPrefix(contentType, "application/x-www-form-urlencoded")
				if isJSON || isForm {
					body, err := io.ReadAll(r.Body) // limited by limitBody: over it is a 413
					if err != nil {
						return err
					}
					r.Body = io.NopCloser(bytes.NewReader(body))
					if isJSON && op.method == http.MethodPatch {
						// A merge patch tells a member left out from one
						// set to null, which its decoded struct cannot.
						c.SetRequest(r.WithContext(withPatchBody(r.Context(), body)))
					}
					if isJSON {
						// Before anything decodes the body: a deep document
						// costs every decoder memory and time per level.
						if tooDeep(body) {
							return invalidField("body", fmt.Sprintf("nested too deeply: at most %d levels of arrays and objects", maxDepth))
						}
						// Decoders read the first value and stop: {…}{…} would
						// pass for its first half.
						if trailingData(body) {
							return invalidField("body", "must be one JSON value: bytes follow it")
						}
						// The token endpoint reads three strings and ignores every
						// other member (RFC 6749 §3.2); no validator decodes its
						// body, so its numbers need no bounds.
						jsonProblems(body, op.id != "createToken", add)
					} else if form, err := url.ParseQuery(string(body)); err != nil {
						add("body", "is not an application/x-www-form-urlencoded form: "+err.Error())
					} else {
						for name, values := range form {
							for _, v := range values {
								if msg := textProblem(v); msg != "" {
									add(strings.ToValidUTF8(strings.ReplaceAll(name, "\x00", ""), "\uFFFD"), msg)
								}
							}
						}
					}
				}
			}
			if len(errs) == 0 {
				return next(c)
			}
			p := invalid(errs)
			// The fields are named in the detail too: the token endpoint's
			// OAuth error has no errors member.
			p.detail = "Correct the fields listed in errors and send the request again: " + strings.Join(slices.Sorted(maps.Keys(p.errors)), ", ") + "."
			return p
		}
	}
}

// undecodable names the parameters of a raw query whose pair cannot be
// decoded; a name that cannot be decoded itself is given as sent.
func undecodable(rawQuery string) []string {
	var names []string
	for pair := range strings.SplitSeq(rawQuery, "&") {
		key, value, _ := strings.Cut(pair, "=")
		name, kerr := url.QueryUnescape(key)
		if kerr != nil {
			name = key
		}
		if _, verr := url.QueryUnescape(value); kerr != nil || verr != nil || strings.Contains(pair, ";") {
			names = append(names, name)
		}
	}
	return names
}

// plainInteger reports whether s is an integer as a query parameter takes
// one: digits, a minus sign before them at most, within 32 bits.
func plainInteger(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return false
	}
	_, err := strconv.ParseInt(s, 10, 32)
	return err == nil
}

// textProblem says what is wrong with a decoded string, or "".
func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return notUTF8
	case strings.IndexByte(s, 0) >= 0:
		return hasNUL
	}
	return ""
}

// jsonStrings follows a JSON text byte by byte to tell which bytes stand in
// its strings (their quotes too): the byte-level checks pass over them.
type jsonStrings struct{ in, escaped bool }

// inside reports whether b, the text's next byte, is part of a string.
func (s *jsonStrings) inside(b byte) bool {
	switch {
	case s.in:
		switch {
		case s.escaped:
			s.escaped = false
		case b == '\\':
			s.escaped = true
		case b == '"':
			s.in = false
		}
		return true
	case b == '"':
		s.in = true
		return true
	}
	return false
}

// maxDepth is how deeply arrays and objects may nest in a JSON body; no
// request of the API needs more than four levels.
const maxDepth = 32

// tooDeep reports whether arrays and objects nest more than maxDepth deep
// in a JSON text, looking at its bytes only: brackets inside strings do not
// count. Whether it is JSON at all is the validator's to say.
func tooDeep(body []byte) bool {
	depth := 0
	var strs jsonStrings
	for _, b := range body {
		switch {
		case strs.inside(b):
		case b == '[' || b == '{':
			if depth++; depth > maxDepth {
				return true
			}
		case b == ']' || b == '}':
			depth--
		}
	}
	return false
}

// trailingData reports whether a JSON text is one valid value followed by
// something other than white space. Whether the value itself is JSON is
// the validator's to say.
func trailingData(body []byte) bool {
	if json.Valid(body) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var first json.RawMessage
	if dec.Decode(&first) != nil {
		return false
	}
	return len(bytes.TrimSpace(body[dec.InputOffset():])) > 0
}

// jsonProblems reports, under the field's name as sent ("memo",
// "lines[2].description"; "body" for a key or a top-level string), each
// string of a JSON document (value or key) that is not valid Unicode text
// or holds NUL, and, when numbers is set, each number that is not a
// decimal the service takes (every number of a request body the validator
// reads is one): the validator would read 1e308 as a float and pass it. A
// document that is not JSON is left to the validator.
func jsonProblems(body []byte, numbers bool, add func(field, msg string)) {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) && (!numbers || !hasUnusualNumber(body)) {
		return // no string can be ill-formed or hold NUL, no number is out of bounds
	}
	type frame struct {
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []frame // at most maxDepth deep: tooDeep came first
	path := func(frames []frame) string {
		var b strings.Builder
		for _, f := range frames {
			if f.array {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		if b.Len() == 0 {
			return "body"
		}
		return b.String()
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if f := &stack[len(stack)-1]; f.array {
			f.index++
		} else {
			f.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return // the end, or not JSON: the validator answers that
		}
		raw := body[start:dec.InputOffset()]
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, frame{array: t == '[', wantKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			msg := ""
			if i := bytes.IndexByte(raw, '"'); i >= 0 {
				msg = jsonStringProblem(raw[i:])
			}
			if top := len(stack) - 1; top >= 0 && !stack[top].array && stack[top].wantKey {
				// A key: a bad one is reported on the object holding it.
				if msg != "" {
					add(path(stack[:top]), msg)
				}
				stack[top].key, stack[top].wantKey = strings.ToValidUTF8(t, "\uFFFD"), false
				continue
			}
			if msg != "" {
				add(path(stack), msg)
			}
			valueDone()
		case json.Number:
			if err := jsonnum.CheckNumber([]byte(t)); numbers && err != nil {
				add(path(stack), err.Error())
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// hasUnusualNumber reports whether a JSON text holds, outside its strings,
// a number written with an exponent or longer than jsonnum takes: the only
// numbers jsonProblems needs to look at.
func hasUnusualNumber(body []byte) bool {
	run, exponent := 0, false
	var strs jsonStrings
	for _, b := range body {
		switch {
		case strs.inside(b):
		case run > 0 && (b >= '0' && b <= '9' || b == '.' || b == '+' || b == '-' || b == 'e' || b == 'E'):
			run++
			exponent = exponent || b == 'e' || b == 'E'
		case b >= '0' && b <= '9' || b == '-':
			run, exponent = 1, false
		default:
			run = 0
		}
		if exponent || run > jsonnum.MaxText {
			return true
		}
	}
	return false
}

// jsonStringProblem checks a JSON string literal, quotes included, as sent:
// its bytes must be UTF-8 and its \u escapes must not be NUL or a lone
// surrogate.
func jsonStringProblem(lit []byte) string {
	if len(lit) < 2 {
		return ""
	}
	s := lit[1 : len(lit)-1]
	for i := 0; i < len(s); {
		switch b := s[i]; {
		case b == '\\' && i+1 < len(s) && s[i+1] == 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				return "" // not JSON: the validator answers that
			}
			i += 6
			switch {
			case r == 0:
				return hasNUL
			case r >= 0xDC00 && r <= 0xDFFF:
				return notUTF8 // a low surrogate with no high one before it
			case utf16.IsSurrogate(r):
				if low, ok := hex4(s[min(i+2, len(s)):]); ok && s[i] == '\\' && s[i+1] == 'u' && low >= 0xDC00 && low <= 0xDFFF {
					i += 6
					continue
				}
				return notUTF8
			}
		case b == '\\':
			i += 2
		case b < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return notUTF8
			}
			i += size
		}
	}
	return ""
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
