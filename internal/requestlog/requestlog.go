// Package requestlog is what every front of payreq's HTTP server (the API,
// the pay page, the published contract) shares: a request id, one log line
// per request, and recovery from a panicking handler. A line never holds a
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
// request no route took logs its path with any pay token masked.
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
			path := c.Path()
			if path == "" || strings.HasSuffix(path, "*") {
				path = Mask(c.Request().URL.Path)
			}
			// Attrs, not alternating keys and values: one allocation, not one per value.
			attrs := make([]slog.Attr, 0, 8)
			attrs = append(attrs, slog.String("request_id", id), slog.String("method", c.Request().Method),
				slog.String("path", path), slog.Int("status", c.Response().Status),
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
			log.LogAttrs(c.Request().Context(), level, "request", attrs...)
			return nil
		}
	}
}

// Mask is a path as it may be logged: the segment after /pay/ is a pay
// link's token, which is as good as the link itself.
func Mask(path string) string {
	rest, ok := strings.CutPrefix(path, "/pay/")
	if !ok || rest == "" || strings.HasPrefix(rest, "assets/") {
		return path
	}
	if _, after, found := strings.Cut(rest, "/"); found {
		return "/pay/:token/" + after
	}
	return "/pay/:token"
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
