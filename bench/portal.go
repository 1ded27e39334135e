package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/auth"
)

// The portal's pages are loaded as a member of the organization under test
// sees them: someone with payments.view only (no second factor: the bench
// organization does not require one), signed in through the portal's own
// sign-in form; every request then carries the session's cookies.

// portalEmail is the bench member's sign-in.
const portalEmail = "portal-load@bench.example.com"

// portalMember makes (or takes again) the bench member in ds through the
// domain functions the portal uses, with a new password each run (its hash
// by the people store's hasher), and returns the password.
func portalMember(ctx context.Context, a *app.App, ds *dataset) (string, error) {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	password := "bench " + base64.RawURLEncoding.EncodeToString(b)
	var person []string
	if err := a.DB.SelectContext(ctx, &person, `SELECT id FROM people WHERE lower(email) = $1`, portalEmail); err != nil {
		return "", err
	}
	if len(person) == 0 {
		_, err := a.People.AddMember(ctx, ds.org, "Portal Load", portalEmail, "Member", []string{auth.PaymentsView}, password)
		return password, err
	}
	hash, err := a.People.Hasher.Hash(password)
	if err != nil {
		return "", err
	}
	// What earlier runs left: their sessions and any failed sign-ins.
	_, err = a.DB.ExecContext(ctx, `UPDATE people SET password_hash = $2 WHERE id = $1;`, person[0], hash)
	if err == nil {
		_, err = a.DB.ExecContext(ctx, `DELETE FROM sessions WHERE person_id = $1`, person[0])
	}
	if err == nil {
		_, err = a.DB.ExecContext(ctx, `DELETE FROM sign_in_failures WHERE email = $1`, portalEmail)
	}
	return password, err
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs the bench member in at base through GET and POST
// /portal/sign-in, as a browser does (the CSRF cookie and the form's token),
// from an address of its own (the sign-in limits count per address), and
// returns the Cookie header its pages need.
func (h *harness) signIn(ctx context.Context, base, password string) (string, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return "", err
	}
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	n := h.addrSeq.Add(1)
	from := fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255)
	do := func(method, path string, form url.Values) (*http.Response, string, error) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, body)
		if err != nil {
			return nil, "", err
		}
		req.Header.Set("X-Forwarded-For", from)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}
	resp, page, err := do("GET", "/portal/sign-in", nil)
	if err != nil {
		return "", err
	}
	m := csrfField.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		return "", fmt.Errorf("portal sign-in page: status %d, no CSRF token: %.300s", resp.StatusCode, page)
	}
	resp, page, err = do("POST", "/portal/sign-in", url.Values{"email": {portalEmail}, "password": {password}, "csrf": {m[1]}})
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/portal/" {
		return "", fmt.Errorf("portal sign-in: status %d to %q, want 303 to /portal/: %.300s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	u, _ := url.Parse(base + "/portal/")
	var cookies []string
	for _, ck := range jar.Cookies(u) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	return strings.Join(cookies, "; "), nil
}
