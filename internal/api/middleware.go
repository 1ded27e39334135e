package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/munnerz/goautoneg"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.21.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/requestlog"
	"github.com/payreq/payreq/internal/tracing"
)

type ctxKey int

const (
	principalKey ctxKey = iota
	clientKey
	pdfKey
	patchBodyKey
)

// withPatchBody keeps a PATCH's JSON body for its handler (patched).
func withPatchBody(ctx context.Context, body []byte) context.Context {
	return context.WithValue(ctx, patchBodyKey, body)
}

// patched are the members a PATCH's JSON body gives, null ones included:
// what a merge patch changes. The validator has let only an object through.
func patched(ctx context.Context) map[string]bool {
	body, _ := ctx.Value(patchBodyKey).([]byte)
	var members map[string]json.RawMessage
	_ = json.Unmarshal(body, &members)
	given := make(map[string]bool, len(members))
	for name := range members {
		given[name] = true
	}
	return given
}

// client is what the token endpoint needs to know of the caller beyond the body.
type client struct {
	basicID, basicSecret string
	basic                bool
}

func principalFrom(ctx context.Context) auth.Principal {
	p, _ := ctx.Value(principalKey).(auth.Principal)
	return p
}

// negotiate notes, for an operation that answers a PDF document too,
// whether the request's Accept prefers application/pdf to
// application/json (by order or q value); anything else gets JSON.
func negotiate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if goautoneg.Negotiate(r.Header.Get("Accept"), []string{"application/json", "application/pdf"}) == "application/pdf" {
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), pdfKey, true)))
		}
		return next(c)
	}
}

// acceptsPDF says whether the request prefers a PDF document (negotiate).
func acceptsPDF(ctx context.Context) bool {
	pdf, _ := ctx.Value(pdfKey).(bool)
	return pdf
}

// secureHeaders are on every API answer.
func secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// refuseAmbiguous answers 400 to a request framed with both
// Content-Length and Transfer-Encoding, on any path, and closes the
// connection after it (RFC 9112 §6.1).
func refuseAmbiguous(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !framing.Ambiguous(c.Request()) {
			return next(c)
		}
		c.Response().Header().Set("Connection", "close")
		return invalidField("header.Transfer-Encoding", "must not be sent with Content-Length: send one or the other")
	}
}

// limitBody refuses bodies over maxBody bytes with 413, before anything reads them.
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > maxBody {
			return payloadTooLarge(maxBody)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxBody)
		return next(c)
	}
}

const maxBody = 1 << 20

// maxTokenBody bounds the token request's body: a grant and a key's id
// and secret need a few hundred bytes.
const maxTokenBody = 4 << 10

// tokenRequest counts a token request against its address's limit (an
// IPv6 address's /64) before anything of it is read, so that every request
// counts, malformed ones included; then it bounds the body and hands the
// handler any HTTP Basic credentials.
func (s *Server) tokenRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if err := s.auth.CountTokenRequest(r.Context(), framing.Network(c.RealIP())); err != nil {
			return err
		}
		if r.ContentLength > maxTokenBody {
			return payloadTooLarge(maxTokenBody)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxTokenBody)
		var cl client
		cl.basicID, cl.basicSecret, cl.basic = r.BasicAuth()
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), clientKey, cl)))
		return next(c)
	}
}

// authenticate checks the bearer token of an operation that needs
// permission, then the key's rate limit.
func (s *Server) authenticate(permission string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			header := r.Header.Get("Authorization")
			scheme, token, _ := strings.Cut(header, " ")
			if header == "" || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
				return unauthorized("Missing access token", "Send Authorization: Bearer <access token>; obtain one at POST /oauth/token.", `Bearer realm="payreq"`)
			}
			p, err := s.auth.Authenticate(r.Context(), strings.TrimSpace(token))
			switch {
			case errors.Is(err, auth.ErrTokenExpired):
				return unauthorized("Access token expired", "Obtain a new access token at POST /oauth/token.", `Bearer realm="payreq", error="invalid_token", error_description="The access token expired"`)
			case errors.Is(err, auth.ErrTokenInvalid):
				return unauthorized("Invalid access token", "The access token is malformed, not signed by payreq, or not meant for this API; obtain a new one at POST /oauth/token.", `Bearer realm="payreq", error="invalid_token"`)
			case errors.Is(err, auth.ErrKeyRevoked):
				return unauthorized("API key revoked", "The API key of this token was revoked; use another key.", `Bearer realm="payreq", error="invalid_token", error_description="API key revoked"`)
			case errors.Is(err, auth.ErrOrganizationSuspended):
				return forbidden("Organization suspended", "Your organization is suspended; contact support.")
			case err != nil:
				return err
			}
			requestlog.SetKeyID(c, p.KeyID)
			if !slices.Contains(p.Permissions, permission) {
				return forbidden("Permission required", fmt.Sprintf("This request needs the %s permission, which the API key does not have.", permission))
			}
			if wait := s.limiter.wait(p.KeyID); wait > 0 {
				s.metrics.RateLimited.Inc()
				return tooManyRequests(wait)
			}
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), principalKey, p)))
			return next(c)
		}
	}
}

// keyLimiter is a token bucket per API key, in this process.
type keyLimiter struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	keys  map[string]*rate.Limiter
}

// wait answers how long the key must wait before this request would be
// allowed; 0 means it is allowed now (and counted).
func (l *keyLimiter) wait(keyID string) time.Duration {
	l.mu.Lock()
	lim, ok := l.keys[keyID]
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.keys[keyID] = lim
	}
	l.mu.Unlock()
	now := time.Now()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// measure counts each API request by its operationId (as the route says;
// "unknown" for an address the spec does not describe) and status code,
// times it, and with tracing on runs it in a server span named by the
// operationId (linked to the caller's traceparent, if any:
// tracing.StartServer). It runs
// outermost, so the status is the one sent.
func (s *Server) measure(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		op := s.byRoute[c.Request().Method+" "+c.Path()]
		if op == "" {
			op = "unknown"
		}
		// With tracing off there is no span to start: the no-op one cost a
		// copy of the request, a context and its options, every time.
		var span trace.Span
		if tracing.On() {
			r := c.Request()
			var ctx context.Context
			ctx, span = tracing.StartServer(r.Context(), r.Header, op,
				trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPRoute(c.Path())))
			defer span.End()
			c.SetRequest(r.WithContext(ctx))
		}
		if err := next(c); err != nil {
			c.Error(err)
		}
		status := c.Response().Status
		if span != nil {
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		s.metrics.Requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
		s.metrics.Duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
		return nil
	}
}
