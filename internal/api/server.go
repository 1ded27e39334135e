// Package api is the API front: it implements the generated strict server
// interface, decoding what the validator let through, calling the domain,
// and encoding the answer. Every error leaves as a problem document
// (problem.go), or as an OAuth error body on the token endpoint.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/mailaddr"
	"github.com/payreq/payreq/internal/metrics"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/recurring"
	"github.com/payreq/payreq/internal/requestlog"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/terminal"
	"github.com/payreq/payreq/internal/web"
	"github.com/payreq/payreq/internal/webhook"
)

// Deps is what the API front uses.
type Deps struct {
	Log       *slog.Logger
	DB        *sqlx.DB // for readiness only
	Auth      *auth.Store
	Directory *directory.Store
	Invoices  *invoice.Store
	Recurring *recurring.Store
	Customers *customer.Store
	Payments  *payment.Store
	Terminals *terminal.Store
	Resellers *reseller.Store
	Events    *event.Store
	Webhooks  *webhook.Store
	Metrics   *metrics.Metrics
	PDFs      *invoicepdf.Documents
	// PublicURL is the base of problem type URIs and of Link headers.
	PublicURL string
	// RateLimit and RateBurst are each API key's token bucket, per instance.
	RateLimit float64
	RateBurst int
	// RequestTimeout bounds each request, its database work included.
	RequestTimeout time.Duration
	// ValidateRequests: benchmarks only turn it off, to price the validator.
	ValidateRequests bool
	// ClientAddress is the client's address, behind trusted proxies too.
	ClientAddress echo.IPExtractor
}

// Server implements gen.StrictServerInterface.
type Server struct {
	log              *slog.Logger
	db               *sqlx.DB
	auth             *auth.Store
	directory        *directory.Store
	invoices         *invoice.Store
	recurring        *recurring.Store
	customers        *customer.Store
	payments         *payment.Store
	terminals        *terminal.Store
	resellers        *reseller.Store
	events           *event.Store
	webhooks         *webhook.Store
	metrics          *metrics.Metrics
	pdfs             *invoicepdf.Documents
	byRoute          map[string]string // "METHOD /echo/:path" → operationId
	publicURL        string
	validateRequests bool
	operations       map[string]*operation // by operationId
	limiter          *keyLimiter
}

var _ gen.StrictServerInterface = (*Server)(nil)

var defineFormats sync.Once

// operations is the table of openapi.yaml's operations, parsed once per
// process (about a second of CPU under the race detector); the servers
// that share it only read it.
var operations = sync.OnceValues(func() (map[string]*operation, error) {
	spec, err := gen.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("api: load embedded spec: %w", err)
	}
	return readOperations(spec)
})

// uuidForm is the text of every uuid input (format: uuid).
const uuidForm = `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`

// New builds the API front: request id and log, security headers, body
// limit and time limit for every request; then, per operation of
// openapi.yaml, authentication with its permission, the text checks and
// request validation; then the strict handlers.
func New(d Deps) (*echo.Echo, error) {
	defineFormats.Do(func() {
		// A uuid is its 8-4-4-4-12 hex form, whatever its version and
		// variant, as integrators' validators read format: uuid; an id of
		// another version is then unknown (404, or 422 in a body), never
		// malformed. kin-openapi's RFC 9562 form demands version 1-8 and
		// the RFC variant.
		openapi3.DefineStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(uuidForm))
		openapi3.DefineStringFormatValidator("email", openapi3.NewCallbackValidator(func(s string) error {
			if !mailaddr.Valid(s) {
				return errors.New("not an email address")
			}
			return nil
		}))
		// A date of the calendar: 2031-02-30 has the form but is no date.
		openapi3.DefineStringFormatValidator("date", openapi3.NewCallbackValidator(func(s string) error {
			_, err := time.Parse(time.DateOnly, s)
			return err
		}))
		// A time of the calendar (no 02-30, no leap second, as the
		// generated binder reads it), whose offset PostgreSQL can hold.
		openapi3.DefineStringFormatValidator("date-time", openapi3.NewCallbackValidator(func(s string) error {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return err
			}
			if _, offset := t.Zone(); offset <= -16*3600 || offset >= 16*3600 {
				return errors.New("offset beyond ±15:59")
			}
			return nil
		}))
	})
	ops, err := operations()
	if err != nil {
		return nil, err
	}
	s := &Server{
		log: d.Log, db: d.DB, auth: d.Auth, directory: d.Directory, invoices: d.Invoices, customers: d.Customers, recurring: d.Recurring, pdfs: d.PDFs, payments: d.Payments,
		terminals: d.Terminals, resellers: d.Resellers, events: d.Events, webhooks: d.Webhooks, metrics: d.Metrics, byRoute: map[string]string{}, publicURL: d.PublicURL,
		validateRequests: d.ValidateRequests, operations: ops,
		limiter: &keyLimiter{limit: rate.Limit(d.RateLimit), burst: d.RateBurst, keys: map[string]*rate.Limiter{}},
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = d.ClientAddress
	for id, op := range ops {
		s.byRoute[op.method+" "+op.path] = id
	}
	e.Use(s.measure, requestlog.Middleware(d.Log), requestlog.Recover, secureHeaders, refuseAmbiguous, web.Deadline(d.RequestTimeout))
	perOperation := map[string][]echo.MiddlewareFunc{}
	for id, op := range ops {
		perOperation[id] = s.operationMiddleware(op)
	}
	gen.RegisterHandlersWithOptions(e, gen.NewStrictHandler(s, nil), gen.RegisterHandlersOptions{OperationMiddlewares: perOperation})
	return e, nil
}

