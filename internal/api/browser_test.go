package api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/emersion/go-smtp"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/pgtest"
)

// TestPayFromEmailInChromium follows an invoice as its customer does: the
// invoice is sent, the delivery worker mails it to an SMTP server in the test,
// the pay link is taken from the mail's text, and Chromium opens it, pays the
// balance by card and shows the receipt, which the API then agrees with. The
// pages run no failing script, keep their Content-Security-Policy and fetch
// nothing from elsewhere. The screenshots go to the test's artifact directory:
// kept with go test -artifacts, else removed like t.TempDir.
func TestPayFromEmailInChromium(t *testing.T) {
	t.Parallel()
	// A database of its own, so that its worker delivers no other test's
	// messages.
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	inbox := startMailbox(t)
	runWorker(t, env, "smtp://"+inbox.addr+"?tls=none&from=billing@example.com")

	m := apitest.NewMerchant(t, env)
	b := m.Body("WEB-1", "125.40", apitest.Line("2", "50.00"), apitest.Line("1", "25.40"))
	b["send"] = true
	inv := m.MustCreate(t, b)
	apitest.WantText(t, "sentVia", (*string)(inv.SentVia), "email")
	if inv.Link == nil {
		t.Fatal("the created invoice has no link")
	}

	var sent receivedMail
	select {
	case sent = <-inbox.received:
	case <-time.After(10 * time.Second):
		t.Fatal("no email arrived within 10 s")
	}
	if len(sent.to) != 1 || sent.to[0] != "dana@example.com" {
		t.Fatalf("email went to %v, want dana@example.com", sent.to)
	}
	link := payLinkIn(t, sent.data)
	if link != *inv.Link {
		t.Errorf("the email links to %s, the invoice's link is %s", link, *inv.Link)
	}

	browser := browsertest.Start(t, env.URL, time.Minute)
	resp, err := chromedp.Run(browser.Tab, chromedp.NavigateResponse(link))
	if err != nil {
		t.Fatalf("open the pay link: %v", err)
	}
	if resp.Status != 200 {
		t.Fatalf("the pay link answered %d", resp.Status)
	}
	wantText(t, browser, "the pay page", "WEB-1", "Balance due $125.40", "Pay by card")
	if amount, err := chromedp.Run(browser.Tab, chromedp.Value("#amount")); err != nil || amount != "125.40" {
		t.Errorf("the amount field holds %q (%v), want the balance 125.40", amount, err)
	}

	err = chromedp.Do(browser.Tab,
		chromedp.SendKeys("#cardholderName", "Dana Whitfield"),
		chromedp.SendKeys("#cardNumber", apitest.CardApprove),
		chromedp.SendKeys("#expiry", env.FutureExpiry()),
		chromedp.SendKeys("#cvv", apitest.TestCVV),
	)
	if err != nil {
		t.Fatalf("fill the form: %v", err)
	}
	browser.FullScreenshot(t, "pay-page.png")
	resp, err = chromedp.RunResponse(browser.Tab, chromedp.Click(`button[type="submit"]`))
	if err != nil {
		t.Fatalf("submit the form: %v", err)
	}
	if resp.Status != 200 {
		t.Fatalf("submitting answered %d, want 200", resp.Status)
	}
	if !strings.HasPrefix(resp.URL, link+"/receipt/") {
		t.Fatalf("submitting led to %s, want the receipt under %s", resp.URL, link)
	}
	browser.FullScreenshot(t, "receipt.png")

	got, raw := m.Read(t, inv.Id)
	apitest.Want(t, "status", got.Status, "paid")
	apitest.Want(t, "amountPaid", got.AmountPaid.Text('f'), "125.40")
	apitest.Want(t, "balance", got.Balance.Text('f'), "0.00")
	apitest.Want(t, "paidAt set", got.PaidAt != nil, true)
	if got.Payments == nil || len(*got.Payments) != 1 {
		t.Fatalf("after paying in the browser, want one payment: %s", raw)
	}
	p := (*got.Payments)[0]
	apitest.Want(t, "payments[0].amount", p.Amount.Text('f'), "125.40")
	apitest.WantText(t, "payments[0].lastFour", p.LastFour, "1111")
	apitest.WantText(t, "payments[0].payerName", p.PayerName, "Dana Whitfield")
	if p.RetRef == nil || *p.RetRef == "" {
		t.Fatalf("payments[0].retRef is empty: %s", raw)
	}
	wantText(t, browser, "the receipt", "Payment received", "Invoice WEB-1", "Amount paid $125.40",
		"Card Visa ending in 1111", "Name on card Dana Whitfield", "Reference "+*p.RetRef,
		"Balance after this payment $0.00")

	for _, v := range browser.Violations() {
		t.Errorf("Content-Security-Policy refused %s", v)
	}
	for _, u := range browser.Foreign() {
		t.Errorf("the page asked for %s, outside this service", u)
	}
	for _, e := range browser.Errors() {
		t.Errorf("browser: %s", e)
	}
}

