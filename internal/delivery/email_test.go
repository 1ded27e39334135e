package delivery

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/google/uuid"
)

// smtpServer is a real SMTP server in the test process that keeps what it
// receives.
type smtpServer struct {
	Addr string

	requireAuth bool
	// DATA is answered once mails from holdFor senders have begun (0: at
	// once); open is closed then, or when the server closes.
	holdFor  int
	open     chan struct{}
	openOnce sync.Once

	mu        sync.Mutex
	received  []receivedMail
	authTries int
	senders   map[string]bool
}

type receivedMail struct {
	From string
	To   []string
	TLS  bool
	User string
	Data []byte
}

type smtpServerOptions struct {
	TLS         *tls.Config // offer STARTTLS
	RequireAuth bool        // AUTH PLAIN as user/secret before MAIL
	// HoldFor holds every DATA until mails from this many distinct
	// senders (MAIL FROM) have begun: with 2, a sender's messages wait
	// until the other sender has taken one of its own.
	HoldFor int
}

func startSMTPServer(t *testing.T, opts smtpServerOptions) *smtpServer {
	t.Helper()
	s := &smtpServer{requireAuth: opts.RequireAuth, holdFor: opts.HoldFor, open: make(chan struct{}), senders: map[string]bool{}}
	if s.holdFor == 0 {
		s.release()
	}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{server: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.TLSConfig = opts.TLS
	srv.AllowInsecureAuth = opts.TLS == nil
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = l.Addr().String()
	go srv.Serve(l)
	t.Cleanup(func() {
		s.release()
		srv.Close()
	})
	return s
}

func (s *smtpServer) release() { s.openOnce.Do(func() { close(s.open) }) }

func (s *smtpServer) mails() []receivedMail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]receivedMail(nil), s.received...)
}

// byMessageID counts the mails received per Message-ID header.
func (s *smtpServer) byMessageID(t *testing.T) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, m := range s.mails() {
		n[parseEmail(t, m.Data).Header.Get("Message-Id")]++
	}
	return n
}

type smtpSession struct {
	server *smtpServer
	conn   *smtp.Conn
	user   string
	mail   receivedMail
}

var _ smtp.AuthSession = (*smtpSession)(nil)

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	s.server.mu.Lock()
	s.server.authTries++
	s.server.mu.Unlock()
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "user" || pass != "s3cret/&" {
			return smtp.ErrAuthFailed
		}
		s.user = user
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.server.requireAuth && s.user == "" {
		return smtp.ErrAuthRequired
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.mail = receivedMail{From: from, TLS: isTLS, User: s.user}
	s.server.mu.Lock()
	s.server.senders[from] = true
	if s.server.holdFor > 0 && len(s.server.senders) >= s.server.holdFor {
		s.server.release()
	}
	s.server.mu.Unlock()
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if strings.HasPrefix(to, "nobody@") {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}
	}
	s.mail.To = append(s.mail.To, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	<-s.server.open
	s.mail.Data = b
	s.server.mu.Lock()
	s.server.received = append(s.server.received, s.mail)
	s.server.mu.Unlock()
	return nil
}

func (s *smtpSession) Reset()        { s.mail = receivedMail{} }
func (s *smtpSession) Logout() error { return nil }

type parsedEmail struct {
	Header      mail.Header
	Subject     string
	Plain, HTML string
	// Attachments are the files attached, by file name, decoded.
	Attachments map[string][]byte
	// Inline are the images inside multipart/related, by Content-ID
	// (without its angle brackets), decoded, and their Content-Types.
	Inline      map[string][]byte
	InlineTypes map[string]string
	// Mixed: the alternatives sit inside multipart/mixed.
	Mixed bool
}

