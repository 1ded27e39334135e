// Package httpx holds the HTTP pieces every endpoint shares: problem
// documents (RFC 9457) and the mapping of request validation failures to them.
package httpx

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Problem kinds; each has the stable type URI {PUBLIC_URL}/problems/{kind}.
const (
	KindValidation           = "validation"
	KindUnauthorized         = "unauthorized"
	KindForbidden            = "forbidden"
	KindNotFound             = "not-found"
	KindMethodNotAllowed     = "method-not-allowed"
	KindPayloadTooLarge      = "payload-too-large"
	KindUnsupportedMediaType = "unsupported-media-type"
	KindUnprocessable        = "unprocessable"
	KindIdempotencyKeyReused = "idempotency-key-reused"
	KindRateLimited          = "rate-limited"
	KindBadGateway           = "bad-gateway"
	KindUnavailable          = "unavailable"
	KindInternal             = "internal"
)

// Problem is an error answer. It is also a Go error, so it can travel up
// through echo to the one place that writes it.
type Problem struct {
	Kind   string
	Status int
	Title  string
	Detail string
	// Errors maps a field, named as the client sent it, to messages (400 only).
	Errors map[string][]string
	// Headers to send with it (WWW-Authenticate, Retry-After, Allow).
	Headers http.Header
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// TypeURI is the type member for a kind under the public base URL.
func TypeURI(publicURL, kind string) string {
	return strings.TrimRight(publicURL, "/") + "/problems/" + kind
}

// Body is the problem document itself.
type Body struct {
	Type   string              `json:"type"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Detail string              `json:"detail"`
	Errors map[string][]string `json:"errors,omitempty"`
}

// Write sends p as application/problem+json.
func Write(w http.ResponseWriter, publicURL string, p *Problem) error {
	for k, vs := range p.Headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	return json.NewEncoder(w).Encode(Body{
		Type: TypeURI(publicURL, p.Kind), Title: p.Title, Status: p.Status, Detail: p.Detail, Errors: p.Errors,
	})
}

// Validation is a 400 with one message for one field.
func Validation(field, message string) *Problem {
	return &Problem{
		Kind: KindValidation, Status: http.StatusBadRequest, Title: "Invalid request",
		Detail: "Correct the fields listed in errors and send the request again.",
		Errors: map[string][]string{field: {message}},
	}
}

// UnavailableRetryAfter is the Retry-After of a 503, in seconds: about how
// long a restarting or failing-over database takes to answer again.
const UnavailableRetryAfter = "5"

// Unavailable is the answer when the database cannot be used just now (it is
// down, restarting, or did not answer within the request's time). The
// request may be sent again; a create retried with its Idempotency-Key is
// made at most once.
func Unavailable() *Problem {
	return &Problem{Kind: KindUnavailable, Status: http.StatusServiceUnavailable, Title: "Service unavailable",
		Detail:  "The service cannot reach its database just now. Retry after Retry-After seconds; a create retried with the same Idempotency-Key is made at most once.",
		Headers: http.Header{"Retry-After": {UnavailableRetryAfter}}}
}

// NotFound is the answer for an id that does not exist or is another organization's.
func NotFound(what string) *Problem {
	return &Problem{Kind: KindNotFound, Status: http.StatusNotFound, Title: "Not found",
		Detail: "No " + what + " with this id exists in your organization."}
}
