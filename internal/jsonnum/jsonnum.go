// Package jsonnum holds the wire type for decimals (amounts, quantities,
// unit costs), which the interface lets a client send either as a JSON
// number or as a JSON string. It decodes from the raw JSON text, so a
// decimal never passes through a float.
package jsonnum

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/clip"
)

var (
	decimalString = regexp.MustCompile(`^-?(?:0|[1-9]\d*)(?:\.\d+)?$`)
	// jsonNumber is the grammar of RFC 8259 numbers.
	jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$`)
)

// MaxText is the most characters a number may take, as sent and written out
// in full: it keeps a hostile number from costing memory or time, and no
// amount, quantity or cost of this service comes close. It is checked
// before anything parses the text: apd's parsing costs time that grows with
// the square of the length.
const MaxText = 40

// excerpt is at most MaxText characters of a refused value, for an error
// message: a message never gives back a megabyte it was sent.
func excerpt(s string) string {
	if len(s) <= MaxText {
		return strconv.Quote(s)
	}
	return strconv.Quote(clip.To(s, MaxText)) + "…"
}

// Decimal is an exact decimal number. On the wire it is a JSON string
// holding the number as it is stored, with the exponent (number of decimal
// places) the domain gave it.
type Decimal struct {
	apd.Decimal
}

// ParseDecimal reads a decimal from its text, accepting what the interface
// accepts in a JSON string.
func ParseDecimal(s string) (Decimal, error) {
	if len(s) > MaxText {
		return Decimal{}, fmt.Errorf("must be at most %d characters long, not %s", MaxText, excerpt(s))
	}
	if !decimalString.MatchString(s) {
		return Decimal{}, fmt.Errorf("must be a decimal number such as \"12.30\", not %s", excerpt(s))
	}
	return parse(s)
}

// MustDecimal is ParseDecimal for constants in code and tests.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

func parse(s string) (Decimal, error) {
	var d Decimal
	if _, _, err := d.SetString(s); err != nil {
		return Decimal{}, fmt.Errorf("must be a decimal number, not %s: %w", excerpt(s), err)
	}
	// Characters counted as written out in plain notation (1e39 has 40),
	// so that whatever is accepted is accepted again in its own encoding.
	if d.Exponent > MaxText || d.Exponent < -MaxText || plainLength(&d.Decimal) > MaxText {
		return Decimal{}, fmt.Errorf("must be at most %d characters written out in full: %s is too large or has too many decimal places", MaxText, excerpt(s))
	}
	if d.Exponent > 0 {
		// Written out as digits, the form it is encoded in: 1.5e2 is 150,
		// and 0e1 is 0 (not "00").
		if _, err := apd.BaseContext.WithPrecision(2*MaxText).Quantize(&d.Decimal, &d.Decimal, 0); err != nil {
			return Decimal{}, fmt.Errorf("must be a decimal number, not %s: %w", excerpt(s), err)
		}
	}
	if d.Negative && d.IsZero() {
		d.Negative = false
	}
	return d, nil
}

// String is the decimal in plain notation, as the API writes it: what %v
// and %s print (without it, they printed apd's internals).
func (d Decimal) String() string { return d.Text('f') }

// plainLength is how many characters d takes in plain notation: "-0.012" is 6.
func plainLength(d *apd.Decimal) int64 {
	n := d.NumDigits() + int64(max(d.Exponent, 0))
	if d.Exponent < 0 {
		n = max(d.NumDigits(), int64(-d.Exponent)+1) + 1
	}
	if d.Negative && !d.IsZero() {
		n++
	}
	return n
}

// MarshalText gives the decimal in plain notation, which encoding/json
// writes as a JSON string. (A MarshalJSON would have its output parsed and
// compacted again by encoding/json, for every amount of every answer.)
func (d Decimal) MarshalText() ([]byte, error) {
	return d.Append(nil, 'f'), nil
}

// UnmarshalJSON accepts a JSON number or a JSON string matching
// ^-?(?:0|[1-9]\d*)(?:\.\d+)?$, reading the digits directly.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	var (
		v   Decimal
		err error
	)
	// A longer text is refused before it is unquoted or parsed; escapes
	// take at most six bytes a character.
	if len(b) > 2+6*MaxText {
		return fmt.Errorf("must be at most %d characters long, not %s", MaxText, excerpt(string(b[:min(len(b), MaxText+1)])))
	}
	if len(b) > 0 && b[0] == '"' {
		s, uerr := strconv.Unquote(string(b))
		if uerr != nil {
			return errors.New("decimal: invalid JSON string")
		}
		v, err = ParseDecimal(s)
	} else {
		v, err = parseNumber(b)
	}
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// CheckNumber says why a JSON number literal is not a decimal the service
// takes (longer than 40 characters, or more than 40 written out in full:
// 1e308, 1e-400), or nil. It costs no more than reading 41 bytes.
func CheckNumber(lit []byte) error {
	_, err := parseNumber(lit)
	return err
}

func parseNumber(b []byte) (Decimal, error) {
	switch {
	case len(b) > MaxText:
		return Decimal{}, fmt.Errorf("must be at most %d characters long, not %s", MaxText, excerpt(string(b[:MaxText+1])))
	case !jsonNumber.Match(b):
		return Decimal{}, fmt.Errorf("must be a decimal number, not %s", excerpt(string(b)))
	}
	return parse(string(b))
}
