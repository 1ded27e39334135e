// Package wire holds what payreq decides about HTTP/1.1 as it arrives on
// the connection, below the fronts: a request whose framing is ambiguous,
// and a body that could not be read because of how the client sent it.
// Both are the client's doing: 400 (408 for a body slower than the read
// timeout), never a 5xx.
package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
)

// Listen wraps l so that each connection watches the header sections its
// client sends; with Configure, Ambiguous can then tell a request's
// handler what net/http hides.
func Listen(l net.Listener) net.Listener { return listener{l} }

// Configure has srv hand each request's connection to Ambiguous. Use it
// with a listener from Listen.
func Configure(srv *http.Server) {
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if wc, ok := c.(*conn); ok {
			return context.WithValue(ctx, connKey{}, wc)
		}
		return ctx
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
type conn struct {
	net.Conn
	ambiguous atomic.Bool

	// Read is called by one goroutine at a time; these are its own.
	line                   [len("transfer-encoding:")]byte
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
			case c.lineLen >= len("transfer-encoding:") && equalFold(c.line[:], "transfer-encoding:"):
				c.sawEncoding = true
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