// operationMiddleware is what runs before an operation's handler, in
// order: authentication and, on a POST, a PUT or a PATCH, the body limit (on the
// token endpoint, its address limit and its own body limit), the text
// checks, and request validation. Nothing reads a body before the caller
// is authenticated or, on the token endpoint, counted; nothing reads the
// body of a GET or a DELETE at all.
func (s *Server) operationMiddleware(op *operation) []echo.MiddlewareFunc {
	var chain []echo.MiddlewareFunc
	switch {
	case op.id == "createToken":
		chain = append(chain, s.tokenRequest)
	case op.permission != "":
		chain = append(chain, s.authenticate(op.permission))
	}
	if op.id != "createToken" && (op.method == http.MethodPost || op.method == http.MethodPatch || op.method == http.MethodPut) {
		chain = append(chain, limitBody)
	}
	if op.pdf {
		chain = append(chain, negotiate)
	}
	chain = append(chain, wellFormedText(op))
	if op.id == "updatePaymentRequest" {
		chain = append(chain, keepMembers) // a merge patch: which members were given
	}
	// The token endpoint answers its own OAuth errors.
	if s.validateRequests && op.id != "createToken" {
		chain = append(chain, validateRequest(op))
	}
	return chain
}

// handleError is the one place errors become answers: problem documents,
// or OAuth error bodies on the token endpoint.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	// The token endpoint's own refusals (its address limit) are OAuth errors.
	var te *auth.TokenError
	if errors.As(err, &te) {
		if te.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(te.RetryAfter))
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		_ = c.JSON(te.Status, models.TokenError{Error: models.TokenErrorError(te.Code), ErrorDescription: te.Description})
		return
	}
	p := toProblem(err)
	// A request that ran out of its time failed for want of the database,
	// whatever error that surfaced as.
	if p.status == http.StatusInternalServerError && errors.Is(c.Request().Context().Err(), context.DeadlineExceeded) {
		p = databaseUnavailable()
	}
	// Only the token operation (POST) answers OAuth bodies; another method
	// on its path is a 405 like any other.
	if c.Path() == "/oauth/token" && c.Request().Method == http.MethodPost && p.status < 500 {
		for k, vs := range p.headers {
			c.Response().Header()[k] = vs
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		desc := p.title + ": " + p.detail
		if p.status == http.StatusBadRequest {
			// Our own words: a 400's detail may name fields as sent, and
			// nothing of the request is given back.
			desc = "The token request could not be read: send grant_type, client_id and client_secret as form fields or as a JSON object of strings, as UTF-8 text."
		}
		_ = c.JSON(p.status, models.TokenError{Error: models.TokenErrorErrorInvalidRequest, ErrorDescription: desc})
		return
	}
	_ = s.writeProblem(c.Response(), p)
}

func toProblem(err error) *problem {
	var p *problem
	if errors.As(err, &p) {
		return p
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return payloadTooLarge(tooLarge.Limit)
	}
	var unreadable *framing.BodyError
	if errors.As(err, &unreadable) {
		return bodyUnreadable(unreadable)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return noRoute()
		case http.StatusMethodNotAllowed:
			return methodNotAllowed()
		case http.StatusRequestEntityTooLarge:
			return payloadTooLarge(maxBody)
		case http.StatusUnsupportedMediaType:
			return unsupportedMediaType("Send the body as application/json.")
		}
		if he.Code >= 400 && he.Code < 500 {
			// Binding failures the validator did not already catch (such as
			// a body that is not JSON).
			return invalidField("body", fmt.Sprint(he.Message))
		}
	}
	// A refusal the handler did not list is still its problem, never a 500.
	if p := refusal(err); p != nil {
		return p
	}
	switch web.OutageOf(err) {
	case web.Database:
		return databaseUnavailable()
	case web.Processor:
		return processorUnavailable()
	}
	return internalError()
}
