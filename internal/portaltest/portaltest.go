// Package portaltest drives the portal over HTTP as a browser does: a
// client with a cookie jar that reads each form's CSRF token from the page
// and posts it back, members made with a given role and permissions and
// signed in, and the mail the portal sends, read from an SMTP server in
// the test (internal/smtpfake). It sits beside internal/apitest, whose
// running server (apitest.Env) it uses.
package portaltest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/server"
	"github.com/payreq/payreq/internal/smtpfake"
)

// Client is one browser: its own cookie jar and its own source address.
type Client struct {
	T    testing.TB
	Env  *apitest.Env
	HTTP *http.Client
	// Address is the loopback address its connections come from.
	Address string
}

// NewClient is a browser with no cookies yet.
func NewClient(t testing.TB, env *apitest.Env) *Client {
	t.Helper()
	addr := apitest.SourceAddress()
	hc := apitest.ClientFrom(addr)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc.Jar = jar
	return &Client{T: t, Env: env, HTTP: hc, Address: addr}
}

// Page is an answer of the portal.
type Page struct {
	Status   int
	Header   http.Header
	Body     string
	Location string
}

// Do sends a request as is (no CSRF token added).
func (c *Client) Do(method, path string, form url.Values, header http.Header) Page {
	c.T.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.Env.URL+path, body)
	if err != nil {
		c.T.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.T.Fatal(err)
	}
	return Page{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Location: resp.Header.Get("Location")}
}

// Get opens a page.
func (c *Client) Get(path string) Page {
	c.T.Helper()
	return c.Do(http.MethodGet, path, nil, nil)
}

var csrfPattern = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// CSRF is the CSRF token of the page's forms.
func (p Page) CSRF(t testing.TB) string {
	t.Helper()
	m := csrfPattern.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no CSRF token in the page (%d):\n%s", p.Status, p.Body)
	}
	return m[1]
}

// Submit opens from (a page with a form), reads its CSRF token and posts
// form to action with it, as a browser sends a form it shows.
func (c *Client) Submit(from, action string, form url.Values) Page {
	c.T.Helper()
	page := c.Get(from)
	return c.Post(action, page.CSRF(c.T), form)
}

// Post posts form to path with the CSRF token csrf.
func (c *Client) Post(path, csrf string, form url.Values) Page {
	c.T.Helper()
	f := url.Values{}
	for k, v := range form {
		f[k] = v
	}
	f.Set("csrf", csrf)
	return c.Do(http.MethodPost, path, f, nil)
}

// PostFiles posts form and files (field → file name and contents) to
// path as multipart/form-data with the CSRF token csrf, as a browser
// sends a form with a file field.
func (c *Client) PostFiles(path, csrf string, form url.Values, files map[string]File) Page {
	c.T.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	_ = w.WriteField("csrf", csrf)
	for k, vs := range form {
		for _, v := range vs {
			_ = w.WriteField(k, v)
		}
	}
	for field, f := range files {
		part, err := w.CreateFormFile(field, f.Name)
		if err != nil {
			c.T.Fatal(err)
		}
		_, _ = part.Write(f.Data)
	}
	if err := w.Close(); err != nil {
		c.T.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, c.Env.URL+path, &body)
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	resp, err := c.HTTP.Do(req)
	if err != nil {
		c.T.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.T.Fatal(err)
	}
	return Page{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Location: resp.Header.Get("Location")}
}

// File is a file a form sends.
type File struct {
	Name string
	Data []byte
}

// Want checks a page's status, showing the page when it differs.
func (p Page) Want(t testing.TB, status int) Page {
	t.Helper()
	if p.Status != status {
		t.Fatalf("status %d, want %d; Location %q:\n%s", p.Status, status, p.Location, p.Body)
	}
	return p
}

// WantRedirect checks a 303 to location.
func (p Page) WantRedirect(t testing.TB, location string) Page {
	t.Helper()
	if p.Status != http.StatusSeeOther || p.Location != location {
		t.Fatalf("answered %d to %q, want 303 to %q:\n%s", p.Status, p.Location, location, p.Body)
	}
	return p
}

// Has checks that the page holds each text.
func (p Page) Has(t testing.TB, texts ...string) Page {
	t.Helper()
	for _, s := range texts {
		if !strings.Contains(p.Body, s) {
			t.Errorf("the page lacks %q:\n%s", s, p.Body)
		}
	}
	return p
}