// parseEmail reads an RFC 5322 message with a multipart/alternative body,
// alone or inside multipart/related beside inline images, and either
// alone or inside multipart/mixed beside attachments, decoding the parts'
// transfer encoding (mime/multipart decodes quoted-printable itself;
// base64 is decoded here).
func parseEmail(t *testing.T, raw []byte) parsedEmail {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal("parse email:", err)
	}
	p := parsedEmail{Header: msg.Header, Attachments: map[string][]byte{}, Inline: map[string][]byte{}, InlineTypes: map[string]string{}}
	if p.Subject, err = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); err != nil {
		t.Fatal("parse subject:", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/alternative" && mediaType != "multipart/mixed" {
		t.Fatalf("Content-Type %q: want multipart/alternative or multipart/mixed", msg.Header.Get("Content-Type"))
	}
	p.Mixed = mediaType == "multipart/mixed"
	p.readParts(t, msg.Body, params["boundary"])
	if p.Plain == "" || p.HTML == "" {
		t.Fatalf("want a plain-text and an HTML part, got plain %q html %q", p.Plain, p.HTML)
	}
	return p
}

func (p *parsedEmail) readParts(t *testing.T, r io.Reader, boundary string) {
	t.Helper()
	mr := multipart.NewReader(r, boundary)
	for {
		part, err := mr.NextPart() // decodes quoted-printable
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal("parse part:", err)
		}
		var body io.Reader = part
		if strings.EqualFold(part.Header.Get("Content-Transfer-Encoding"), "base64") {
			body = base64.NewDecoder(base64.StdEncoding, part)
		}
		ct, params, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if ct == "multipart/alternative" || ct == "multipart/related" {
			p.readParts(t, part, params["boundary"])
			continue
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal("read part:", err)
		}
		cid := strings.Trim(part.Header.Get("Content-Id"), "<>")
		switch {
		case cid != "" && strings.HasPrefix(part.Header.Get("Content-Disposition"), "inline"):
			p.Inline[cid], p.InlineTypes[cid] = b, ct
		case part.FileName() != "":
			p.Attachments[part.FileName()] = b
		case ct == "text/plain":
			p.Plain = string(b)
		case ct == "text/html":
			p.HTML = string(b)
		}
	}
}

// checkEmailContent checks that both parts tell who bills, what, how much,
// by when and where to pay.
func checkEmailContent(t *testing.T, e parsedEmail, inv invoice, id uuid.UUID) {
	t.Helper()
	if got := e.Header.Get("Message-Id"); got != MessageID(id) || got != "<"+id.String()+"@payreq>" {
		t.Errorf("Message-Id = %q, want %q", got, MessageID(id))
	}
	if to, _ := e.Header.AddressList("To"); len(to) != 1 || to[0].Address != testCustomer {
		t.Errorf("To = %v, want %s", to, testCustomer)
	}
	if rt, _ := e.Header.AddressList("Reply-To"); len(rt) != 1 || rt[0].Address != "shop@dana.example" {
		t.Errorf("Reply-To = %v, want the location's address", rt)
	}
	if want := "Invoice " + inv.Number + " from " + testLocation; e.Subject != want {
		t.Errorf("Subject = %q, want %q", e.Subject, want)
	}
	if from, _ := e.Header.AddressList("From"); len(from) != 1 || from[0].Name != testLocation {
		t.Errorf("From = %v, want the name %q", from, testLocation)
	}
	// Who bills: the location, its organization, its address and email.
	for _, want := range []string{testLocation, "(" + testOrganization + ")", "1 Main St", "Springfield, IL 62701", "shop@dana.example",
		inv.Number, testAmountShown, testDueShown, inv.payLink(), "Dana Scully"} {
		if !strings.Contains(e.Plain, want) {
			t.Errorf("plain part lacks %q:\n%s", want, e.Plain)
		}
	}
	// html/template escaped the location's name.
	for _, want := range []string{"Dana&#39;s Bakery &amp; Café", testOrganization, "Springfield, IL 62701", inv.Number, testAmountShown, testDueShown,
		`href="` + inv.payLink() + `"`} {
		if !strings.Contains(e.HTML, want) {
			t.Errorf("HTML part lacks %q:\n%s", want, e.HTML)
		}
	}
	if strings.Contains(e.HTML, testLocation) {
		t.Errorf("HTML part has the location name unescaped")
	}
}

