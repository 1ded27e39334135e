package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/tracing"
	gomail "github.com/wneessen/go-mail"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// newEmail builds the RFC 5322 message: a plain-text and an HTML alternative
// (inside multipart/related beside the logo the HTML part shows, when the
// business has one; inside multipart/mixed with the PDF attached, when
// there is one), and a Message-ID derived from the outbox id, so that a repeated delivery is
// recognisably the same message.
//
// The text part is quoted-printable, its links each alone on a short line,
// so that the raw message holds every link whole (a person grepping the
// file finds it); the HTML part, whose lines are long, is base64, which
// breaks nothing a mail client decodes.
func newEmail(m Rendered, from string) (*gomail.Msg, error) {
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := msg.FromFormat(m.FromName, from); err != nil {
		return nil, &ProviderError{Permanent: true, Reason: "the sender address is not valid", Err: err}
	}
	if err := msg.To(m.To); err != nil {
		return nil, &ProviderError{Permanent: true, Reason: "the address is not valid", Err: err}
	}
	if m.ReplyTo != "" {
		// A location's address that does not parse only loses the Reply-To.
		_ = msg.ReplyTo(m.ReplyTo)
	}
	msg.SetMessageIDWithValue(strings.Trim(MessageID(m.ID), "<>"))
	msg.SetDateWithValue(m.Date)
	msg.Subject(m.Subject)
	msg.SetBodyString(gomail.TypeTextPlain, m.Text, gomail.WithPartEncoding(gomail.EncodingQP))
	msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML, gomail.WithPartEncoding(gomail.EncodingB64))
	if l := m.Logo; l != nil {
		if err := msg.EmbedReader("logo.png", bytes.NewReader(l.PNG), gomail.WithFileContentType("image/png"),
			gomail.WithFileContentID("<"+l.ContentID+">")); err != nil {
			return nil, fmt.Errorf("embed the logo: %w", err)
		}
	}
	if a := m.Attachment; a != nil {
		if err := msg.AttachReader(attachmentName(a.Name), bytes.NewReader(a.PDF),
			gomail.WithFileContentType("application/pdf")); err != nil {
			return nil, fmt.Errorf("attach %s: %w", a.Name, err)
		}
	}
	return msg, nil
}

// attachmentName is the file name of a document named name (an invoice
// number): letters, digits, dots, dashes and underscores only, whatever
// the name holds.
func attachmentName(name string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-' || r == '_') {
			return r
		}
		return '_'
	}, name) + ".pdf"
}

// smtpSender sends email through the SMTP server of PAYREQ_SMTP_URL.
type smtpSender struct {
	host    string
	port    int
	ssl     bool // TLS from the first byte (smtps); otherwise STARTTLS, required
	plain   bool // smtp://…?tls=none: no TLS at all, for a local relay without credentials
	user    string
	pass    string
	from    string
	timeout time.Duration
	tls     *tls.Config
}

func newSMTPSender(raw string, timeout time.Duration) (*smtpSender, error) {
	bad := func(why string) error {
		return fmt.Errorf("delivery: PAYREQ_SMTP_URL %s; expected smtp://user:password@host:port?from=billing@example.com", why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, bad("is not a URL")
	}
	s := &smtpSender{host: u.Hostname(), timeout: timeout}
	switch u.Scheme {
	case "smtp":
		s.port = 587
	case "smtps":
		s.ssl, s.port = true, 465
	default:
		return nil, bad("must start with smtp:// or smtps://")
	}
	switch tlsMode := u.Query().Get("tls"); tlsMode {
	case "":
	case "none":
		if u.Scheme != "smtp" || u.User != nil {
			return nil, bad("takes tls=none only as smtp:// without a user or password (a local relay): credentials never cross the network in the clear")
		}
		s.plain = true
	default:
		return nil, bad("has tls=" + tlsMode + "; the only value is none")
	}
	if s.host == "" {
		return nil, bad("has no host")
	}
	if p := u.Port(); p != "" {
		if s.port, err = strconv.Atoi(p); err != nil || s.port < 1 || s.port > 65535 {
			return nil, bad("has a bad port")
		}
	}
	if u.User != nil {
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
	}
	s.from = u.Query().Get("from")
	if s.from == "" && strings.Contains(s.user, "@") {
		s.from = s.user
	}
	if s.from == "" {
		return nil, bad("has no from address")
	}
	if _, err := mail.ParseAddress(s.from); err != nil {
		return nil, bad("has a from address that is not valid")
	}
	s.tls = &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}
	return s, nil
}

