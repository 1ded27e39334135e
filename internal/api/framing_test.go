package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/framing"
)

// rawPost is a POST as bytes on the wire: its head, with a request id to
// find its log line, then body as given.
func rawPost(path, requestID, headers, body string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: payreq.test\r\nX-Request-Id: " + requestID + "\r\n" + headers + "\r\n" + body
}

// wantLoggedAsInfo checks that a refused request is logged, at info: it was
// the client's doing, not the service's.
func wantLoggedAsInfo(t *testing.T, env *apitest.Env, requestID string, status int) {
	t.Helper()
	line := logLine(t, env, requestID)
	if line["level"] != "INFO" || line["status"] != float64(status) {
		t.Errorf("logged at %v with status %v, want INFO and %d: %v", line["level"], line["status"], status, line)
	}
}

// A body malformed on the wire, or cut off by its client, is the client's
// fault: 400 (an OAuth error on the token endpoint), logged at info; never
// a 500 or a 503 "cannot reach its database".
func TestBodyBrokenOnTheWire(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit})
	m := apitest.NewMerchant(t, env)
	chunked := "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
	bodies := map[string]struct {
		headers, body string
		halfClose     bool
	}{
		"chunk size not hex":         {chunked, "zz\r\n{}\r\n0\r\n\r\n", false},
		"chunk size overflowing":     {chunked, "fffffffffffffffffffff\r\n{}\r\n0\r\n\r\n", false},
		"CRLF missing after a chunk": {chunked, "2\r\n{}XX0\r\n\r\n", false},
		"cut off before its length":  {"Content-Type: application/json\r\nContent-Length: 100\r\n", `{"grant_type":`, true},
		"cut off inside a chunk":     {chunked, "40\r\n{\"grant_type\":", true},
	}
	for name, b := range bodies {
		t.Run(name, func(t *testing.T) {
			id := "token-" + strings.ReplaceAll(name, " ", "-")
			resp, _ := env.Wire(rawPost("/oauth/token", id, b.headers, b.body), b.halfClose)
			var te models.TokenError
			resp.JSON(t, &te)
			if resp.StatusCode != http.StatusBadRequest || te.Error != models.TokenErrorErrorInvalidRequest {
				t.Errorf("token endpoint: %d %s, want 400 invalid_request", resp.StatusCode, resp.Body)
			}
			wantLoggedAsInfo(t, env, id, http.StatusBadRequest)

			id = "create-" + strings.ReplaceAll(name, " ", "-")
			resp, _ = env.Wire(rawPost("/payment-requests", id, "Authorization: Bearer "+m.Token+"\r\n"+b.headers, b.body), b.halfClose)
			p := apitest.WantProblem(t, resp, http.StatusBadRequest, "")
			if p.Errors == nil || len((*p.Errors)["body"]) == 0 {
				t.Errorf("errors do not name body: %s", resp.Body)
			}
			wantLoggedAsInfo(t, env, id, http.StatusBadRequest)
		})
	}
	var list []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests", Token: m.Token}).JSON(t, &list)
	if len(list) != 0 {
		t.Errorf("%d invoices made from broken bodies, want none", len(list))
	}
}

// A body slower than the server's read timeout is a 408, not a sign of an
// outage: no 503, no Retry-After.
func TestBodySlowerThanTheReadTimeout(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit, ReadTimeout: time.Second})
	m := apitest.NewMerchant(t, env)
	for _, path := range []string{"/oauth/token", "/payment-requests"} {
		id := "slow" + strings.ReplaceAll(path, "/", "-")
		head := "Authorization: Bearer " + m.Token + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
		// The rest of the body never comes: the server's read times out.
		resp, _ := env.Wire(rawPost(path, id, head, `{"amount":`), false)
		if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Retry-After") != "" {
			t.Errorf("%s: %d (Retry-After %q) %s, want 408 without Retry-After", path, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Body)
		}
		wantLoggedAsInfo(t, env, id, http.StatusRequestTimeout)
	}
	// The pay page's form likewise.
	pay := apitest.PayPath(t, m.MustCreate(t, m.Body("SLOW-1", "10.00")))
	resp, _ := env.Wire(rawPost(pay, "slow-pay", "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n", "amount=1"), false)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("pay form: %d, want 408", resp.StatusCode)
	}
	wantLoggedAsInfo(t, env, "slow-pay", http.StatusRequestTimeout)
}

