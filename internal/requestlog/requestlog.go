// Package requestlog is what every front of payreq's HTTP server (the API,
// the pay page, the portal, the sign-up page, the docs) shares: a request
// id, one log line per request, and recovery from a panicking handler. A line never holds a
// pay link's token, an access token or a body.
package requestlog

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"
)

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// keyIDKey is where a front puts the API key of the request, for its line.
const keyIDKey = "requestlog.key_id"

// SetKeyID names the API key that made the request in its log line.
func SetKeyID(c echo.Context, keyID string) { c.Set(keyIDKey, keyID) }

// Middleware gives every request an id (the caller's X-Request-Id when it
// is sane), echoes it back, hands errors to the front's error handler, and
// logs one line per request. The path logged is the route's template; a
// request no route took is logged as "unmatched", never by its path: an
// address no front knows (//pay/<token>, /PAY/<token>) may hold a pay
// link's token.
func Middleware(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
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
			// Attrs, not alternating keys and values: one allocation, not one per value.
			attrs := make([]slog.Attr, 0, 8)
			attrs = append(attrs, slog.String("request_id", id), slog.String("method", c.Request().Method),
				slog.String("path", route(c)), slog.Int("status", c.Response().Status),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000), slog.String("client", c.RealIP()))
			if keyID, _ := c.Get(keyIDKey).(string); keyID != "" {
				attrs = append(attrs, slog.String("key_id", keyID))
			}
			if sc := trace.SpanContextFromContext(c.Request().Context()); sc.IsValid() {
				attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
			}
			level := slog.LevelInfo
			if c.Response().Status >= 500 {
				level = slog.LevelError
				if err != nil {
					attrs = append(attrs, slog.String("error", err.Error()))
				}
			}
			// As log.LogAttrs, without the caller's program counter that it
			// takes from the stack for every line (a line has no source).
			ctx := c.Request().Context()
			if h := log.Handler(); h.Enabled(ctx, level) {
				r := slog.NewRecord(time.Now(), level, "request", 0)
				r.AddAttrs(attrs...)
				_ = h.Handle(ctx, r)
			}
			return nil
		}
	}
}

// route is the template of the route that took the request, or
// "unmatched" when none did (a front's catch-all, such as the pay page's
// /pay/*, is none).
func route(c echo.Context) string {
	if p := c.Path(); p != "" && !strings.HasSuffix(p, "*") {
		return p
	}
	return "unmatched"
}

// Recover turns a panicking handler into an error for the front's error
// handler (a 500, logged with the panic).
func Recover(next echo.HandlerFunc) echo.HandlerFunc {
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
