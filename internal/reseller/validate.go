package reseller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/mailaddr"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/rule"
)

// Percent is an owner's share as written: a JSON number or string in an
// application file, the text typed into the sign-up page. Validate reads
// it, so that both are held to one rule.
type Percent string

// UnmarshalJSON takes a JSON number or string as its text, and null as
// none; anything else is a type error.
func (p *Percent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*p = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = Percent(s)
	case len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9'):
		*p = Percent(b)
	default:
		return &json.UnmarshalTypeError{Value: "value", Type: reflect.TypeFor[Percent]()}
	}
	return nil
}

// decimal is the share as a decimal, or false when it is not a number of
// at most two decimal places from 0 to 100 ("60", "33.33", "12.5%").
func (p Percent) decimal() (apd.Decimal, bool) {
	s := strings.TrimSuffix(strings.TrimSpace(string(p)), "%")
	d, err := jsonnum.ParseDecimal(strings.TrimSpace(s))
	if err != nil {
		return apd.Decimal{}, false
	}
	var reduced apd.Decimal
	reduced.Reduce(&d.Decimal)
	if d.Negative || d.Cmp(apd.New(100, 0)) > 0 || reduced.Exponent < -2 {
		return apd.Decimal{}, false
	}
	return d.Decimal, true
}

// ParseApplication reads an application document (the JSON form of
// NewApplication), refusing unknown fields and values of the wrong JSON
// type. It does not validate the values: Submit does, for every front.
// What it refuses is a *rule.Error (Invalid) whose words never repeat a
// value of the document.
func ParseApplication(data []byte) (NewApplication, error) {
	var app NewApplication
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&app); err != nil {
		return NewApplication{}, decodeProblem(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return NewApplication{}, notADocument("the document must hold one JSON object and nothing after it")
	}
	return app, nil
}

func notADocument(why string) *rule.Error {
	return rule.New(rule.Invalid, "", "Not an application document", why)
}

