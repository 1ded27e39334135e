package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// Problem kinds; each has the stable type URI {PUBLIC_URL}/problems/{kind},
// listed in openapi.yaml.
const (
	kindValidation           = "validation"
	kindUnauthorized         = "unauthorized"
	kindForbidden            = "forbidden"
	kindNotFound             = "not-found"
	kindMethodNotAllowed     = "method-not-allowed"
	kindRequestTimeout       = "request-timeout"
	kindPayloadTooLarge      = "payload-too-large"
	kindUnsupportedMediaType = "unsupported-media-type"
	kindUnprocessable        = "unprocessable"
	kindConflict             = "conflict"
	kindKeyReused            = "idempotency-key-reused"
	kindPreconditionFailed   = "precondition-failed"
	kindHeadersTooLarge      = "headers-too-large"
	kindRateLimited          = "rate-limited"
	kindNotImplemented       = "not-implemented"
	kindBadGateway           = "bad-gateway"
	kindUnavailable          = "unavailable"
	kindVersionNotSupported  = "http-version-not-supported"
	kindInternal             = "internal"
)

// problem is an error answer (RFC 9457). It is also a Go error, so the
// middleware can return it up through echo to the one place that writes
// it, handleError; handlers answer it as a typed response (see the body
// methods below), so that the compiler checks each status is documented.
type problem struct {
	kind   string
	status int
	title  string
	detail string
	// errors maps a field, named as the client sent it, to messages (400 only).
	errors map[string][]string
	// headers to send with it (WWW-Authenticate, Retry-After).
	headers http.Header
}

func (p *problem) Error() string { return p.title + ": " + p.detail }

// The constructors, one per kind of answer.

// invalid is a 400 with messages keyed by field ("customerEmail",
// "lines[2].quantity", "query.limit", "body"). A field name or message
// longer than maxMessage is cut: none of ours is, but a member's name is
// the client's, a message passed on from a decoder may quote what the
// client sent, and an answer never echoes a megabyte.
func invalid(fields map[string][]string) *problem {
	out := make(map[string][]string, len(fields))
	for field, msgs := range fields {
		for i, m := range msgs {
			msgs[i] = clip.Marked(m, maxMessage)
		}
		out[clip.Marked(field, maxMessage)] = append(out[clip.Marked(field, maxMessage)], msgs...)
	}
	return &problem{kind: kindValidation, status: http.StatusBadRequest, title: "Invalid request",
		detail: "Correct the fields listed in errors and send the request again.", errors: out}
}

const maxMessage = 200

// invalidField is a 400 with one message for one field.
func invalidField(field, message string) *problem {
	return invalid(map[string][]string{field: {message}})
}

func unauthorized(title, detail, challenge string) *problem {
	return &problem{kind: kindUnauthorized, status: http.StatusUnauthorized, title: title, detail: detail,
		headers: http.Header{"Www-Authenticate": {challenge}}}
}

func forbidden(title, detail string) *problem {
	return &problem{kind: kindForbidden, status: http.StatusForbidden, title: title, detail: detail}
}

// notFound answers an id that does not exist or is another organization's:
// the same answer, so that ids of others cannot be probed.
func notFound(what string) *problem {
	return &problem{kind: kindNotFound, status: http.StatusNotFound, title: "Not found",
		detail: "No " + what + " with this id exists in your organization."}
}

func noRoute() *problem {
	return &problem{kind: kindNotFound, status: http.StatusNotFound, title: "Not found",
		detail: "No resource at this address; see /openapi.yaml for the API's paths."}
}

func methodNotAllowed() *problem {
	return &problem{kind: kindMethodNotAllowed, status: http.StatusMethodNotAllowed, title: "Method not allowed",
		detail: "This address does not take this HTTP method; the Allow header lists those it takes."}
}

// bodyUnreadable is a body the client did not send whole: cut off,
// malformed on the wire, or (408) slower than the read timeout.
func bodyUnreadable(e *framing.BodyError) *problem {
	if e.Slow {
		return &problem{kind: kindRequestTimeout, status: http.StatusRequestTimeout, title: "Request timeout",
			detail: "The request body came slower than the server reads. Nothing was changed; send the request again."}
	}
	return invalidField("body", "could not be read: it ended before its length, or its chunked encoding is malformed")
}

