package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/jsonnum"
)

// hostile is text that encoding/json escapes in every way it has.
const hostile = "Dana \"D\" <d&d> O'Brien\\ \x00\x01\x1f\b\f\n\r\t \u2028\u2029 é 日本 🙂 \xff\xfe bad \xe2\x82"

// filled sets every field of v (a struct), and what its pointers point
// to, to s, at, d or id by its type, with two of each nested invoice line,
// payment and saved card; a value of a type it does not know fails the
// test, so that a field added to the spec is never left out of
// appendInvoice unnoticed.
func filled(tb testing.TB, v reflect.Value, s string, at time.Time, d jsonnum.Decimal, id uuid.UUID) {
	tb.Helper()
	switch p := v.Addr().Interface().(type) {
	case *time.Time:
		*p = at
		return
	case *jsonnum.Decimal:
		*p = d
		return
	case *uuid.UUID:
		*p = id
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int32:
		v.SetInt(-7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		filled(tb, v.Elem(), s, at, d, id)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			filled(tb, v.Index(i), s, at, d, id)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			filled(tb, v.Field(i), s, at, d, id)
		}
	default:
		tb.Fatalf("a value of type %s; teach appendInvoice and this test about it", v.Type())
	}
}

func TestInvoiceJSONIsEncodingJSONs(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 30, 1, 123456789, time.FixedZone("", -5*3600-30*60))
	id := uuid.MustParse("01a21b73-ed19-7d0f-828f-0f6e2e4ba704")
	full := func(s string, d string) models.Invoice {
		var inv models.Invoice
		filled(t, reflect.ValueOf(&inv).Elem(), s, at, jsonnum.MustDecimal(d), id)
		return inv
	}
	emptyLists := full("x", "1")
	empty, none := []models.InvoiceLine{}, []models.Payment(nil)
	emptyLists.LineItems, emptyLists.Payments, emptyLists.SavedCards = &empty, &none, nil
	falseReminders := full("y", "0.00")
	no := false
	falseReminders.Reminders = &no
	untaxed := full("z", "5")
	(*untaxed.LineItems)[1].TaxRate = nil
	for name, inv := range map[string]models.Invoice{
		"zero":                     {},
		"every field, plain":       full("Dana Whitfield", "60.00"),
		"every field, hostile":     full(hostile, "-1234567890.0001"),
		"every field, empty":       full("", "0"),
		"empty and nil lists":      emptyLists,
		"a line without tax rate":  untaxed,
		"reminders false, UTC now": func() models.Invoice { falseReminders.CreatedAt = time.Now().UTC(); return falseReminders }(),
	} {
		t.Run(name, func(t *testing.T) {
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(inv); err != nil {
				t.Fatal(err)
			}
			got, err := appendInvoice(nil, &inv)
			if err != nil {
				t.Fatal(err)
			}
			if got = append(got, '\n'); !bytes.Equal(got, want.Bytes()) {
				t.Errorf("appendInvoice wrote\n%s\nencoding/json\n%s", got, want.Bytes())
			}
		})
	}
}

// A time encoding/json refuses (beyond the year 9999) is refused too.
func TestInvoiceJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	inv := models.Invoice{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(inv); err == nil {
		t.Fatal("encoding/json took the year 10000")
	}
	if _, err := appendInvoice(nil, &inv); err == nil {
		t.Error("appendInvoice took the year 10000")
	}
}

// Any text, in any string member, is written as encoding/json writes it.
func FuzzInvoiceJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", hostile, "\u2028", "\xed\xa0\x80", "<script>", "a\x7fb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var inv models.Invoice
		filled(t, reflect.ValueOf(&inv).Elem(), s, time.Unix(0, 0).UTC(), jsonnum.MustDecimal("1.5"), uuid.Nil)
		want, err := json.Marshal(inv)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendInvoice(nil, &inv)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: appendInvoice wrote %s (%v), encoding/json %s", s, got, err, want)
		}
	})
}