// Content-Length beside Transfer-Encoding is refused and the connection
// closed, so nothing sent after the body is served as a next request
// (RFC 9112 §6.1).
func TestContentLengthWithTransferEncoding(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: noRateLimit})
	m := apitest.NewMerchant(t, env)
	smuggled := "GET /healthz HTTP/1.1\r\nHost: payreq.test\r\n\r\n"
	for _, tc := range []struct{ method, path, headers string }{
		{"POST", "/payment-requests", "Authorization: Bearer " + m.Token + "\r\nContent-Type: application/json\r\n"},
		{"POST", "/oauth/token", "Content-Type: application/json\r\n"},
		{"GET", "/healthz", ""},
		{"GET", "/pay/anything", ""},
	} {
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: payreq.test\r\n%sContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n%s", tc.method, tc.path, tc.headers, smuggled)
		resp, closed := env.Wire(raw, false)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", tc.method, tc.path, resp.StatusCode, resp.Body)
		}
		if !closed {
			t.Errorf("%s %s: the connection stayed open after the answer", tc.method, tc.path)
		}
	}
	// A chunked request alone is fine.
	resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: m.Body("CHUNKED-1", "10.00"), Chunked: true})
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("chunked create: %d %s", resp.StatusCode, resp.Body)
	}
}

// A request net/http refuses before any route (a control character in a
// header) is answered with a problem document, as every other refusal,
// never Go's text/plain; the connection is closed after it.
func TestRefusedBeforeRouting(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	for name, header := range map[string]string{
		"control character in a value": "X-Note: a\x01b\r\n",
		"NUL in a value":               "X-Note: a\x00b\r\n",
		"escape in a value":            "User-Agent: \x1b[31mred\r\n",
		"control character in a name":  "X\x7fNote: a\r\n",
		"space before the colon":       "X-Note : a\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			resp, closed := env.Wire("GET /healthz HTTP/1.1\r\nHost: payreq.test\r\n"+header+"\r\n", false)
			p := apitest.WantProblem(t, resp, http.StatusBadRequest, "Invalid request")
			if !strings.HasSuffix(p.Type, "/problems/validation") || p.Errors == nil || len(*p.Errors) == 0 {
				t.Errorf("type %q, errors %v: want a validation problem naming what is wrong", p.Type, p.Errors)
			}
			if !closed {
				t.Error("the connection stayed open after the refusal")
			}
		})
	}
	resp, closed := env.Wire("POST /payment-requests HTTP/1.1\r\nHost: payreq.test\r\nTransfer-Encoding: gzip\r\n\r\n", false)
	if p := apitest.WantProblem(t, resp, http.StatusNotImplemented, ""); !strings.HasSuffix(p.Type, "/problems/not-implemented") || !closed {
		t.Errorf("unknown transfer coding: type %q, closed %v", p.Type, closed)
	}
	apitest.Want(t, "Cache-Control of a refusal", resp.Header.Get("Cache-Control"), "no-store")
}

// The token operation's 400 and 431 before routing are OAuth errors with
// Cache-Control: no-store, as every other refusal of it; its 501 is a
// problem document (every 5xx is), with no-store too.
func TestTokenRequestRefusedBeforeRouting(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	for name, c := range map[string]struct {
		raw    string
		status int
	}{
		"control character in a header": {"POST /oauth/token HTTP/1.1\r\nHost: payreq.test\r\nX-Note: a\x01b\r\nContent-Length: 0\r\n\r\n", http.StatusBadRequest},
		"with a query":                  {"POST /oauth/token?x=1 HTTP/1.1\r\nHost: payreq.test\r\nX-Note: a\x00b\r\n\r\n", http.StatusBadRequest},
		"malformed header line":         {"POST /oauth/token HTTP/1.1\r\nHost: payreq.test\r\nX-Note : a\r\n\r\n", http.StatusBadRequest},
		"headers over the limit":        {"POST /oauth/token HTTP/1.1\r\nHost: payreq.test\r\nX-Big: " + strings.Repeat("b", 70<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			resp, closed := env.Wire(c.raw, false)
			apitest.Want(t, "status", resp.StatusCode, c.status)
			apitest.Want(t, "Content-Type", resp.Header.Get("Content-Type"), "application/json")
			apitest.Want(t, "Cache-Control", resp.Header.Get("Cache-Control"), "no-store")
			apitest.Want(t, "error", tokenError(t, resp).Error, models.TokenErrorErrorInvalidRequest)
			// Headers over the limit are left unread: the close is a reset.
			if !closed && c.status != http.StatusRequestHeaderFieldsTooLarge {
				t.Error("the connection stayed open after the refusal")
			}
		})
	}
	resp, _ := env.Wire("POST /oauth/token HTTP/1.1\r\nHost: payreq.test\r\nTransfer-Encoding: gzip\r\n\r\n", false)
	apitest.WantProblem(t, resp, http.StatusNotImplemented, "")
	apitest.Want(t, "Cache-Control of the 501", resp.Header.Get("Cache-Control"), "no-store")
}

// A kept-alive connection that sends nothing more is closed by the server
// after framing.IdleTimeout: idle connections are held no longer than one that
// never sends its request.
func TestIdleConnectionsClosed(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: payreq.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz: %d (close %v, %v), want 200 kept alive", resp.StatusCode, resp.Close, err)
	}
	// Far longer than the idle timeout: a server that keeps the connection
	// runs into this deadline instead of closing.
	if err := conn.SetReadDeadline(time.Now().Add(framing.IdleTimeout + 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("reading the idle connection: %v, want the server to close it (EOF)", err)
	}
}
