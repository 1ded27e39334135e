// Package api implements the generated strict server interface: it decodes
// what the validator let through, calls the domain, and encodes the answer.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"
	echomiddleware "github.com/oapi-codegen/echo-middleware"
	"golang.org/x/time/rate"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/docs"
	"github.com/payreq/payreq/internal/httpx"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/paypage"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/reseller"
)

// Server implements gen.StrictServerInterface.
type Server struct {
	log       *slog.Logger
	db        *sqlx.DB
	auth      *auth.Service
	directory *directory.Directory
	invoices  *invoice.Store
	payments  *payment.Service
	// Reseller partners' reads.
	portfolio    *reseller.Portfolio
	applications *reseller.Applications
	publicURL    string
	// permissions maps "METHOD /echo/path" to the permission the
	// operation's security requirement names in openapi.yaml.
	permissions map[string]string
	// operations holds every "METHOD /echo/path" the spec describes.
	operations map[string]bool
	limiter    *keyLimiter
	// requestTimeout bounds each API request, its database work included.
	requestTimeout time.Duration
}

var _ gen.StrictServerInterface = (*Server)(nil)

var defineFormats sync.Once

// New builds the HTTP handler: request id and log, security headers, body
// limit, authentication, request validation against openapi.yaml, then the
// strict handlers. Every error leaves through one problem writer.
func New(a *app.App, log *slog.Logger) (http.Handler, error) {
	defineFormats.Do(func() {
		openapi3.DefineStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))
		openapi3.DefineStringFormatValidator("email", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForEmail))
	})
	spec, err := gen.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("api: load embedded spec: %w", err)
	}
	s := &Server{
		log:            log,
		db:             a.DB,
		auth:           a.Auth,
		directory:      a.Directory,
		invoices:       a.Invoices,
		payments:       a.Payments,
		portfolio:      a.Portfolio,
		applications:   a.Applications,
		publicURL:      a.Config.PublicURL,
		permissions:    map[string]string{},
		operations:     map[string]bool{},
		limiter:        &keyLimiter{limit: rate.Limit(a.Config.RateLimit), burst: a.Config.RateBurst, keys: map[string]*rate.Limiter{}},
		requestTimeout: a.Config.RequestTimeout,
	}
	for path, item := range spec.Paths.Map() {
		echoPath := toEchoPath(path)
		for method, op := range item.Operations() {
			s.operations[method+" "+echoPath] = true
			if op.Security == nil {
				continue
			}
			for _, req := range *op.Security {
				if scopes := req["oauth2"]; len(scopes) == 1 {
					s.permissions[method+" "+echoPath] = scopes[0]
				}
			}
		}
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = echo.ExtractIPDirect()
	if proxies := a.Config.TrustedProxies; len(proxies) > 0 {
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range proxies {
			opts = append(opts, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	}
	e.Use(s.requestLog, recoverPanic, secureHeaders, limitBody, s.deadline, s.authenticate, s.wellFormedText)
	validate := a.Config.ValidateRequests
	e.Use(requestValidator(spec, &echomiddleware.Options{
		Options: openapi3filter.Options{
			MultiError:         true,
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			// The handlers bind the body the validator checked, member names
			// matched exactly: {"memo": null, "Memo": "…"} stores null, not
			// an unchecked "Memo" matched without regard to case.
			KeepValidatedValue: true,
		},
		// The token endpoint answers its own OAuth errors; routes the spec
		// does not describe get echo's 404 and 405. PAYREQ_VALIDATE_REQUESTS
		// =false (benchmarks only) skips everything.
		Skipper: func(c echo.Context) bool {
			return !validate || c.Path() == "/oauth/token" || !s.operations[c.Request().Method+" "+c.Path()]
		},
		MultiErrorHandler: func(me openapi3.MultiError) *echo.HTTPError {
			p := httpx.FromValidation(me)
			return &echo.HTTPError{Code: p.Status, Internal: p}
		},
		ErrorHandler: func(_ echo.Context, err *echo.HTTPError) error { return err },
	}))
	gen.RegisterHandlers(e, gen.NewStrictHandler(s, nil))
	paypage.Register(e, paypage.Deps{Invoices: a.Invoices, Payments: a.Payments, FormKey: a.PayPageKey, Now: a.Now})
	if err := docs.Register(e, s.publicURL); err != nil {
		return nil, err
	}
	return e, nil
}

func toEchoPath(p string) string {
	var b strings.Builder
	for _, seg := range strings.Split(p, "/")[1:] {
		b.WriteByte('/')
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			seg = ":" + seg[1:len(seg)-1]
		}
		b.WriteString(seg)
	}
	return b.String()
}

func recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// handleError is the one place errors become answers: problem documents,
// or OAuth error bodies on the token endpoint.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := toProblem(err)
	// A request that ran out of its time failed for want of the database,
	// whatever error that surfaced as.
	if p.Status == http.StatusInternalServerError && errors.Is(c.Request().Context().Err(), context.DeadlineExceeded) {
		p = httpx.Unavailable()
	}
	// Only the token operation (POST) answers OAuth bodies; another method
	// on its path is a 405 like any other.
	if c.Path() == "/oauth/token" && c.Request().Method == http.MethodPost && p.Status < 500 {
		for k, vs := range p.Headers {
			c.Response().Header()[k] = vs
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		_ = c.JSON(p.Status, gen.TokenError{Error: gen.TokenErrorErrorInvalidRequest, ErrorDescription: p.Title + ": " + p.Detail})
		return
	}
	_ = httpx.Write(c.Response(), s.publicURL, p)
}

func toProblem(err error) *httpx.Problem {
	var p *httpx.Problem
	if errors.As(err, &p) {
		return p
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return httpx.PayloadTooLarge(tooLarge.Limit)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return &httpx.Problem{Kind: httpx.KindNotFound, Status: he.Code, Title: "Not found",
				Detail: "No resource at this address; see /openapi.yaml for the API's paths."}
		case http.StatusMethodNotAllowed:
			return &httpx.Problem{Kind: httpx.KindMethodNotAllowed, Status: he.Code, Title: "Method not allowed",
				Detail: "This address does not take this HTTP method; the Allow header lists those it takes."}
		case http.StatusRequestEntityTooLarge:
			return httpx.PayloadTooLarge(maxBody)
		case http.StatusUnsupportedMediaType:
			return &httpx.Problem{Kind: httpx.KindUnsupportedMediaType, Status: he.Code, Title: "Unsupported media type",
				Detail: "Send the body as application/json."}
		}
		if he.Code >= 400 && he.Code < 500 {
			// Binding failures the validator did not already catch (such as
			// a body that is not JSON).
			return httpx.Validation("body", fmt.Sprint(he.Message))
		}
	}
	if postgres.Unavailable(err) {
		return httpx.Unavailable()
	}
	return &httpx.Problem{Kind: httpx.KindInternal, Status: http.StatusInternalServerError, Title: "Internal error",
		Detail: "The service failed to answer this request; it has been logged. Retry later."}
}

// problemBody is the generated form of a problem, for typed responses.
func (s *Server) problemBody(p *httpx.Problem) gen.Problem {
	body := gen.Problem{Type: httpx.TypeURI(s.publicURL, p.Kind), Title: p.Title, Status: int32(p.Status), Detail: p.Detail}
	if p.Errors != nil {
		body.Errors = &p.Errors
	}
	return body
}