// wantText checks that the text of the page's main element, whitespace
// collapsed, has every one of want.
func wantText(t *testing.T, b *browsertest.Browser, what string, want ...string) {
	t.Helper()
	text, err := chromedp.Run(b.Tab, chromedp.Text("main"))
	if err != nil {
		t.Fatalf("read %s: %v", what, err)
	}
	text = strings.Join(strings.Fields(text), " ")
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q: %s", what, w, text)
		}
	}
}

// runWorker runs a delivery worker on the env's database, sending email
// through smtpURL, until the test ends.
func runWorker(t *testing.T, env *apitest.Env, smtpURL string) {
	t.Helper()
	w, err := delivery.NewWorker(env.App.DB, delivery.Config{
		Invoices: env.App.Invoices, DataDir: env.App.Config.DataDir, SMTPURL: smtpURL,
		PollInterval: 20 * time.Millisecond,
	}, slog.New(slog.NewTextHandler(t.Output(), nil)), env.Clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

var payLinkLine = regexp.MustCompile(`(?m)^(https?://\S+/pay/\S+)\r?$`)

// payLinkIn is the pay link on a line of its own in the text part of an
// email, as the customer reads it.
func payLinkIn(t *testing.T, raw []byte) string {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal("parse email:", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		t.Fatalf("email Content-Type %q, want multipart", msg.Header.Get("Content-Type"))
	}
	parts := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := parts.NextPart() // undoes quoted-printable
		if errors.Is(err, io.EOF) {
			t.Fatalf("email has no text/plain part:\n%s", raw)
		}
		if err != nil {
			t.Fatal("parse email part:", err)
		}
		if ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type")); ct != "text/plain" {
			continue
		}
		text, err := io.ReadAll(part)
		if err != nil {
			t.Fatal("read email part:", err)
		}
		links := payLinkLine.FindAllStringSubmatch(string(text), -1)
		if len(links) != 1 {
			t.Fatalf("want one pay link in the email's text, found %d:\n%s", len(links), text)
		}
		return links[0][1]
	}
}

// mailbox is an SMTP server in the test process; what it receives arrives on
// received.
type mailbox struct {
	addr     string
	received chan receivedMail
}

type receivedMail struct {
	to   []string
	data []byte
}

func startMailbox(t *testing.T) *mailbox {
	t.Helper()
	mb := &mailbox{received: make(chan receivedMail, 10)}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &mailboxSession{mailbox: mb}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mb.addr = l.Addr().String()
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return mb
}

type mailboxSession struct {
	mailbox *mailbox
	to      []string
}

func (s *mailboxSession) Mail(string, *smtp.MailOptions) error { return nil }

func (s *mailboxSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *mailboxSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mailbox.received <- receivedMail{to: s.to, data: b}
	return nil
}

func (s *mailboxSession) Reset()        { s.to = nil }
func (s *mailboxSession) Logout() error { return nil }

