package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/httpx"
)

type ctxKey int

const (
	principalKey ctxKey = iota
	clientKey
)

// client is what the token endpoint needs to know of the caller beyond the body.
type client struct {
	address              string
	basicID, basicSecret string
	basic                bool
}

func principalFrom(ctx context.Context) auth.Principal {
	p, _ := ctx.Value(principalKey).(auth.Principal)
	return p
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// requestLog gives every request an id (the caller's X-Request-Id when it is
// sane), echoes it back, and logs one line per request. The logged path is
// the route's template when there is one, so a pay link's token never
// reaches the log.
func (s *Server) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !requestIDPattern.MatchString(id) {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		path := c.Path()
		if path == "" || c.Response().Status == http.StatusNotFound && !strings.Contains(path, ":") {
			path = c.Request().URL.Path
		}
		// Attrs, not alternating keys and values: one allocation, not one per value.
		attrs := make([]slog.Attr, 0, 8)
		attrs = append(attrs, slog.String("request_id", id), slog.String("method", c.Request().Method),
			slog.String("path", path), slog.Int("status", c.Response().Status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000), slog.String("client", c.RealIP()))
		if p := principalFrom(c.Request().Context()); p.KeyID != "" {
			attrs = append(attrs, slog.String("key_id", p.KeyID))
		}
		level := slog.LevelInfo
		if c.Response().Status >= 500 {
			level = slog.LevelError
			if err != nil {
				attrs = append(attrs, slog.String("error", err.Error()))
			}
		}
		s.log.LogAttrs(c.Request().Context(), level, "request", attrs...)
		return nil
	}
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

// limitBody refuses bodies over maxBody bytes with 413, before anything reads them.
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > maxBody {
			return httpx.PayloadTooLarge(maxBody)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxBody)
		return next(c)
	}
}

const maxBody = 1 << 20

// deadline gives every request at most requestTimeout, so that a database
// that is down or stuck gets the caller a 503 in bounded time rather than a
// hung request. Paying is the exception: it bounds its own work, since a
// charge under way must finish and be recorded whatever the request's fate.
func (s *Server) deadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if s.requestTimeout <= 0 || r.Method == http.MethodPost && c.Path() == "/pay/:token" {
			return next(c)
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.requestTimeout)
		defer cancel()
		c.SetRequest(r.WithContext(ctx))
		return next(c)
	}
}

// authenticate checks the bearer token of every operation that needs a
// permission (taken from the spec's security requirements), then the key's
// rate limit. The token endpoint gets the client's address and any HTTP
// Basic credentials instead.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if c.Path() == "/oauth/token" {
			cl := client{address: c.RealIP()}
			cl.basicID, cl.basicSecret, cl.basic = r.BasicAuth()
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), clientKey, cl)))
			return next(c)
		}
		permission, ok := s.permissions[r.Method+" "+c.Path()]
		if !ok {
			return next(c)
		}
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
			return &httpx.Problem{Kind: httpx.KindForbidden, Status: http.StatusForbidden, Title: "Organization suspended",
				Detail: "Your organization is suspended; contact support."}
		case err != nil:
			return err
		}
		if !slices.Contains(p.Permissions, permission) {
			return &httpx.Problem{Kind: httpx.KindForbidden, Status: http.StatusForbidden, Title: "Permission required",
				Detail: fmt.Sprintf("This request needs the %s permission, which the API key does not have.", permission)}
		}
		if wait := s.limiter.wait(p.KeyID); wait > 0 {
			return tooManyRequests(wait)
		}
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), principalKey, p)))
		return next(c)
	}
}

func unauthorized(title, detail, challenge string) *httpx.Problem {
	return &httpx.Problem{Kind: httpx.KindUnauthorized, Status: http.StatusUnauthorized, Title: title, Detail: detail,
		Headers: http.Header{"Www-Authenticate": {challenge}}}
}

func tooManyRequests(wait time.Duration) *httpx.Problem {
	secs := int(math.Ceil(wait.Seconds()))
	return &httpx.Problem{Kind: httpx.KindRateLimited, Status: http.StatusTooManyRequests, Title: "Too many requests",
		Detail:  fmt.Sprintf("This API key sent too many requests; retry after %d seconds.", secs),
		Headers: http.Header{"Retry-After": {strconv.Itoa(secs)}}}
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
