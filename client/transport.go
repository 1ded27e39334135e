package payreq

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// public are the paths whose operations take no access token: the token
// endpoint and the operations with no bearerAuth in openapi.yaml (a test holds
// the two together), and the published spec and reference. `{…}` stands for
// one path segment.
var public = []string{
	"/oauth/token",
	"/.well-known/jwks.json",
	"/healthz",
	"/readyz",
	"/openapi.yaml",
	"/openapi.json",
	"/docs",
}

func isPublic(path string) bool {
	segments := strings.Split(path, "/")
	for _, p := range public {
		if matches(strings.Split(p, "/"), segments) {
			return true
		}
	}
	return false
}

func matches(template, segments []string) bool {
	if len(template) != len(segments) {
		return false
	}
	for i, t := range template {
		if t != segments[i] && !(strings.HasPrefix(t, "{") && segments[i] != "") {
			return false
		}
	}
	return true
}

// keyed says whether a POST to path makes something that an
// Idempotency-Key keeps from being made twice: an invoice, a recurring
// invoice, a recorded payment, a customer (whose retry would otherwise meet
// its own email as taken). (A refund's key is the caller's to give: whether
// a retry of a refund may refund again is theirs to decide.)
func keyed(path string) bool {
	if path == "/payment-requests" || path == "/customers" || path == "/recurring-invoices" {
		return true
	}
	id, ok := strings.CutPrefix(path, "/payment-requests/")
	id, ok2 := strings.CutSuffix(id, "/payments")
	return ok && ok2 && id != "" && !strings.Contains(id, "/")
}

// transport authenticates requests to the API with the access token, sends a
// request once more with a new token after a 401, and gives creates and
// recorded payments an Idempotency-Key. Under it, next retries 429s and 503s.
type transport struct {
	next   http.RoundTripper
	tokens *tokenSource // nil: requests are sent without a token (the token request itself)
	// The API's address: a token goes to no other.
	scheme, host, basePath string
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	req, err := replayable(req)
	if err != nil {
		return nil, err
	}
	header := req.Header.Clone()
	path, ours := t.apiPath(req.URL)
	if ours && req.Method == http.MethodPost && keyed(path) && header.Get("Idempotency-Key") == "" {
		// One key for every try of this request, the retries below included.
		header.Set("Idempotency-Key", uuid.NewString())
	}
	if t.tokens == nil || !ours || isPublic(path) || header.Get("Authorization") != "" {
		return t.send(req, header, false)
	}
	tok, err := t.tokens.get(req.Context(), "")
	if err != nil {
		return nil, err
	}
	header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := t.send(req, header, false)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	// The server no longer takes this token (it expired by the server's
	// clock, or the server's signing key changed): one new token, one more try.
	renewed, err := t.tokens.get(req.Context(), tok.AccessToken)
	if err != nil {
		return resp, nil // the 401 says more than the failed renewal
	}
	discard(resp)
	header.Set("Authorization", "Bearer "+renewed.AccessToken)
	return t.send(req, header, true)
}

// apiPath is the path of u below the API's base address, and whether u is
// an address of the API at all.
func (t *transport) apiPath(u *url.URL) (string, bool) {
	if u.Scheme != t.scheme || u.Host != t.host || !strings.HasPrefix(u.Path, t.basePath+"/") {
		return "", false
	}
	return strings.TrimPrefix(u.Path, t.basePath), true
}

// send sends a copy of req with header; again: with a fresh copy of its body.
func (t *transport) send(req *http.Request, header http.Header, again bool) (*http.Response, error) {
	try := req.Clone(req.Context())
	if again {
		var err error
		if try, err = rewind(req); err != nil {
			return nil, err
		}
	}
	try.Header = header.Clone()
	return t.next.RoundTrip(try)
}

// retrier sends a request again when it is answered 429, or 503 when it is
// safe to repeat, after the answer's Retry-After, while tries remain and the
// request's deadline allows.
type retrier struct {
	base     http.RoundTripper
	maxTries int
	maxWait  time.Duration
	// tokens: it sends token requests, which are safe to repeat (another
	// token is all a repeat makes).
	tokens bool
}

func (r retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for try := 1; ; try++ {
		resp, err := r.base.RoundTrip(req)
		if err != nil || !r.retried(req, resp.StatusCode) || try >= r.maxTries {
			return resp, err
		}
		wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !ok || wait > r.maxWait {
			return resp, nil
		}
		if deadline, set := ctx.Deadline(); set && time.Now().Add(wait).After(deadline) {
			return resp, nil // waiting would only end in the deadline
		}
		if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
			return resp, nil // the body cannot be sent again
		}
		next, err := rewind(req)
		if err != nil {
			return resp, nil
		}
		discard(resp)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
		req = next
	}
}

// retried tells whether an answer of status is worth another try. A 429
// was not acted on, so any request is sent again. A 503 may come after
// the request's change was made (its answer lost), so only a request that
// is safe to repeat is: GET and HEAD; DELETE, which removes nothing more
// the second time; the token request; and any request with an
// Idempotency-Key, which the server makes at most once.
func (r retrier) retried(req *http.Request, status int) bool {
	switch status {
	case http.StatusTooManyRequests:
		return true
	case http.StatusServiceUnavailable:
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodDelete:
			return true
		}
		return r.tokens || req.Header.Get("Idempotency-Key") != ""
	}
	return false
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(secs, 0)) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// replayable is req with a body that can be sent more than once: a body
// without GetBody is read into memory.
func replayable(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		return req, nil
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("payreq: reading the request body: %w", err)
	}
	r := req.Clone(req.Context())
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.Body, _ = r.GetBody()
	r.ContentLength = int64(len(body))
	return r, nil
}

// rewind is a copy of req to send, with a fresh copy of its body.
func rewind(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("payreq: copying the request body: %w", err)
		}
		r.Body = body
	}
	return r, nil
}

// discard reads what is left of a response that will not be returned, so
// its connection can be used again, and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