func TestEmailThroughSMTP(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	srv := startSMTPServer(t, smtpServerOptions{})
	cfg := testConfig(t)
	cfg.SMTPURL = "smtp://" + srv.Addr + "?tls=none&from=billing@example.com"
	inv := newInvoice(t, db)
	id := enqueue(t, db, inv, ChannelEmail, testCustomer)

	run(t, newWorker(t, db, cfg))
	eventually(t, "the email is delivered", delivered(t, db, id))

	mails := srv.mails()
	if len(mails) != 1 {
		t.Fatalf("received %d emails, want 1", len(mails))
	}
	m := mails[0]
	if m.From != "billing@example.com" || len(m.To) != 1 || m.To[0] != testCustomer {
		t.Errorf("envelope from %q to %v, want billing@example.com to %s", m.From, m.To, testCustomer)
	}
	e := parseEmail(t, m.Data)
	checkEmailContent(t, e, inv, id)
	if from, _ := e.Header.AddressList("From"); len(from) != 1 || from[0].Address != "billing@example.com" || from[0].Name != testLocation {
		t.Errorf("From = %v, want %q <billing@example.com>", from, testLocation)
	}
	if r := readOutbox(t, db, id); r.Attempts != 1 || r.LastError.Valid {
		t.Errorf("outbox row = %+v, want one attempt and no error", r)
	}
}

func TestEmailSTARTTLSAndAuth(t *testing.T) {
	t.Parallel()
	serverTLS, roots := selfSignedTLS(t)

	t.Run("authenticates over STARTTLS", func(t *testing.T) {
		t.Parallel()
		db := newDB(t)
		srv := startSMTPServer(t, smtpServerOptions{TLS: serverTLS, RequireAuth: true})
		cfg := testConfig(t)
		// The password needs escaping in the URL, and is taken unescaped.
		cfg.SMTPURL = "smtp://user:s3cret%2F&@" + srv.Addr + "?from=billing@example.com"
		w := newWorker(t, db, cfg)
		w.senders[ChannelEmail].(*smtpSender).tls.RootCAs = roots
		inv := newInvoice(t, db)
		id := enqueue(t, db, inv, ChannelEmail, testCustomer)

		run(t, w)
		eventually(t, "the email is delivered", delivered(t, db, id))
		mails := srv.mails()
		if len(mails) != 1 || !mails[0].TLS || mails[0].User != "user" {
			t.Fatalf("received %+v, want one email over TLS from user", mails)
		}
		checkEmailContent(t, parseEmail(t, mails[0].Data), inv, id)
	})

	t.Run("sends nothing to a server without STARTTLS", func(t *testing.T) {
		t.Parallel()
		db := newDB(t)
		// A downgrade (or a server that never offered TLS): smtp:// without
		// tls=none must not hand the message, pay link and all, over in the clear.
		srv := startSMTPServer(t, smtpServerOptions{})
		cfg := testConfig(t)
		cfg.SMTPURL = "smtp://" + srv.Addr + "?from=billing@example.com"
		cfg.MaxAttempts = 1
		inv := newInvoice(t, db)
		id := enqueue(t, db, inv, ChannelEmail, testCustomer)

		run(t, newWorker(t, db, cfg))
		eventually(t, "the email fails", failed(t, db, id))
		if got := len(srv.mails()); got != 0 {
			t.Errorf("server received %d emails, want none", got)
		}
	})

	t.Run("never sends the password in the clear", func(t *testing.T) {
		t.Parallel()
		db := newDB(t)
		// No STARTTLS, though AUTH is offered.
		srv := startSMTPServer(t, smtpServerOptions{RequireAuth: true})
		cfg := testConfig(t)
		cfg.SMTPURL = "smtp://user:s3cret%2F&@" + srv.Addr + "?from=billing@example.com"
		cfg.MaxAttempts = 1
		inv := newInvoice(t, db)
		id := enqueue(t, db, inv, ChannelEmail, testCustomer)

		run(t, newWorker(t, db, cfg))
		eventually(t, "the email fails", failed(t, db, id))
		srv.mu.Lock()
		defer srv.mu.Unlock()
		if srv.authTries != 0 || len(srv.received) != 0 {
			t.Errorf("server saw %d logins and %d emails, want none", srv.authTries, len(srv.received))
		}
	})
}

func TestEmailRefusedRecipientFailsAtOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	srv := startSMTPServer(t, smtpServerOptions{})
	cfg := testConfig(t)
	cfg.SMTPURL = "smtp://" + srv.Addr + "?tls=none&from=billing@example.com"
	cfg.MaxAttempts = 5
	inv := newInvoice(t, db)
	id := enqueue(t, db, inv, ChannelEmail, "nobody@example.net")

	run(t, newWorker(t, db, cfg))
	eventually(t, "the email fails", failed(t, db, id))
	if r := readOutbox(t, db, id); r.Attempts != 1 {
		t.Errorf("attempts = %d, want 1: a 550 for the recipient is permanent", r.Attempts)
	}
	want := "Email could not be delivered to nobody@example.net after 1 attempt: the mail server answered 550 5.1.1 No such user here."
	if got := readSendProblem(t, db, inv); got != want {
		t.Errorf("send_problem = %q, want %q", got, want)
	}
}

func TestSMTPServerDown(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	sms := startSMSProvider(t)
	cfg := testConfig(t)
	cfg.SMTPURL = "smtp://" + closed + "?tls=none&from=billing@example.com"
	cfg.SMSURL = sms.url()
	cfg.MaxAttempts = 3
	inv := newInvoice(t, db)
	email := enqueue(t, db, inv, ChannelEmail, testCustomer)
	other := newInvoice(t, db)
	text := enqueue(t, db, other, ChannelText, testPhone)

	run(t, newWorker(t, db, cfg))
	eventually(t, "the email fails", failed(t, db, email))

	r := readOutbox(t, db, email)
	if r.Attempts != 3 || r.DeliveredAt.Valid || !r.LastError.Valid {
		t.Errorf("outbox row = %+v, want 3 attempts, not delivered, an error", r)
	}
	// Two backoffs of at least half of 20 ms and 40 ms lay between the tries.
	if took := r.FailedAt.Time.Sub(r.CreatedAt); took < 30*time.Millisecond {
		t.Errorf("failed after %v, want the backoffs (≥ 30ms) between tries", took)
	}
	want := "Email could not be delivered to " + testCustomer + " after 3 attempts: the mail server could not be reached."
	if got := readSendProblem(t, db, inv); got != want {
		t.Errorf("send_problem = %q, want %q", got, want)
	}
	if p := readSendProblem(t, db, other); p != "" {
		t.Errorf("other invoice's send_problem = %q, want none", p)
	}

	// The worker kept delivering other messages, during the retries and after.
	eventually(t, "the text message is delivered", delivered(t, db, text))
	later := enqueue(t, db, other, ChannelText, testPhone)
	eventually(t, "a later text message is delivered", delivered(t, db, later))
}