func decodeProblem(err error) *rule.Error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return rule.InvalidField(typeErr.Field, "must be a JSON "+jsonKind(typeErr.Type))
	case errors.As(err, &syntaxErr):
		return notADocument(fmt.Sprintf("not valid JSON (at byte %d)", syntaxErr.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return notADocument("not valid JSON (it ends too early)")
	case errors.Is(err, io.EOF):
		return notADocument("the document is empty")
	}
	return notADocument("not a valid application document: " + strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(t reflect.Type) string {
	if t == reflect.TypeFor[Percent]() {
		return "number or string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Slice:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Pointer:
		return "string or null"
	}
	return "value of another type"
}

// Limits of an application.
const (
	maxName  = 200
	maxShort = 64
	maxEmail = 254
	maxURL   = 500
	maxPhone = 32
	// MaxOwners is how many owners an application names at most.
	MaxOwners = 4
)

// fieldErrors collects messages by field, named as the application file
// and the sign-up form name them: dotted, owners by index
// ("owners.1.ssn"). A message follows the field's name ("is required") and
// never repeats a value, so a full tax id, SSN or account number cannot
// leak through an error.
type fieldErrors map[string][]string

func (f fieldErrors) add(field, format string, args ...any) {
	f[field] = append(f[field], fmt.Sprintf(format, args...))
}

// text checks a required text field.
func (f fieldErrors) text(field, value string, max int) {
	if strings.TrimSpace(value) == "" {
		f.add(field, "is required")
		return
	}
	f.optional(field, value, max)
}

// optional checks a text field that may be empty.
func (f fieldErrors) optional(field, value string, max int) {
	switch {
	case !utf8.ValidString(value) || strings.ContainsFunc(value, unicode.IsControl):
		f.add(field, "must be plain text, without control characters")
	case utf8.RuneCountInString(value) > max:
		f.add(field, "must be at most %d characters", max)
	}
}

func (f fieldErrors) digits(field, value string, minLen, maxLen int) {
	if isDigits(value) && len(value) >= minLen && len(value) <= maxLen {
		return
	}
	if minLen == maxLen {
		f.add(field, "must be %d digits, without spaces or dashes", minLen)
	} else {
		f.add(field, "must be %d to %d digits, without spaces or dashes", minLen, maxLen)
	}
}

// Validate checks every rule of a new application and reports every
// problem at once, as a *rule.Error of kind Invalid whose Fields are keyed
// by dotted field names ("business.taxId", "owners.0.ssn").
func (a NewApplication) Validate() error {
	f := fieldErrors{}
	a.check(f)
	if e := rule.InvalidFields(f); e != nil {
		return e
	}
	return nil
}

func (a NewApplication) check(f fieldErrors) {
	b := a.Business
	f.text("business.legalName", b.LegalName, maxName)
	f.optional("business.dbaName", b.DBAName, maxName)
	f.text("business.entityType", b.EntityType, maxShort)
	f.digits("business.taxId", b.TaxID, 9, 9)
	f.optional("business.phone", optional.Value(b.Phone), maxPhone)
	switch {
	case strings.TrimSpace(b.Email) == "":
		f.add("business.email", "is required")
	case len(b.Email) > maxEmail || !mailaddr.Valid(b.Email):
		f.add("business.email", "must be a valid email address such as owner@example.com")
	}
	f.optional("business.website", optional.Value(b.Website), maxURL)
	f.text("business.address.line1", b.Address.Line1, maxName)
	f.optional("business.address.line2", optional.Value(b.Address.Line2), maxName)
	f.text("business.address.city", b.Address.City, maxName)
	f.text("business.address.state", b.Address.State, maxShort)
	f.text("business.address.postalCode", b.Address.PostalCode, maxShort)

	switch {
	case len(a.Owners) == 0:
		f.add("owners", "must include at least one owner")
	case len(a.Owners) > MaxOwners:
		f.add("owners", "must be at most %d people", MaxOwners)
	}
	var total apd.Decimal
	sharesValid := true
	for i, o := range a.Owners {
		field := fmt.Sprintf("owners.%d.", i)
		f.text(field+"name", o.Name, maxName)
		f.text(field+"title", o.Title, maxName)
		f.digits(field+"ssn", o.SSN, 9, 9)
		share, ok := o.OwnershipPercent.decimal()
		switch {
		case strings.TrimSpace(string(o.OwnershipPercent)) == "":
			f.add(field+"ownershipPercent", "is required")
			sharesValid = false
		case !ok:
			f.add(field+"ownershipPercent", "must be a number from 0 to 100 with at most 2 decimal places, such as 60 or 33.33")
			sharesValid = false
		default:
			// Shares of at most 100 with 2 places: no context error.
			_, _ = apd.BaseContext.Add(&total, &total, &share)
		}
	}
	if sharesValid && total.Cmp(apd.New(100, 0)) > 0 {
		total.Reduce(&total)
		f.add("owners", "must own at most 100%% together: their ownership percents add up to %s", total.Text('f'))
	}

	f.digits("bank.routingNumber", a.Bank.RoutingNumber, 9, 9)
	if _, ok := f["bank.routingNumber"]; !ok && !abaValid(a.Bank.RoutingNumber) {
		f.add("bank.routingNumber", "must be a valid ABA routing number: its check digit does not match, so one of the 9 digits is wrong")
	}
	f.digits("bank.accountNumber", a.Bank.AccountNumber, 4, 17)
}

// abaValid reports whether nine digits pass the ABA routing number
// checksum: 3, 7 and 1 times the digits in turn add up to a multiple of 10.
func abaValid(digits string) bool {
	sum := 0
	for i, weight := range []int{3, 7, 1, 3, 7, 1, 3, 7, 1} {
		sum += weight * int(digits[i]-'0')
	}
	return sum%10 == 0
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
