// Package smtpfake is an SMTP server for fault tests that can be told to
// misbehave: to stall before its greeting or after taking a message (a
// provider slower than any timeout), or to answer a temporary error. It
// keeps what it accepts, by Message-ID and by sender.
//
// It speaks just enough ESMTP for payreq's client: no TLS, no AUTH.
package smtpfake

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Mode is how the server treats a connection that arrives while it is set.
type Mode int32

const (
	// Accept takes every message.
	Accept Mode = iota
	// StallGreeting takes the connection and never says a word.
	StallGreeting
	// StallData reads the whole message and never answers it.
	StallData
	// Temporary answers the message with 451.
	Temporary
	// Down listens nowhere: connections are refused.
	Down
)

// Server is a running fake.
type Server struct {
	Addr string

	t    testing.TB
	mode atomic.Int32
	quit chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	l        net.Listener // nil while Down
	conns    map[net.Conn]bool
	stalled  int
	held     []string // Message-IDs of messages taken and never answered
	received []Mail
}

// Mail is one accepted message.
type Mail struct {
	From      string
	To        []string
	MessageID string
	Subject   string
	// Text is the message's text/plain part, decoded, as a person reads it;
	// HTML its text/html part, decoded.
	Text string
	HTML string
	// Attachments are the files attached, decoded, by file name.
	Attachments map[string][]byte
	// Raw is the message as it arrived.
	Raw []byte
}

// Start runs a server on a loopback port until the test ends.
func Start(t testing.TB, mode Mode) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: l.Addr().String(), t: t, quit: make(chan struct{}), conns: map[net.Conn]bool{}}
	s.l = l
	s.wg.Add(1)
	go s.serve(l)
	s.SetMode(mode)
	t.Cleanup(s.Close)
	return s
}

// SetMode changes how later connections (and messages of open ones) are
// treated. Down closes the port; another mode opens it again, on the same
// address.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode.Store(int32(m))
	switch {
	case m == Down && s.l != nil:
		s.l.Close()
		s.l = nil
	case m != Down && s.l == nil:
		l, err := net.Listen("tcp", s.Addr)
		if err != nil {
			s.t.Errorf("smtpfake: listen again on %s: %v", s.Addr, err)
			return
		}
		s.l = l
		s.wg.Add(1)
		go s.serve(l)
	}
}

// URL is PAYREQ_SMTP_URL for this server with the given sender.
func (s *Server) URL(from string) string { return "smtp://" + s.Addr + "?tls=none&from=" + from }

// Received is every accepted message, in order.
func (s *Server) Received() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.received...)
}

// ByMessageID counts accepted messages per Message-ID.
func (s *Server) ByMessageID() map[string]int {
	n := map[string]int{}
	for _, m := range s.Received() {
		n[m.MessageID]++
	}
	return n
}

// Held is the Message-ID of every message the server took in whole and
// never answered (StallData).
func (s *Server) Held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.held...)
}

// Stalled is how many connections are stalled now.
func (s *Server) Stalled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalled
}

// Close stops the server and drops every connection, stalled ones included.
func (s *Server) Close() {
	select {
	case <-s.quit:
		return
	default:
	}
	close(s.quit)
	s.mu.Lock()
	if s.l != nil {
		s.l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) serve(l net.Listener) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		select {
		case <-s.quit:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.session(c)
		}()
	}
}

// stall holds the connection until the client gives up or the server closes.
func (s *Server) stall(c net.Conn) {
	s.mu.Lock()
	s.stalled++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.stalled--
		s.mu.Unlock()
	}()
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

func (s *Server) session(c net.Conn) {
	if Mode(s.mode.Load()) == StallGreeting {
		s.stall(c)
		return
	}
	tp := textproto.NewConn(c)
	reply := func(format string, args ...any) bool { return tp.PrintfLine(format, args...) == nil }
	if !reply("220 localhost ESMTP smtpfake") {
		return
	}
	var from string
	var to []string
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			if !reply("250-localhost\r\n250-8BITMIME\r\n250 PIPELINING") {
				return
			}
		case "RCPT":
			// RCPT TO:<dana@example.com>
			if _, addr, ok := strings.Cut(arg, "<"); ok {
				addr, _, _ = strings.Cut(addr, ">")
				to = append(to, addr)
			}
			if !reply("250 OK") {
				return
			}
		case "HELO", "NOOP":
			if !reply("250 OK") {
				return
			}
		case "RSET":
			from, to = "", nil
			if !reply("250 OK") {
				return
			}
		case "MAIL":
			// MAIL FROM:<billing@example.com> BODY=8BITMIME
			from, to = "", nil
			if _, addr, ok := strings.Cut(arg, "<"); ok {
				from, _, _ = strings.Cut(addr, ">")
			}
			if !reply("250 OK") {
				return
			}
		case "DATA":
			if !reply("354 End data with <CR><LF>.<CR><LF>") {
				return
			}
			raw, err := io.ReadAll(tp.DotReader())
			if err != nil {
				return
			}
			m := parse(raw)
			id := m.MessageID
			switch Mode(s.mode.Load()) {
			case StallData, StallGreeting:
				s.mu.Lock()
				s.held = append(s.held, id)
				s.mu.Unlock()
				s.stall(c)
				return
			case Temporary:
				if !reply("451 4.3.0 Try again later") {
					return
				}
			default:
				s.mu.Lock()
				m.From, m.To = from, to
				s.received = append(s.received, m)
				s.mu.Unlock()
				if !reply("250 OK queued") {
					return
				}
			}
		case "QUIT":
			reply("221 Bye")
			return
		default:
			if !reply("502 5.5.2 Command not recognized") {
				return
			}
		}
	}
}

// parse reads a whole message's Message-ID, Subject and text/plain part
// (the whole body when it is not multipart), the PDFs attached, and keeps
// the raw message.
func parse(raw []byte) Mail {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Mail{}
	}
	m := Mail{MessageID: strings.TrimSpace(msg.Header.Get("Message-Id")), Raw: raw, Attachments: map[string][]byte{}}
	m.Subject, _ = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	mediaType, params, _ := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if !strings.HasPrefix(mediaType, "multipart/") {
		b, _ := io.ReadAll(decoded(msg.Header.Get("Content-Transfer-Encoding"), msg.Body))
		m.Text = string(b)
		return m
	}
	m.readParts(msg.Body, params["boundary"])
	return m
}

// readParts reads the parts of a multipart body, and those of the
// multipart parts within (multipart/alternative inside multipart/mixed).
func (m *Mail) readParts(r io.Reader, boundary string) {
	parts := multipart.NewReader(r, boundary)
	for {
		part, err := parts.NextPart() // undoes quoted-printable
		if err != nil {
			return
		}
		ct, params, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		switch {
		case strings.HasPrefix(ct, "multipart/"):
			m.readParts(part, params["boundary"])
		case part.FileName() != "":
			b, _ := io.ReadAll(decoded(part.Header.Get("Content-Transfer-Encoding"), part))
			m.Attachments[part.FileName()] = b
		case ct == "text/plain" && m.Text == "":
			b, _ := io.ReadAll(decoded(part.Header.Get("Content-Transfer-Encoding"), part))
			m.Text = string(b)
		case ct == "text/html" && m.HTML == "":
			b, _ := io.ReadAll(decoded(part.Header.Get("Content-Transfer-Encoding"), part))
			m.HTML = string(b)
		}
	}
}

func decoded(encoding string, r io.Reader) io.Reader {
	switch strings.ToLower(encoding) {
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, r)
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	}
	return r
}
