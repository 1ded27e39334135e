package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
	echomiddleware "github.com/oapi-codegen/echo-middleware"
)

// validationProblem turns the request validator's errors into one problem:
// 413 when the body was over the limit, 415 for a content type the
// operation does not take, otherwise 400 with errors keyed by field as sent
// ("customerEmail", "lines[2].quantity", "query.limit", "body").
func validationProblem(err error) *problem {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return payloadTooLarge(tooLarge.Limit)
	}
	fields := map[string][]string{}
	add := func(field, msg string) {
		for _, m := range fields[field] {
			if m == msg {
				return
			}
		}
		fields[field] = append(fields[field], msg)
	}
	for _, e := range flatten(err) {
		var re *openapi3filter.RequestError
		if !errors.As(e, &re) {
			add("request", "is invalid")
			continue
		}
		if re.RequestBody != nil && strings.HasPrefix(re.Reason, "header Content-Type has unexpected value") {
			return unsupportedMediaType("Send the body as application/json.")
		}
		prefix := ""
		if p := re.Parameter; p != nil {
			prefix = p.In + "." + p.Name
		}
		if re.Err == nil || errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
			field := prefix
			if field == "" {
				field = "body"
			}
			if re.Err == nil {
				add(field, re.Reason)
			} else {
				add(field, "is required")
			}
			continue
		}
		schemaErrs := schemaErrors(re.Err)
		if len(schemaErrs) == 0 {
			field := prefix
			if field == "" {
				field = "body"
			}
			add(field, plainReason(re.Err))
			continue
		}
		for _, se := range schemaErrs {
			if members := unknownMembers(se); len(members) > 0 {
				for _, m := range members {
					add(join(prefix, append(se.JSONPointer(), m)), unknownField)
				}
				continue
			}
			add(join(prefix, se.JSONPointer()), message(se))
		}
	}
	return invalid(fields)
}

// flatten lists the errors of nested MultiErrors (only those: a
// RequestError wrapping a MultiError stays whole, it names the parameter).
func flatten(err error) []error {
	if me, ok := err.(openapi3.MultiError); ok {
		var out []error
		for _, e := range me {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func schemaErrors(err error) []*openapi3.SchemaError {
	var out []*openapi3.SchemaError
	for _, e := range flatten(err) {
		var se *openapi3.SchemaError
		if errors.As(e, &se) {
			out = append(out, se)
		}
	}
	return out
}

// unknownField is the message of a member the schema does not name: a
// typo must never fall back to a default.
const unknownField = "unknown field: this request takes no member of this name"

// unknownMembers are the members of an object that its schema, closed with
// additionalProperties: false, does not name, when se is about them:
// kin-openapi names them only in its text.
func unknownMembers(se *openapi3.SchemaError) []string {
	object, ok := se.Value.(map[string]any)
	if se.SchemaField != "properties" || !ok || se.Schema == nil || se.Schema.AdditionalProperties.Has == nil || *se.Schema.AdditionalProperties.Has {
		return nil
	}
	var out []string
	for name := range object {
		if _, named := se.Schema.Properties[name]; !named {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// join names a field the way the client wrote it: lines[2].quantity.
func join(prefix string, pointer []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, seg := range pointer {
		if _, err := strconv.Atoi(seg); err == nil && b.Len() > 0 {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

func message(se *openapi3.SchemaError) string {
	s := se.Schema
	// A field described as allOf: [one schema] fails as its schema does.
	if se.SchemaField == "allOf" && s != nil && len(s.AllOf) == 1 && s.AllOf[0].Value != nil {
		s = s.AllOf[0].Value
		if len(s.OneOf) == 2 {
			return decimalMessage
		}
	}
	switch se.SchemaField {
	case "required":
		return "is required"
	case "oneOf", "anyOf":
		if s != nil && len(s.OneOf) == 2 {
			return decimalMessage
		}
		// A nullable decimal: anyOf [Decimal, null].
		if s != nil && len(s.AnyOf) == 2 && s.AnyOf[0].Value != nil && len(s.AnyOf[0].Value.OneOf) == 2 {
			return decimalMessage + ", or null"
		}
	case "nullable":
		return "must not be null"
	case "maxLength":
		if s != nil && s.MaxLength != nil {
			return fmt.Sprintf("must be at most %d characters", *s.MaxLength)
		}
	case "minLength":
		if s != nil && s.MinLength == 1 {
			return "must not be empty"
		}
		if s != nil {
			return fmt.Sprintf("must be at least %d characters", s.MinLength)
		}
	case "maxItems":
		if s != nil && s.MaxItems != nil {
			return fmt.Sprintf("must have at most %d items", *s.MaxItems)
		}
	case "enum":
		if s != nil {
			vals := make([]string, 0, len(s.Enum))
			for _, v := range s.Enum {
				vals = append(vals, fmt.Sprint(v))
			}
			sort.Strings(vals)
			return "must be one of: " + strings.Join(vals, ", ")
		}
	case "format":
		switch {
		case s != nil && s.Format == "date":
			return "must be a date of the calendar, written YYYY-MM-DD"
		case s != nil && s.Format == "date-time":
			return "must be a time of the calendar as RFC 3339 writes it, such as 2025-03-01T09:30:00Z, with an offset from -15:59 to +15:59"
		case s != nil:
			return "must be a valid " + s.Format
		}
	}
	return plainReason(se)
}

func plainReason(err error) string {
	var se *openapi3.SchemaError
	if errors.As(err, &se) && se.Reason != "" {
		return se.Reason
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// decimalMessage explains the number-or-string decimals of requests.
const decimalMessage = "must be a decimal number, given as a JSON number or a string such as \"12.30\""

// validatorOptions are the request validator's: every failure at once,
// authentication left to authenticate, and the handlers binding the body
// the validator checked, member names matched exactly ({"memo": null,
// "Memo": "…"} stores null, not an unchecked "Memo" matched without
// regard to case).
var validatorOptions = &echomiddleware.Options{
	Options: openapi3filter.Options{
		MultiError:         true,
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		KeepValidatedValue: true,
	},
	MultiErrorHandler: func(me openapi3.MultiError) *echo.HTTPError {
		p := validationProblem(me)
		return &echo.HTTPError{Code: p.status, Internal: p}
	},
}

// validateRequest checks every request of op against openapi.yaml like
// echomiddleware.OapiRequestValidatorWithOptions, with op's route from the
// operation table: the middleware's router would match the path against
// the spec's paths again, regular expression by regular expression, a
// third of the validator's cost on a read.
func validateRequest(op *operation) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := echomiddleware.ValidateRequestFromContext(c, echoRoute{c: c, route: op.route}, validatorOptions); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// echoRoute is the route echo matched, as kin-openapi's router would give it.
type echoRoute struct {
	c     echo.Context
	route *routers.Route
}

func (r echoRoute) FindRoute(*http.Request) (*routers.Route, map[string]string, error) {
	names, values := r.c.ParamNames(), r.c.ParamValues()
	params := make(map[string]string, len(names))
	for i, name := range names {
		// Echo gives a path it cannot route to its nearest route, the rest
		// in the last parameter (/locations/x/mids is /locations/:id with
		// id "x/mids"); a path segment is never empty and holds no slash,
		// so such a request matches no operation, as the spec's router says.
		v, err := url.PathUnescape(values[i])
		if err != nil {
			v = values[i]
		}
		if v == "" || strings.Contains(v, "/") {
			return nil, nil, routers.ErrPathNotFound
		}
		params[name] = values[i]
	}
	return r.route, params, nil
}
