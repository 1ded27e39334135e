// Package framing holds what payreq decides about HTTP/1.1 as it arrives on
// the connection, below the fronts: a request whose framing is ambiguous,
// a body that could not be read because of how the client sent it, and a
// request net/http refuses before any front sees it. All are the client's
// doing: 400 (408 for a body slower than the read timeout), never a 5xx.
// It also says how long an idle connection is kept, and which client a
// per-client limit counts.
package framing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Listen wraps l so that each connection watches the header sections its
// client sends; with Configure, Ambiguous can then tell a request's
// handler what net/http hides.
func Listen(l net.Listener) net.Listener { return listener{l} }

// IdleTimeout is how long a kept-alive connection may wait for its next
// request: no longer than a new connection may take to send its first
// request's headers (payreq serve's ReadHeaderTimeout), so that idle
// connections, however many one client keeps open, cost no more than
// connections that never send anything.
const IdleTimeout = 5 * time.Second

// Refuser is a handler that answers, in its own words, the requests
// net/http refuses before any handler runs: 400 (a control character in a
// header, a malformed request line), 431 (headers over the server's
// limit), 501 (an unknown transfer coding) and 505 (an HTTP version other
// than 1.x).
type Refuser interface {
	// Refusal is the media type and body of such an answer. requestLine is
	// the start of the last request line the connection sent (at most
	// maxLine bytes, "" when none was seen): which operation the request
	// was meant for, as far as can be told.
	Refusal(status int, requestLine string) (contentType string, body []byte)
}

// maxLine is how much of each line a connection keeps: a request line's
// method and the start of its target.
const maxLine = 64

// Configure has srv hand each request's connection to Ambiguous, answer
// what net/http refuses by itself with srv.Handler's Refusal when the
// handler is a Refuser (instead of net/http's text/plain), and close
// connections idle for IdleTimeout. Use it with a listener from Listen.
func Configure(srv *http.Server) {
	srv.IdleTimeout = IdleTimeout
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		wc, ok := c.(*conn)
		if !ok {
			return ctx
		}
		wc.refuser, _ = srv.Handler.(Refuser)
		return context.WithValue(ctx, connKey{}, wc)
	}
}

// Ambiguous reports whether r came with both Content-Length and
// Transfer-Encoding. net/http drops the Content-Length and reads the
// chunked body; RFC 9112 §6.1 says such a message "ought to be handled as
// an error" (it is how requests are smuggled past a proxy that reads the
// other header) and the connection closed after the answer.
func Ambiguous(r *http.Request) bool {
	c, _ := r.Context().Value(connKey{}).(*conn)
	return len(r.TransferEncoding) > 0 && c != nil && c.ambiguous.Load()
}

type connKey struct{}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c}, nil
}

// conn notes whether a header section on the connection named both
// Content-Length and Transfer-Encoding. It reads lines, not messages, so
// a body line could look like a header line: that can only refuse a
// chunked request on the same connection, never let an ambiguous one by.
// It also answers net/http's own refusals with refuser's.
type conn struct {
	net.Conn
	ambiguous atomic.Bool
	refuser   Refuser // set before the connection is served
	// requestLine is the start of the last request line read (a string).
	requestLine atomic.Value

	// Read is called by one goroutine at a time; these are its own.
	line                   [maxLine]byte
	lineLen                int
	sawLength, sawEncoding bool
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	for _, b := range p[:n] {
		switch {
		case b == '\n':
			switch {
			case c.lineLen == 0 || c.lineLen == 1 && c.line[0] == '\r':
				c.sawLength, c.sawEncoding = false, false // the end of a section
			case c.lineLen >= len("content-length:") && equalFold(c.line[:len("content-length:")], "content-length:"):
				c.sawLength = true
			case c.lineLen >= len("transfer-encoding:") && equalFold(c.line[:len("transfer-encoding:")], "transfer-encoding:"):
				c.sawEncoding = true
			}
			if line := c.line[:min(c.lineLen, maxLine)]; isRequestLine(line) {
				c.requestLine.Store(string(bytes.TrimSuffix(line, []byte("\r"))))
			}
			if c.sawLength && c.sawEncoding {
				c.ambiguous.Store(true)
			}
			c.lineLen = 0
		default:
			if c.lineLen < len(c.line) {
				c.line[c.lineLen] = b
			}
			c.lineLen++
		}
	}
	return n, err
}