func payloadTooLarge(limit int64) *problem {
	return &problem{kind: kindPayloadTooLarge, status: http.StatusRequestEntityTooLarge,
		title: "Request body too large", detail: fmt.Sprintf("The request body must be at most %d bytes.", limit)}
}

func unsupportedMediaType(detail string) *problem {
	return &problem{kind: kindUnsupportedMediaType, status: http.StatusUnsupportedMediaType,
		title: "Unsupported media type", detail: detail}
}

// unprocessable is a 422: understood, but it cannot be done. kind is
// kindUnprocessable or a more precise kind the spec lists.
func unprocessable(kind, title, detail string) *problem {
	return &problem{kind: kind, status: http.StatusUnprocessableEntity, title: title, detail: detail}
}

// refusal is the problem of a request the domain refused (a *rule.Error in
// err's chain), or nil when err holds none: the one mapping of the domain's
// refusals to problems. The words are the domain's, but for what only an
// API client needs: the Idempotency-Key header, and where a field's values
// are listed (apiHints).
func refusal(err error) *problem {
	e := rule.As(err)
	if e == nil {
		return nil
	}
	var p *problem
	switch e.Kind {
	case rule.NotFound:
		p = &problem{kind: kindNotFound, title: "Not found", detail: e.Message}
	case rule.Invalid:
		p = invalid(e.Fields)
	case rule.KeyReused:
		p = unprocessable(kindKeyReused, e.Title,
			"This Idempotency-Key was used in the last 24 hours with a different request; use a new key for a new request.")
	case rule.Forbidden:
		p = forbidden(e.Title, strings.TrimSuffix(e.Message, ".")+", which the API key does not have.")
	case rule.Limited:
		p = limited(e.Message, e.RetryAfter)
	case rule.Busy:
		p = &problem{kind: kindConflict, title: e.Title, detail: e.Message}
	case rule.Changed:
		p = &problem{kind: kindPreconditionFailed, title: e.Title, detail: e.Message}
	default:
		detail := e.Message
		if hint, ok := apiHints[e.Field]; ok {
			detail += " " + hint
		}
		p = unprocessable(kindUnprocessable, e.Title, detail)
	}
	p.status = e.Kind.Status() // the one table, which openapi.yaml documents
	return p
}

// apiHints are what the API adds to a refusal concerning a field: where
// its values are listed.
var apiHints = map[string]string{
	"merchantAccountId": "List yours with GET /accounts.",
	"customerId":        "List yours with GET /customers.",
	"terminalId":        "List yours with GET /terminals.",
	"autoPay.savedCardId": "List the customer's saved cards, and whether each has consent (chargeConsentAt), " +
		"with GET /customers/{id}.",
}

// retryAfter is the Retry-After of a 429, in seconds, for its typed
// response.
func (p *problem) retryAfter() int {
	secs, _ := strconv.Atoi(p.headers.Get("Retry-After"))
	return secs
}

func tooManyRequests(wait time.Duration) *problem {
	return limited("This API key sent too many requests.", wait)
}

// limited is a 429: why, and Retry-After in whole seconds (at least 1).
func limited(why string, wait time.Duration) *problem {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	return &problem{kind: kindRateLimited, status: http.StatusTooManyRequests, title: "Too many requests",
		detail:  fmt.Sprintf("%s Retry after %d seconds.", why, secs),
		headers: http.Header{"Retry-After": {strconv.Itoa(secs)}}}
}

func badGateway(title, detail string) *problem {
	return &problem{kind: kindBadGateway, status: http.StatusBadGateway, title: title, detail: detail}
}

// unavailable is the answer when the database cannot be used just now (it
// is down, restarting, or did not answer within the request's time). The
// request may be sent again; a create retried with its Idempotency-Key is
// made at most once.
func unavailable(detail string) *problem {
	return &problem{kind: kindUnavailable, status: http.StatusServiceUnavailable, title: "Service unavailable",
		detail: detail, headers: http.Header{"Retry-After": {strconv.Itoa(web.RetryAfter)}}}
}

func databaseUnavailable() *problem {
	return unavailable("The service cannot reach its database just now. Retry after Retry-After seconds; a create retried with the same Idempotency-Key is made at most once.")
}

// processorUnavailable is the 503 of an operation whose card processor
// could not be reached, where openapi.yaml documents no other answer.
func processorUnavailable() *problem {
	return unavailable("The service cannot reach the card processor just now. Retry after Retry-After seconds; a request retried with the same Idempotency-Key is made at most once.")
}

