package apitest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/processor"
)

// Cards of the simulator (decisions.md), one more that approves but whose
// stored profile cannot be deleted (it ends in 0119), and the security code
// the tests type.
const (
	CardApprove     = processor.TestCardApprove // 4111111111111111
	CardDecline     = processor.TestCardDecline // 4000000000000002
	CardError       = processor.TestCardError   // 4000000000000119
	CardUndeletable = "4111111111150119"
	TestCVV         = "9317"
)

// Page is an HTML answer of the pay page.
type Page struct {
	*http.Response
	Body string
}

// Visit sends a request to a pay page; pages are not in openapi.yaml, so
// this goes around Do's contract check.
func (e *Env) Visit(t *testing.T, method, path string, form url.Values, header http.Header) Page {
	t.Helper()
	return visit(t, e.Client, method, e.URL+path, form, header)
}

// visit sends a request to a page through client, form (if any) as its
// body, and reads the answer whole.
func visit(t testing.TB, client *http.Client, method, address string, form url.Values, header http.Header) Page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, address, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, address, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Page{Response: resp, Body: string(b)}
}

// PayPath is the path of an invoice's pay link.
func PayPath(t *testing.T, inv models.Invoice) string {
	t.Helper()
	u, err := url.Parse(*inv.Link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}

var formTokenPattern = regexp.MustCompile(`name="csrfToken" value="([^"]+)"`)

// FormToken is the form token of a pay page.
func FormToken(t *testing.T, p Page) string {
	t.Helper()
	m := formTokenPattern.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no form token on the page (%d): %s", p.StatusCode, p.Body)
	}
	return m[1]
}

// FutureExpiry is MMYY two years from the env's clock.
func (e *Env) FutureExpiry() string {
	t := e.Clock.Now().AddDate(2, 0, 0)
	return fmt.Sprintf("%02d%02d", int(t.Month()), t.Year()%100)
}

// Payment is the form a customer fills in.
type Payment struct {
	Card, Amount, Name, Prefers, Expiry, CVV string
	Save                                     bool
	// Consent ticks the consent to future charges beside Save.
	Consent bool
}

// Pay opens the pay page (for its form token) and posts the form.
func (e *Env) Pay(t *testing.T, path string, p Payment) Page {
	t.Helper()
	return e.Post(t, path, FormToken(t, e.Visit(t, "GET", path, nil, nil)), p)
}

// Post posts the form with a given form token.
func (e *Env) Post(t *testing.T, path, token string, p Payment) Page {
	t.Helper()
	return e.Visit(t, "POST", path, p.Values(e, token), nil)
}

// Values is the form as posted, with a name, expiry and security code
// filled in when the test left them out.
func (p Payment) Values(e *Env, token string) url.Values {
	v := url.Values{"csrfToken": {token}, "cardNumber": {p.Card}, "amount": {p.Amount}, "cardholderName": {p.Name},
		"expiry": {p.Expiry}, "cvv": {p.CVV}, "prefers": {p.Prefers}}
	if p.Name == "" {
		v.Set("cardholderName", "Dana Whitfield")
	}
	if p.Expiry == "" {
		v.Set("expiry", e.FutureExpiry())
	}
	if p.CVV == "" {
		v.Set("cvv", TestCVV)
	}
	if p.Save {
		v.Set("saveCard", "on")
	}
	if p.Consent {
		v.Set("chargeConsent", "on")
	}
	return v
}

// WantStatus fails the test unless the page answered status.
func WantStatus(t *testing.T, p Page, status int) {
	t.Helper()
	if p.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", p.StatusCode, status, p.Body)
	}
}

// Recorder is a card processor that records what it is asked, for
// Options.WrapProcessor (through Recording).
type Recorder struct {
	processor.Processor
	mu      sync.Mutex
	charges []processor.Charge
	voids   []string
	// Answer, when set, replaces the processor's answer to a charge.
	Answer func(processor.Result) processor.Result
	// VoidErr, when set, is every void's answer.
	VoidErr error
}

func (r *Recorder) AuthorizeCapture(ctx context.Context, c processor.Charge) (processor.Result, error) {
	res, err := r.Processor.AuthorizeCapture(ctx, c)
	r.mu.Lock()
	defer r.mu.Unlock()
	c.Card = processor.Card{} // keep nothing of the card, even in a test
	r.charges = append(r.charges, c)
	if r.Answer != nil && err == nil {
		res = r.Answer(res)
	}
	return res, err
}

func (r *Recorder) Void(ctx context.Context, merchantID, orderID string) error {
	r.mu.Lock()
	r.voids = append(r.voids, orderID)
	r.mu.Unlock()
	if r.VoidErr != nil {
		return r.VoidErr
	}
	return r.Processor.Void(ctx, merchantID, orderID)
}

// Charges are the charges asked so far, card details left out.
func (r *Recorder) Charges() []processor.Charge {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]processor.Charge(nil), r.charges...)
}

// Voids are the order ids voided so far.
func (r *Recorder) Voids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.voids...)
}

// Last is the last charge asked.
func (r *Recorder) Last() processor.Charge {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.charges[len(r.charges)-1]
}

// Recording wraps the simulator in rec; pass it as Options.WrapProcessor.
func Recording(rec *Recorder) func(processor.Processor) processor.Processor {
	return func(p processor.Processor) processor.Processor {
		rec.Processor = p
		return rec
	}
}