// ErrorBeside checks that field is marked invalid and described by its
// message, which holds text.
func (p Page) ErrorBeside(t testing.TB, field, text string) Page {
	t.Helper()
	input := regexp.MustCompile(`id="` + regexp.QuoteMeta(field) + `"[^>]*aria-describedby="[^"]*` + regexp.QuoteMeta(field) + `-error`)
	msg := regexp.MustCompile(`id="` + regexp.QuoteMeta(field) + `-error">([^<]*)<`).FindStringSubmatch(p.Body)
	if !input.MatchString(p.Body) || msg == nil || !strings.Contains(msg[1], text) {
		t.Errorf("want %q beside %s, tied by aria-describedby:\n%s", text, field, p.Body)
	}
	return p
}

var seq atomic.Int64

// Member is someone made with a role and permissions in org, with a
// password, who signs in right away.
type Member struct {
	MembershipID uuid.UUID
	Email        string
	Password     string
}

// NewMember makes a member of org (an accepted membership and a password).
func NewMember(t testing.TB, env *apitest.Env, org uuid.UUID, role string, permissions ...string) Member {
	t.Helper()
	n := seq.Add(1)
	m := Member{Email: fmt.Sprintf("%s%d-%s@people.example.com", strings.ToLower(role), n, uuid.NewString()[:8]),
		Password: "correct horse battery " + uuid.NewString()[:8]}
	if permissions == nil {
		permissions = []string{}
	}
	id, err := env.App.People.AddMember(context.Background(), org, role+" "+fmt.Sprint(n), m.Email, role, permissions, m.Password)
	if err != nil {
		t.Fatal(err)
	}
	m.MembershipID = id
	return m
}

// SignIn signs the client in with email and password and returns the answer.
func (c *Client) SignIn(email, password string) Page {
	c.T.Helper()
	return c.Submit("/portal/sign-in", "/portal/sign-in", url.Values{"email": {email}, "password": {password}})
}

// SignedIn is a new client signed in as a new member of org with role and
// permissions, at home in the portal.
func SignedIn(t testing.TB, env *apitest.Env, org uuid.UUID, role string, permissions ...string) (*Client, Member) {
	t.Helper()
	m := NewMember(t, env, org, role, permissions...)
	c := NewClient(t, env)
	c.SignIn(m.Email, m.Password).WantRedirect(t, "/portal/")
	return c, m
}

// Mailbox is an SMTP server in the test with a delivery worker sending
// the outbox to it, as payreq serve does.
type Mailbox struct {
	*smtpfake.Server
	t testing.TB
}

// StartMailbox runs the fake SMTP server and a delivery worker on env's
// database until the test ends; the worker logs into env's log. Give the env a database of its own
// (pgtest.NewDatabase), so that its worker takes no other test's mail.
func StartMailbox(t testing.TB, env *apitest.Env) *Mailbox {
	t.Helper()
	srv := smtpfake.Start(t, smtpfake.Accept)
	cfg := env.App.Config
	cfg.SMTPURL, cfg.DeliveryPollInterval = srv.URL("billing@example.com"), 20*time.Millisecond
	w, err := server.Delivery(env.App, cfg, cfg.Logger(env.Log))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &Mailbox{Server: srv, t: t}
}

// Wait is the first mail to address whose subject holds subject,
// waiting up to 10 seconds for it.
func (m *Mailbox) Wait(to, subject string) smtpfake.Mail {
	m.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, mail := range m.Received() {
			if len(mail.To) == 1 && strings.EqualFold(mail.To[0], to) && strings.Contains(mail.Subject, subject) {
				return mail
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.t.Fatalf("no mail to %s about %q within 10 s; got %d mails", to, subject, len(m.Received()))
	return smtpfake.Mail{}
}

var linkPattern = regexp.MustCompile(`https?://\S+/portal/\S+`)

// Link is the portal link in a mail's text, as a path.
func Link(t testing.TB, mail smtpfake.Mail) string {
	t.Helper()
	l := linkPattern.FindString(mail.Text)
	if l == "" {
		t.Fatalf("no portal link in the mail:\n%s", mail.Text)
	}
	u, err := url.Parse(strings.TrimRight(l, "."))
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}
