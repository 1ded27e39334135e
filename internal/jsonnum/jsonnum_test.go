package jsonnum

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestDecimalRoundTripsWhatFloatCannotHold(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"0.1"`, `"0.1"`},
		{`0.1`, `"0.1"`},
		{`"999999999.99"`, `"999999999.99"`},
		{`999999999.99`, `"999999999.99"`},
		{`"12345678901234567890.123456789"`, `"12345678901234567890.123456789"`},
		{`12.30`, `"12.30"`},
		{`-5`, `"-5"`},
		{`1.5e2`, `"150"`},
		{`"-0"`, `"0"`},
		{`0e1`, `"0"`},
		{`1e39`, `"1000000000000000000000000000000000000000"`},
	}
	for _, c := range cases {
		var d Decimal
		if err := json.Unmarshal([]byte(c.in), &d); err != nil {
			t.Fatalf("unmarshal %s: %v", c.in, err)
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != c.want {
			t.Errorf("%s → %s, want %s", c.in, out, c.want)
		}
	}
}

func TestDecimalRefusesWhatThePatternRefuses(t *testing.T) {
	for _, in := range []string{`"1e3"`, `"01"`, `".5"`, `"1."`, `"+1"`, `" 1"`, `"abc"`, `""`, `true`, `[]`, `{}`, `1e999`, `1e40`, `"1` + string(make([]byte, 0)) + `"x`, `0x10`} {
		var d Decimal
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("%s accepted as %s", in, d.Text('f'))
		}
	}
}

func TestDecimalNullLeavesPointerNil(t *testing.T) {
	var v struct {
		A *Decimal `json:"a"`
	}
	if err := json.Unmarshal([]byte(`{"a":null}`), &v); err != nil || v.A != nil {
		t.Fatalf("got %v, %v", v.A, err)
	}
}

// A hostile megabyte of digits costs neither time nor memory: it is refused
// before it is parsed or copied, and the error quotes 40 characters of it.
func TestLongDecimalRefusedBeforeParsing(t *testing.T) {
	digits := strings.Repeat("7", 1<<20)
	for name, raw := range map[string][]byte{
		"string": []byte(`"` + digits + `"`),
		"number": []byte(digits),
	} {
		t.Run(name, func(t *testing.T) {
			var d Decimal
			var err error
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			allocs := testing.AllocsPerRun(5, func() { err = d.UnmarshalJSON(raw) })
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("a megabyte of digits is accepted")
			}
			if allocs > 20 {
				t.Errorf("%v allocations to refuse it, want at most 20", allocs)
			}
			// Six runs (AllocsPerRun warms up once); a copy of the input would be 6 MiB.
			if bytes := after.TotalAlloc - before.TotalAlloc; bytes > 64<<10 {
				t.Errorf("%d bytes allocated to refuse it, want at most 64 KiB", bytes)
			}
			if len(err.Error()) > 120 {
				t.Errorf("error of %d bytes, want a short one: %.200s", len(err.Error()), err.Error())
			}
		})
	}
	if _, err := ParseDecimal(digits); err == nil || len(err.Error()) > 120 {
		t.Errorf("ParseDecimal: %.200v", err)
	}
}

// A decimal prints as its number, by value and by pointer alike.
func TestDecimalPrintsItsNumber(t *testing.T) {
	d := MustDecimal("12.30")
	for _, tt := range []struct{ verb, got string }{
		{"%v", fmt.Sprintf("%v", d)},
		{"%s", strings.TrimPrefix(fmt.Sprintf("amount %s", d), "amount ")},
		{"%v of a pointer", fmt.Sprintf("%v", &d)},
		{"%+v in a struct", fmt.Sprintf("%+v", struct{ Amount Decimal }{d})},
	} {
		want := "12.30"
		if tt.verb == "%+v in a struct" {
			want = "{Amount:12.30}"
		}
		if tt.got != want {
			t.Errorf("%s prints %q, want %q", tt.verb, tt.got, want)
		}
	}
}
