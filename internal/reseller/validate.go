package reseller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/payreq/payreq/internal/mailaddr"
)

// InvalidError lists what is wrong with a submitted application, each
// problem naming the field as it is written in the JSON document
// ("business.taxId", "owners[1].ssn"). Messages never repeat a value, so a
// full tax id, social security number or account number cannot leak
// through an error.
type InvalidError struct {
	Problems []string
}

func (e *InvalidError) Error() string {
	return "invalid application: " + strings.Join(e.Problems, "; ")
}

// ParseApplication reads an application document (the JSON form of
// NewApplication), refusing unknown fields, and validates it.
func ParseApplication(data []byte) (NewApplication, error) {
	var app NewApplication
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&app); err != nil {
		return NewApplication{}, &InvalidError{Problems: []string{decodeProblem(err)}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return NewApplication{}, &InvalidError{Problems: []string{"the document must hold one JSON object and nothing after it"}}
	}
	// A missing ownershipPercent would decode as 0, a valid share; insist
	// that it is written out.
	var presence struct {
		Owners []map[string]json.RawMessage `json:"owners"`
	}
	if err := json.Unmarshal(data, &presence); err != nil {
		return NewApplication{}, &InvalidError{Problems: []string{decodeProblem(err)}}
	}
	var missing []string
	for i, o := range presence.Owners {
		if v, ok := o["ownershipPercent"]; !ok || string(bytes.TrimSpace(v)) == "null" {
			missing = append(missing, fmt.Sprintf("owners[%d].ownershipPercent is required", i))
		}
	}
	err := app.Validate()
	var invalid *InvalidError
	switch {
	case err == nil && len(missing) > 0:
		return NewApplication{}, &InvalidError{Problems: missing}
	case errors.As(err, &invalid):
		invalid.Problems = append(missing, invalid.Problems...)
		return NewApplication{}, invalid
	case err != nil:
		return NewApplication{}, err
	}
	return app, nil
}

func decodeProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Sprintf("%s must be a JSON %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("not valid JSON (at byte %d)", syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON (it ends too early)"
	case errors.Is(err, io.EOF):
		return "the document is empty"
	}
	return "not a valid application document: " + strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	case "ptr":
		return "string or null"
	}
	return "value of another type"
}

// Length limits of the free-text fields.
const (
	maxName  = 200
	maxShort = 64
	maxEmail = 254
	maxURL   = 500
	maxPhone = 32
)

// Validate checks every rule of a new application and reports all the
// problems at once.
func (a NewApplication) Validate() error {
	var problems []string
	add := func(field, msg string) { problems = append(problems, field+" "+msg) }
	text := func(field, value string, max int) {
		switch {
		case strings.TrimSpace(value) == "":
			add(field, "is required")
		case utf8.RuneCountInString(value) > max:
			add(field, fmt.Sprintf("must be at most %d characters", max))
		}
	}
	optional := func(field string, value *string, max int) {
		if value != nil && utf8.RuneCountInString(*value) > max {
			add(field, fmt.Sprintf("must be at most %d characters", max))
		}
	}
	digits := func(field, value string, minLen, maxLen int) {
		if isDigits(value) && len(value) >= minLen && len(value) <= maxLen {
			return
		}
		if minLen == maxLen {
			add(field, fmt.Sprintf("must be %d digits, without spaces or dashes", minLen))
		} else {
			add(field, fmt.Sprintf("must be %d to %d digits, without spaces or dashes", minLen, maxLen))
		}
	}

	b := a.Business
	text("business.legalName", b.LegalName, maxName)
	if utf8.RuneCountInString(b.DBAName) > maxName {
		add("business.dbaName", fmt.Sprintf("must be at most %d characters", maxName))
	}
	text("business.entityType", b.EntityType, maxShort)
	digits("business.taxId", b.TaxID, 9, 9)
	optional("business.phone", b.Phone, maxPhone)
	if strings.TrimSpace(b.Email) == "" {
		add("business.email", "is required")
	} else if len(b.Email) > maxEmail || !mailaddr.Valid(b.Email) {
		add("business.email", "must be a valid email address such as owner@example.com")
	}
	optional("business.website", b.Website, maxURL)
	text("business.address.line1", b.Address.Line1, maxName)
	optional("business.address.line2", b.Address.Line2, maxName)
	text("business.address.city", b.Address.City, maxName)
	text("business.address.state", b.Address.State, maxShort)
	text("business.address.postalCode", b.Address.PostalCode, maxShort)

	if len(a.Owners) == 0 {
		add("owners", "must list at least one owner")
	}
	hundred := apd.New(100, 0)
	var total apd.Decimal
	for i, o := range a.Owners {
		field := fmt.Sprintf("owners[%d]", i)
		text(field+".name", o.Name, maxName)
		text(field+".title", o.Title, maxName)
		digits(field+".ssn", o.SSN, 9, 9)
		p := &o.OwnershipPercent.Decimal
		var reduced apd.Decimal
		reduced.Reduce(p)
		switch {
		case p.Negative || p.Cmp(hundred) > 0:
			add(field+".ownershipPercent", "must be between 0 and 100")
		case reduced.Exponent < -2:
			add(field+".ownershipPercent", "must have at most 2 decimal places")
		}
		if _, err := apd.BaseContext.Add(&total, &total, p); err != nil {
			return fmt.Errorf("reseller: unable to add ownership percents: %w", err)
		}
	}
	if total.Cmp(hundred) > 0 {
		add("owners", fmt.Sprintf("ownership percents add up to %s, more than 100", total.Text('f')))
	}

	digits("bank.routingNumber", a.Bank.RoutingNumber, 9, 9)
	digits("bank.accountNumber", a.Bank.AccountNumber, 4, 17)

	if len(problems) > 0 {
		return &InvalidError{Problems: problems}
	}
	return nil
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
