package invoice

import (
	"encoding/json"
	"errors"
	"fmt"
)

// parseTextRows reads what selectFullInvoice's json_agg(json_build_array(…))
// columns hold: a JSON array of rows, each an array of n strings or nulls.
// A read of an invoice decodes three of these; encoding/json, by reflection
// and in two passes, took a tenth of the read's CPU time for it.
func parseTextRows(b []byte, n int) ([][]*string, error) {
	// Values are cut from one string of the whole text: a value without
	// escapes costs no allocation of its own, a row two (its values and
	// their pointers).
	p := textRows{b: b, s: string(b)}
	var rows [][]*string
	if !p.consume('[') {
		return nil, p.fail("an array")
	}
	if p.consume(']') {
		return rows, p.end()
	}
	for {
		if !p.consume('[') {
			return nil, p.fail("a row")
		}
		row, values := make([]*string, n), make([]string, n)
		for i := range n {
			if i > 0 && !p.consume(',') {
				return nil, p.fail(fmt.Sprintf("%d values in a row", n))
			}
			null, err := p.value(&values[i])
			if err != nil {
				return nil, err
			}
			if !null {
				row[i] = &values[i]
			}
		}
		if !p.consume(']') {
			return nil, p.fail(fmt.Sprintf("%d values in a row", n))
		}
		rows = append(rows, row)
		if p.consume(']') {
			return rows, p.end()
		}
		if !p.consume(',') {
			return nil, p.fail("a comma between rows")
		}
	}
}

type textRows struct {
	b []byte
	s string // b, as a string
	i int
}

func (p *textRows) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\n' || p.b[p.i] == '\r' || p.b[p.i] == '\t') {
		p.i++
	}
}

// consume skips white space and then c, if c is next.
func (p *textRows) consume(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *textRows) end() error {
	p.space()
	if p.i != len(p.b) {
		return p.fail("the end")
	}
	return nil
}

func (p *textRows) fail(want string) error {
	return fmt.Errorf("not rows of text: want %s at byte %d", want, p.i)
}

// value reads a string into v, or a null.
func (p *textRows) value(v *string) (null bool, err error) {
	p.space()
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true, nil
	}
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return false, p.fail("a string or null")
	}
	start, escaped := p.i, false
	for p.i++; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '\\':
			escaped = true
			p.i++
		case c == '"':
			p.i++
			if !escaped {
				*v = p.s[start+1 : p.i-1]
			} else if err := json.Unmarshal(p.b[start:p.i], v); err != nil {
				// Escapes are rare (quotes, control characters): the standard
				// decoder reads those strings.
				return false, fmt.Errorf("not rows of text: %w", err)
			}
			return false, nil
		case c < 0x20:
			return false, p.fail("no control character in a string")
		}
	}
	return false, errors.New("not rows of text: a string does not end")
}