func internalError() *problem {
	return &problem{kind: kindInternal, status: http.StatusInternalServerError, title: "Internal error",
		detail: "The service failed to answer this request; it has been logged. Retry later."}
}

// typeURI is the type member of a kind under the public base URL.
func typeURI(publicURL, kind string) string {
	return strings.TrimRight(publicURL, "/") + "/problems/" + kind
}

// body is the problem document itself, for the one encoder (writeProblem)
// and for typed responses.
func (s *Server) body(p *problem) models.Problem { return problemBody(s.publicURL, p) }

func problemBody(publicURL string, p *problem) models.Problem {
	b := models.Problem{Type: typeURI(publicURL, p.kind), Title: p.title, Status: int32(p.status), Detail: p.detail}
	if p.errors != nil {
		b.Errors = &p.errors
	}
	return b
}

// Refusal is the answer to a request net/http refuses before any front
// sees it (framing.Refuser), under publicURL: a problem document, or on the
// token operation (its request line POST /oauth/token) a 400 or 431 as
// the OAuth error invalid_request that its other refusals are.
func Refusal(publicURL string, status int, requestLine string) (contentType string, body []byte) {
	// Its 5xx answers are problem documents, as its 503 is.
	if path, ok := strings.CutPrefix(requestLine, http.MethodPost+" /oauth/token"); ok && (path == "" || path[0] == ' ' || path[0] == '?') && status < 500 {
		b, _ := json.Marshal(models.TokenError{Error: models.TokenErrorErrorInvalidRequest, ErrorDescription: tokenRefusals[status]})
		return "application/json", b
	}
	var p *problem
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		p = &problem{kind: kindHeadersTooLarge, status: status, title: "Request headers too large",
			detail: "The request's headers are over the server's limit. Nothing was changed."}
	case http.StatusNotImplemented:
		p = &problem{kind: kindNotImplemented, status: status, title: "Transfer coding not supported",
			detail: "Send the body with Content-Length, or with Transfer-Encoding: chunked."}
	case http.StatusHTTPVersionNotSupported:
		p = &problem{kind: kindVersionNotSupported, status: status, title: "HTTP version not supported",
			detail: "Send the request as HTTP/1.1."}
	default: // 400
		p = invalidField("request", "could not be read as HTTP/1.1: the request line or a header line is malformed, or a header holds a control character")
		p.detail = "The request could not be read. Nothing was changed; correct it and send it again."
	}
	b, _ := json.Marshal(problemBody(publicURL, p)) // a problem always marshals
	return "application/problem+json", b
}

// tokenRefusals are the error_description of each refusal on the token
// operation.
var tokenRefusals = map[int]string{
	http.StatusBadRequest:                  "The token request could not be read as HTTP/1.1: the request line or a header line is malformed, or a header holds a control character.",
	http.StatusRequestHeaderFieldsTooLarge: "The token request's headers are over the server's limit.",
}

// The typed bodies of the generated responses, one per status.

func (s *Server) badRequest(p *problem) gen.BadRequestApplicationProblemPlusJSONResponse {
	return gen.BadRequestApplicationProblemPlusJSONResponse(s.body(p))
}

func (s *Server) forbiddenBody(p *problem) gen.ForbiddenApplicationProblemPlusJSONResponse {
	return gen.ForbiddenApplicationProblemPlusJSONResponse(s.body(p))
}

func (s *Server) notFoundBody(what string) gen.NotFoundApplicationProblemPlusJSONResponse {
	return s.notFound(notFound(what))
}

func (s *Server) notFound(p *problem) gen.NotFoundApplicationProblemPlusJSONResponse {
	return gen.NotFoundApplicationProblemPlusJSONResponse(s.body(p))
}

func (s *Server) unprocessableBody(p *problem) gen.UnprocessableApplicationProblemPlusJSONResponse {
	return gen.UnprocessableApplicationProblemPlusJSONResponse(s.body(p))
}

func (s *Server) badGatewayBody(p *problem) gen.BadGatewayApplicationProblemPlusJSONResponse {
	return gen.BadGatewayApplicationProblemPlusJSONResponse(s.body(p))
}

// writeProblem sends p as application/problem+json: the one encoder of
// problems that do not leave through a typed response.
func (s *Server) writeProblem(w http.ResponseWriter, p *problem) error {
	for k, vs := range p.headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.status)
	return json.NewEncoder(w).Encode(s.body(p))
}
