package jsonnum

import (
	"bytes"
	"encoding/json"
	"math/big"
	"regexp"
	"strings"
	"testing"
)

// The patterns openapi.yaml states (and RFC 8259's number grammar), written
// out again here so the fuzz target checks the decoder against the
// interface rather than against itself.
var (
	specDecimal = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$`)
	rfcNumber   = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$`)
)

// FuzzDecimal: any bytes as a JSON value. The decoder never panics; it
// accepts exactly the JSON numbers and the JSON strings matching the
// interface's pattern (within the digit and exponent bounds); what it
// accepts keeps its exact value and round-trips through its own encoding.
func FuzzDecimal(f *testing.F) {
	for _, s := range []string{
		`"12.30"`, `12.30`, `"0.1"`, `0.1`, `"-0"`, `-0`, `"999999999.99"`, `1.5e2`, `1E-3`, `-7e+2`,
		`"12345678901234567890.123456789"`, `1e40`, `1e41`, `1e-40`, `1e999`, `"01"`, `".5"`, `"1."`,
		`"+1"`, `" 1"`, `"1e3"`, `""`, `null`, `true`, `[]`, `{}`, `"\u0031\u0032"`, `"1\/"`, `0x10`,
		`"1234567890123456789012345678901234567890"`, `"12345678901234567890123456789012345678901"`,
		`"0.0000000000000000000000000000000000000001"`, `"NaN"`, `"Infinity"`, `"-"`, "\"1\xff\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Straight into the method, as no caller would: still no panic.
		var direct Decimal
		_ = direct.UnmarshalJSON(data)

		if !json.Valid(data) {
			return // encoding/json refuses it before the decoder sees it
		}
		var got struct {
			D *Decimal `json:"d"`
		}
		err := json.Unmarshal(append(append([]byte(`{"d":`), data...), '}'), &got)
		want, wantOK := expectedDecimal(data)
		switch {
		case wantOK && err != nil:
			t.Fatalf("%s refused: %v", data, err)
		case !wantOK && err == nil:
			t.Fatalf("%s accepted as %v", data, got.D)
		case err != nil:
			return
		case want == nil:
			if got.D != nil {
				t.Fatalf("null decoded as %v", got.D)
			}
			return
		}

		// The exact value, never a float's approximation.
		var value big.Rat
		if _, ok := value.SetString(got.D.Text('f')); !ok || value.Cmp(want) != 0 {
			t.Fatalf("%s decoded as %s, want %s", data, got.D.Text('f'), want.RatString())
		}
		out, err := json.Marshal(got.D)
		if err != nil {
			t.Fatal(err)
		}
		var unquoted string
		if err := json.Unmarshal(out, &unquoted); err != nil || !specDecimal.MatchString(unquoted) {
			t.Fatalf("%s encodes as %s, which is not a string matching the pattern", data, out)
		}
		var again Decimal
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("own encoding %s refused: %v", out, err)
		}
		// The same value, and the same places after the point (a positive
		// exponent, as in 1.5e2, is written out as digits: "150").
		if again.Cmp(&got.D.Decimal) != 0 || again.Exponent != min(got.D.Exponent, 0) {
			t.Fatalf("%s → %s → %s: value or places changed", data, out, again.Text('f'))
		}
		if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable: %s then %s", out, out2)
		}
	})
}

// expectedDecimal is what the interface says a JSON value decodes to: nil
// and true for null; the value and true for an accepted number or string;
// false for anything refused.
func expectedDecimal(data []byte) (*big.Rat, bool) {
	text := strings.TrimSpace(string(data))
	if text == "null" {
		return nil, true
	}
	if strings.HasPrefix(text, `"`) {
		var s string
		if err := json.Unmarshal([]byte(text), &s); err != nil || !specDecimal.MatchString(s) {
			return nil, false
		}
		text = s
	}
	// At most 40 characters, string or number.
	if len(text) > 40 {
		return nil, false
	}
	m := rfcNumber.FindStringSubmatch(text)
	if m == nil {
		return nil, false
	}
	// And at most 40 characters once written out in plain notation, the
	// form the decoder encodes it in: 1e39 is 40 digits, 1e-39 is "0." and
	// 39 decimals.
	digits := strings.TrimLeft(m[1]+m[2], "0")
	if len(digits) == 0 {
		digits = "0"
	}
	exp := new(big.Int)
	if m[3] != "" {
		exp.SetString(strings.TrimPrefix(m[3], "+"), 10)
	}
	exp.Sub(exp, big.NewInt(int64(len(m[2]))))
	if exp.CmpAbs(big.NewInt(40)) > 0 {
		return nil, false
	}
	plain := int64(len(digits)) + max(exp.Int64(), 0)
	if e := exp.Int64(); e < 0 {
		plain = max(int64(len(digits)), -e+1) + 1
	}
	if strings.HasPrefix(text, "-") && digits != "0" {
		plain++
	}
	if plain > 40 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(text)
	return r, ok
}