func (s *smtpSender) Send(ctx context.Context, m Rendered) (err error) {
	ctx, span := tracing.Tracer().Start(ctx, "smtp send", trace.WithSpanKind(trace.SpanKindClient))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, "not sent")
		}
		span.End()
	}()
	msg, err := newEmail(m, s.from)
	if err != nil {
		return err
	}
	opts := []gomail.Option{
		gomail.WithPort(s.port),
		gomail.WithTimeout(s.timeout),
		gomail.WithTLSConfig(s.tls),
	}
	switch {
	case s.ssl:
		opts = append(opts, gomail.WithSSL())
	case s.plain:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		// A server that does not offer STARTTLS (or whose offer an attacker
		// stripped) gets neither a login nor the message, pay link and all.
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if s.user != "" {
		// The strongest mechanism the server offers, always over TLS.
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.user), gomail.WithPassword(s.pass))
	}
	client, err := gomail.NewClient(s.host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	err = dialAndSend(ctx, client, msg)
	if err != nil && msg.IsDelivered() {
		// The server took the message; only the goodbye failed.
		return nil
	}
	return smtpError(err)
}

// dialAndSend is go-mail's DialAndSendWithContext, except that the
// connection is closed even when the server does not answer QUIT (go-mail
// then leaves it open: a stalled server would collect one per try).
func dialAndSend(ctx context.Context, client *gomail.Client, msg *gomail.Msg) (err error) {
	conn, err := client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return fmt.Errorf("dial failed: %w", err)
	}
	defer func() {
		if closeErr := client.CloseWithSMTPClient(conn); closeErr != nil {
			_ = conn.Close()
			err = errors.Join(err, fmt.Errorf("failed to close connection: %w", closeErr))
		}
	}()
	if err := client.SendWithSMTPClient(conn, msg); err != nil {
		return fmt.Errorf("send failed: %w", err)
	}
	return nil
}

// smtpError classifies a failed send: a 5xx answer to the recipient or the
// content is permanent; anything else (the server unreachable, a 4xx, a
// refused sender or login, which an operator can fix) is worth trying again.
func smtpError(err error) error {
	if err == nil {
		return nil
	}
	var se *gomail.SendError
	if errors.As(err, &se) {
		code := se.ErrorCode()
		permanent := code >= 500 && (se.Reason == gomail.ErrSMTPRcptTo ||
			se.Reason == gomail.ErrSMTPData || se.Reason == gomail.ErrSMTPDataClose)
		reason := "the mail server did not take the message"
		if code == 0 && timedOut(err) {
			reason = "the mail server did not answer in time"
		}
		if code != 0 {
			// SendError's text is "<stage>: <reply>, affected …".
			text, _, _ := strings.Cut(se.Error(), ", affected")
			if _, reply, ok := strings.Cut(text, ": "); ok {
				text = reply
			}
			// The reply is "550 …", its text quoted by newer Go versions.
			if code, msg, ok := strings.Cut(text, " "); ok {
				if unquoted, err := strconv.Unquote(msg); err == nil {
					text = code + " " + unquoted
				}
			}
			reason = "the mail server answered " + clip.Marked(oneLine(text), 200)
		}
		return &ProviderError{Permanent: permanent, Reason: reason, Err: err}
	}
	var te *textproto.Error
	if errors.As(err, &te) {
		return &ProviderError{Reason: fmt.Sprintf("the mail server answered %d %s", te.Code,
			clip.Marked(oneLine(te.Msg), 200)), Err: err}
	}
	return err
}

// timedOut reports whether a failed exchange ran out of time. go-mail's
// SendError does not unwrap its causes, so their text is read too.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		strings.Contains(err.Error(), "i/o timeout")
}

// plainReason says in plain words why a delivery failed, for send_problem.
func plainReason(channel string, err error) string {
	provider := "the mail server"
	if channel == ChannelText {
		provider = "the text message provider"
	}
	var pe *ProviderError
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &pe):
		return pe.Reason
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return provider + " did not answer in time"
	case errors.As(err, &oe) && oe.Op == "dial":
		return provider + " could not be reached"
	default:
		return clip.Marked(oneLine(err.Error()), 200)
	}
}
