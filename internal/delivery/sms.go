package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/tracing"
)

// IdempotencyHeader carries the outbox id on every SMS request, so a provider
// that honours it sends a repeated request once; the id also goes in the form
// field IdempotencyKey for providers that read only the form.
const IdempotencyHeader = "Idempotency-Key"

// smsSender posts text messages to a Twilio-style HTTP API: a form with To,
// From and Body, HTTP Basic from the URL's user and password.
type smsSender struct {
	endpoint string // PAYREQ_SMS_URL without the user and the from parameter
	user     string
	pass     string
	from     string
	client   *http.Client
}

func newSMSSender(raw string, timeout time.Duration) (*smsSender, error) {
	bad := func(why string) error {
		return fmt.Errorf("delivery: PAYREQ_SMS_URL %s; expected https://account:token@api.example.com/…/Messages.json?from=%%2B15550000000", why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, bad("is not a URL")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, bad("must be an http:// or https:// URL")
	}
	s := &smsSender{client: &http.Client{
		Timeout:   timeout,
		Transport: tracing.Transport(nil),
		// A redirect of a POST is not followed: it would lose the form.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if u.User != nil {
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
	}
	q := u.Query()
	if s.from = q.Get("from"); s.from == "" {
		return nil, bad("has no from number")
	}
	q.Del("from")
	u.User, u.RawQuery = nil, q.Encode()
	s.endpoint = u.String()
	return s, nil
}

func (s *smsSender) Send(ctx context.Context, m Rendered) error {
	form := url.Values{
		"To":             {m.To},
		"From":           {s.from},
		"Body":           {m.Text},
		"IdempotencyKey": {m.ID.String()},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("sms request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(IdempotencyHeader, m.ID.String())
	if s.user != "" {
		req.SetBasicAuth(s.user, s.pass)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &ProviderError{
		Permanent: !smsRetryable(resp.StatusCode),
		Reason:    "the text message provider answered " + smsAnswer(resp.StatusCode, body),
	}
}

// smsRetryable says whether an answer other than 2xx is worth trying again:
// the provider's own trouble (5xx), throttling (429) and timeouts are; any other
// answer says the request itself was refused (a bad number, bad credentials),
// and sending it again would be refused again.
func smsRetryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests ||
		status == http.StatusRequestTimeout || status == http.StatusConflict
}

// smsAnswer is the status and the provider's message: Twilio's JSON error
// {"code":…, "message":…} when it is one, else the start of the body.
func smsAnswer(status int, body []byte) string {
	var e struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	}
	text := ""
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		text = e.Message
		if e.Code != nil {
			text = fmt.Sprintf("%s (code %v)", text, e.Code)
		}
	} else {
		text = oneLine(string(body))
	}
	answer := fmt.Sprintf("%d %s", status, http.StatusText(status))
	if text != "" {
		answer += ": " + clip.Marked(text, 200)
	}
	return answer
}
