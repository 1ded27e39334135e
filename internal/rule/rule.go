// Package rule is the one form of a request the domain refuses: which kind
// of refusal it is, the field it concerns, and words that fit an API client
// and a person reading a web page alike. Every front maps it in one place:
// the API to a problem document, an HTML page to a message beside the field
// (or above the form when it concerns none), each at the status its kind
// has (Kind.Status). Words only one front needs ("list yours with GET
// /accounts") are that front's to add.
//
// A failure of the service itself (the database, the card processor) is
// never a rule.Error: it stays a plain wrapped error.
package rule

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Kind is what sort of refusal an Error is; a front chooses its answer by it.
type Kind int

const (
	// NotFound: no such thing, or one of another organization (the same
	// answer, so that ids of others cannot be probed).
	NotFound Kind = iota + 1
	// Invalid: a value of the request breaks a rule of its own (Field
	// names it); sent again unchanged, it is refused again.
	Invalid
	// Unprocessable: well formed, but a rule refuses it (an unknown or
	// inactive merchant account, a number already used, a limit reached).
	Unprocessable
	// Conflict: the state of what it acts on refuses it now (paid,
	// cancelled, another change under way); later it may be done.
	Conflict
	// KeyReused: an idempotency key sent again with another request.
	KeyReused
	// Forbidden: the caller lacks Permission, which the request needs.
	Forbidden
	// Limited: too many such requests just now; RetryAfter says when
	// one may be made again.
	Limited
	// Busy: what it acts on is taken by another request just now (a card
	// terminal another payment waits on); once that is done it may be.
	Busy
	// Changed: what it acts on is not at the version the request was
	// meant for (If-Match); read it again first.
	Changed
	// Taken: a value that must be unique (a customer's email) is
	// another's already; Existing names that other.
	Taken
)

var kindNames = map[Kind]string{NotFound: "not found", Invalid: "invalid", Unprocessable: "unprocessable",
	Conflict: "conflict", KeyReused: "key reused", Forbidden: "forbidden", Limited: "limited", Busy: "busy", Changed: "changed",
	Taken: "taken"}

// statuses are the HTTP status of each kind, on every front: the API's, as
// openapi.yaml documents them (a state that refuses a change is a 422
// there, as is a key reused), which the pages follow.
var statuses = map[Kind]int{NotFound: http.StatusNotFound, Invalid: http.StatusBadRequest,
	Unprocessable: http.StatusUnprocessableEntity, Conflict: http.StatusUnprocessableEntity,
	KeyReused: http.StatusUnprocessableEntity, Forbidden: http.StatusForbidden, Limited: http.StatusTooManyRequests,
	Busy: http.StatusConflict, Changed: http.StatusPreconditionFailed, Taken: http.StatusConflict}

// Status is the HTTP status of a refusal of kind k; 422 for a kind
// without one.
func (k Kind) Status() int {
	if s, ok := statuses[k]; ok {
		return s
	}
	return http.StatusUnprocessableEntity
}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error is a refusal. Nothing was changed by the request it refuses.
type Error struct {
	Kind Kind
	// Field is the field as the request names it ("amount",
	// "merchantAccountId"), or "" when the refusal concerns no one field.
	Field string
	// Title says what was refused, briefly: "Invoice cannot be sent".
	Title string
	// Message says why, and what can be done, in a sentence or two.
	Message string
	// Suggest is what Field may hold instead, for a form to offer
	// ("40.00": what is left to pay), or "".
	Suggest string
	// Fields are an Invalid refusal's messages by field, as the request
	// names them ("lines[2].quantity"): every value refused at once.
	Fields map[string][]string
	// Permission is what a Forbidden refusal lacks.
	Permission string
	// RetryAfter is when a Limited request may be made again.
	RetryAfter time.Duration
	// Existing is the id of what a Taken value belongs to.
	Existing string
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return e.Title + ": " + e.Message
	}
	var b strings.Builder
	b.WriteString(e.Title)
	for _, f := range slices.Sorted(maps.Keys(e.Fields)) {
		fmt.Fprintf(&b, "; %s: %s", f, strings.Join(e.Fields[f], ", "))
	}
	return b.String()
}

// As is the Error in err's chain, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Is reports whether err holds a refusal of kind k.
func Is(err error, k Kind) bool {
	e := As(err)
	return e != nil && e.Kind == k
}

// New is a refusal of kind k concerning field ("" for none).
func New(k Kind, field, title, message string) *Error {
	return &Error{Kind: k, Field: field, Title: title, Message: message}
}

// Invalid refusals are titled alike: what is wrong is in Fields.
const invalidTitle = "Invalid request"

// InvalidFields is an Invalid refusal of the values in fields (field →
// messages); nil when fields is empty.
func InvalidFields(fields map[string][]string) *Error {
	if len(fields) == 0 {
		return nil
	}
	return &Error{Kind: Invalid, Title: invalidTitle, Message: "Correct the values named and send them again.", Fields: fields}
}

// InvalidField is an Invalid refusal of one field's value.
func InvalidField(field, message string) *Error {
	return InvalidFields(map[string][]string{field: {message}})
}

// Newf is New with the message made by fmt.Sprintf.
func Newf(k Kind, field, title, format string, args ...any) *Error {
	return New(k, field, title, fmt.Sprintf(format, args...))
}