// Write sends p, unless p is one of net/http's own refusals and the
// connection has a refuser: then its answer goes instead.
func (c *conn) Write(p []byte) (int, error) {
	status, ok := refusal(p)
	if !ok || c.refuser == nil {
		return c.Conn.Write(p)
	}
	requestLine, _ := c.requestLine.Load().(string)
	contentType, body := c.refuser.Refusal(status, requestLine)
	// Nothing of a refusal is to be kept: on /oauth/token, no answer is.
	answer := fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), contentType, len(body))
	if _, err := c.Conn.Write(append(answer, body...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// refusalHeaders is the whole header section of every answer net/http
// writes by itself when it refuses a request before any handler runs
// (net/http's errorHeaders, after the status line). An answer a handler
// writes always has more (Date at least), so it is never taken for one.
const refusalHeaders = "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// refusal reports whether p is such an answer, and its status.
func refusal(p []byte) (int, bool) {
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) { // most writes: a body, or not a refusal
		return 0, false
	}
	line, rest, found := bytes.Cut(p, []byte("\r\n"))
	if !found || len(line) < len("HTTP/1.1 400") || !bytes.HasPrefix(rest, []byte(refusalHeaders)) {
		return 0, false
	}
	switch status, _ := strconv.Atoi(string(line[len("HTTP/1.1 "):len("HTTP/1.1 400")])); status {
	case http.StatusBadRequest, http.StatusRequestHeaderFieldsTooLarge, http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return status, true
	}
	return 0, false
}

// isRequestLine reports whether a line (or its first maxLine bytes) has
// the shape of a request line: a method in capitals, a space, and a
// target in origin, absolute or asterisk form. A header line never has it
// (a field name holds no space); a body line may, which can only change
// the words of a refusal on the same connection.
func isRequestLine(line []byte) bool {
	method := 0
	for method < len(line) && 'A' <= line[method] && line[method] <= 'Z' {
		method++
	}
	if method == 0 || method+1 >= len(line) || line[method] != ' ' {
		return false
	}
	switch line[method+1] {
	case '/', '*', 'h', 'H':
		return true
	}
	return false
}

// Network is what a per-client limit counts of a client's address: an
// IPv4 address whole, and of an IPv6 address its /64, which one subscriber
// usually holds whole and may take any address of. Text that is not an
// address is returned as it is.
func Network(address string) string {
	a, err := netip.ParseAddr(address)
	if err != nil {
		return address
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64) // cannot fail for an IPv6 address
	return p.String()
}

// equalFold compares ASCII text without regard to case.
func equalFold(b []byte, s string) bool {
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// BodyError is a request body that could not be read for the client's
// doing: it came slower than the server's read timeout (Slow), or it was
// cut off or malformed on the wire (a bad chunk size, a missing CRLF).
type BodyError struct {
	Slow bool
	Err  error
}

func (e *BodyError) Error() string { return "read request body: " + e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// Body wraps a request body so that its read errors are BodyErrors,
// except the end of the body and http.MaxBytesError (too large is 413).
func Body(body io.ReadCloser) io.ReadCloser {
	if body == nil || body == http.NoBody {
		return body
	}
	return &bodyReader{body}
}

type bodyReader struct{ io.ReadCloser }

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if err == nil || err == io.EOF || errors.As(err, &tooLarge) {
		return n, err
	}
	return n, &BodyError{Slow: errors.Is(err, os.ErrDeadlineExceeded), Err: err}
}