// A message committed but never delivered (the process died) is delivered by
// the next worker, once; a message whose worker claimed it and died is
// delivered again after the lease, with the same Message-ID.
func TestDeliveryAfterCrash(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	srv := startSMTPServer(t, smtpServerOptions{})
	cfg := testConfig(t)
	cfg.SMTPURL = "smtp://" + srv.Addr + "?tls=none&from=billing@example.com"
	inv := newInvoice(t, db)
	ctx := context.Background()

	// Killed between commit and delivery: no worker ran.
	committed := enqueue(t, db, inv, ChannelEmail, testCustomer)
	stop := run(t, newWorker(t, db, cfg))
	eventually(t, "the committed email is delivered", delivered(t, db, committed))
	time.Sleep(5 * cfg.PollInterval) // room for a wrong second delivery
	stop()
	if got := srv.byMessageID(t); len(got) != 1 || got[MessageID(committed)] != 1 {
		t.Fatalf("received %v, want %s once", got, MessageID(committed))
	}
	var rows int
	if err := db.Get(&rows, `SELECT count(*) FROM outbox WHERE invoice_id = $1`, inv.ID); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Fatalf("%d outbox rows, want 1", rows)
	}

	// Workers that claimed and died: one before sending, one after sending
	// but before recording it. Their lease is short; the next worker takes the
	// messages over when it ends.
	const lease = 500 * time.Millisecond
	dying := newWorker(t, db, cfg)
	unsent := enqueue(t, db, inv, ChannelEmail, testCustomer)
	sent := enqueue(t, db, inv, ChannelEmail, testCustomer)
	claimedAt := time.Now()
	claims, err := dying.claim(ctx, 10, lease)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 2 {
		t.Fatalf("claimed %d messages, want 2", len(claims))
	}
	for _, c := range claims {
		if c.ID != sent {
			continue
		}
		r, err := dying.render(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := dying.senders[ChannelEmail].Send(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	if got := srv.byMessageID(t); got[MessageID(sent)] != 1 {
		t.Fatalf("the dying worker's email did not arrive: %v", got)
	}
	run(t, newWorker(t, db, cfg))
	eventually(t, "both emails are delivered", func() bool {
		return delivered(t, db, unsent)() && delivered(t, db, sent)()
	})
	for _, id := range []uuid.UUID{unsent, sent} {
		r := readOutbox(t, db, id)
		if r.Attempts != 2 {
			t.Errorf("attempts = %d, want 2 (the dead worker's and the redelivery)", r.Attempts)
		}
		if r.DeliveredAt.Time.Before(claimedAt.Add(lease)) {
			t.Errorf("delivered at %v, before the lease ended at %v", r.DeliveredAt.Time, claimedAt.Add(lease))
		}
	}
	time.Sleep(5 * cfg.PollInterval)
	want := map[string]int{MessageID(committed): 1, MessageID(unsent): 1, MessageID(sent): 2}
	got := srv.byMessageID(t)
	if len(got) != len(want) {
		t.Errorf("received Message-IDs %v, want %v", got, want)
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("received %s %d times, want %d", id, got[id], n)
		}
	}
	if err := db.Get(&rows, `SELECT count(*) FROM outbox WHERE invoice_id = $1`, inv.ID); err != nil {
		t.Fatal(err)
	}
	if rows != 3 {
		t.Errorf("%d outbox rows, want 3", rows)
	}
}

// Two workers on one outbox deliver every message once between them, and
// both deliver some.
func TestTwoWorkersShareTheOutbox(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// The server answers no mail until both workers have begun one: the
	// first worker's claims (Concurrency at a time, n in all) wait, leased,
	// while the second takes others. The lease is long, so that a loaded
	// machine's slow start of the second worker times no send out.
	srv := startSMTPServer(t, smtpServerOptions{HoldFor: 2})
	const n = 40
	var ids []uuid.UUID
	for range n / 4 {
		inv := newInvoice(t, db)
		for range 4 {
			ids = append(ids, enqueue(t, db, inv, ChannelEmail, testCustomer))
		}
	}
	for _, from := range []string{"a@example.com", "b@example.com"} {
		cfg := testConfig(t)
		cfg.Lease = 2 * maxSendTimeout
		cfg.SMTPURL = "smtp://" + srv.Addr + "?tls=none&from=" + from
		run(t, newWorker(t, db, cfg))
	}
	eventually(t, "every email is delivered", func() bool {
		var left int
		if err := db.Get(&left, `SELECT count(*) FROM outbox WHERE delivered_at IS NULL`); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
	time.Sleep(100 * time.Millisecond)

	got := srv.byMessageID(t)
	for _, id := range ids {
		if got[MessageID(id)] != 1 {
			t.Errorf("received %s %d times, want once", MessageID(id), got[MessageID(id)])
		}
	}
	if len(got) != n {
		t.Errorf("received %d distinct emails, want %d", len(got), n)
	}
	perWorker := map[string]int{}
	for _, m := range srv.mails() {
		perWorker[m.From]++
	}
	t.Logf("emails per worker: %v", perWorker)
	if perWorker["a@example.com"] == 0 || perWorker["b@example.com"] == 0 {
		t.Errorf("emails per worker: %v, want both workers to have sent some", perWorker)
	}
	var attempts int
	if err := db.Get(&attempts, `SELECT sum(attempts) FROM outbox`); err != nil {
		t.Fatal(err)
	}
	if attempts != n {
		t.Errorf("%d attempts in all, want %d: one claim per message", attempts, n)
	}
}

// selfSignedTLS returns a server configuration for 127.0.0.1 and the pool a
// client needs to trust it.
func selfSignedTLS(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "payreq test SMTP"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, roots
}