// The pay page (fresh, and after a decline), the receipt and the cancelled
// page have no WCAG 2.1 A or AA violation that axe-core finds, on a phone
// (390 px), on a narrow phone (320 px, where the lines table scrolls) and
// on a desktop (1280 px).
func TestPayPagesPassAxe(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	lines := []map[string]any{apitest.Line("2", "50.00"), apitest.Line("1", "25.40")}
	open := m.MustCreate(t, m.Body("AXE-1", "125.40", lines...))
	paid := m.MustCreate(t, m.Body("AXE-2", "125.40", lines...))
	receipt := env.Pay(t, apitest.PayPath(t, paid), apitest.Payment{Card: apitest.CardApprove}).Header.Get("Location")
	cancelled := m.MustCreate(t, m.Body("AXE-3", "125.40", lines...))
	if r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + cancelled.Id.String() + "/cancel", Token: m.Token}); r.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.StatusCode, r.Body)
	}

	// An invoice of a recurring series: its page offers the consent to
	// future charges.
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	series := createSeries(t, m, recurringBody(t, m, env.Clock.Now().In(la).Format(time.DateOnly)))
	if _, errs := env.App.Recurring.IssueDue(context.Background()); len(errs) > 0 {
		t.Fatal(errs)
	}
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices/" + series.Id.String(), Token: m.Token}).JSON(t, &series)
	recurringInvoice, _ := m.Read(t, *series.LastInvoiceId)

	browser := browsertest.Start(t, env.URL, 2*time.Minute)
	check := func(name string) {
		t.Helper()
		for _, width := range []int64{320, 390, 1280} {
			for _, v := range browser.Axe(t, width) {
				t.Errorf("%s: %s", name, v)
			}
		}
	}
	for name, path := range map[string]string{
		"pay page": apitest.PayPath(t, open), "receipt": receipt, "cancelled page": apitest.PayPath(t, cancelled),
		"recurring invoice's pay page": apitest.PayPath(t, recurringInvoice),
	} {
		if _, err := chromedp.Run(browser.Tab, chromedp.NavigateResponse(env.URL+path)); err != nil {
			t.Fatalf("open the %s: %v", name, err)
		}
		check(name)
	}

	// After a decline: the error, the emptied card fields.
	if _, err := chromedp.Run(browser.Tab, chromedp.NavigateResponse(env.URL+apitest.PayPath(t, open))); err != nil {
		t.Fatalf("open the pay page: %v", err)
	}
	err = chromedp.Do(browser.Tab,
		chromedp.SendKeys("#cardholderName", "Dana Whitfield"),
		chromedp.SendKeys("#cardNumber", apitest.CardDecline),
		chromedp.SendKeys("#expiry", env.FutureExpiry()),
		chromedp.SendKeys("#cvv", apitest.TestCVV),
	)
	if err != nil {
		t.Fatalf("fill the form: %v", err)
	}
	if _, err := chromedp.RunResponse(browser.Tab, chromedp.Click(`button[type="submit"]`)); err != nil {
		t.Fatalf("submit the form: %v", err)
	}
	wantText(t, browser, "the decline page", "The payment did not go through", "were not kept")
	check("decline page")
	browser.FullScreenshot(t, "decline-320.png")

	// The consent ticked without the save box: the message beside it.
	if _, err := chromedp.Run(browser.Tab, chromedp.NavigateResponse(env.URL+apitest.PayPath(t, recurringInvoice))); err != nil {
		t.Fatalf("open the recurring invoice's pay page: %v", err)
	}
	err = chromedp.Do(browser.Tab,
		chromedp.SendKeys("#cardholderName", "Dana Whitfield"),
		chromedp.SendKeys("#cardNumber", apitest.CardApprove),
		chromedp.SendKeys("#expiry", env.FutureExpiry()),
		chromedp.SendKeys("#cvv", apitest.TestCVV),
		chromedp.Click("#chargeConsent"),
	)
	if err != nil {
		t.Fatalf("fill the form: %v", err)
	}
	if _, err := chromedp.RunResponse(browser.Tab, chromedp.Click(`button[type="submit"]`)); err != nil {
		t.Fatalf("submit the form: %v", err)
	}
	wantText(t, browser, "the consent's refusal", "also tick the box to save this card")
	check("consent refused")
	browser.FullScreenshot(t, "consent-320.png")
}
