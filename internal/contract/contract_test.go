package contract

import (
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
)

const (
	prismInvalidRequest = "UNPROCESSABLE_ENTITY" // prism refuses a request the schema forbids
	prismUnauthorized   = "UNAUTHORIZED"         // prism refuses a request without the credentials the operation needs
)

// TestFlowsThroughPrism runs the API's flows once through prism in front of
// the real server; any request or answer that breaks openapi.yaml fails it.
func TestFlowsThroughPrism(t *testing.T) {
	port := freePort(t)
	// The server's public address is prism's, as behind any proxy: Link
	// headers and pay links point there, and a Link is followed as it is.
	env := apitest.New(t, testDSN, apitest.Options{PublicURL: fmt.Sprintf("http://127.0.0.1:%d", port)})
	p := startPrism(t, env.URL, port)
	seed := env.Seed()

	var merchant, reseller string // access tokens
	t.Run("health and signing keys", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/.well-known/jwks.json"} {
			p.do(t, call{method: "GET", path: path}).want(t, http.StatusOK)
		}
	})
	t.Run("token", func(t *testing.T) {
		m := seed.Merchant
		for _, c := range []call{
			{method: "POST", path: "/oauth/token", body: tokenForm(m.KeyID, m.Secret), header: formHeader},
			{method: "POST", path: "/oauth/token", body: tokenJSON(m.KeyID, m.Secret)},
			{method: "POST", path: "/oauth/token", body: "grant_type=client_credentials", header: basicHeader(m.KeyID, m.Secret)},
		} {
			var tok models.TokenResponse
			p.do(t, c).want(t, http.StatusOK).json(t, &tok)
			merchant = tok.AccessToken
		}
		var tok models.TokenResponse
		p.do(t, call{method: "POST", path: "/oauth/token", body: tokenJSON(seed.Reseller.KeyID, seed.Reseller.Secret)}).
			want(t, http.StatusOK).json(t, &tok)
		reseller = tok.AccessToken
	})
	if merchant == "" || reseller == "" {
		t.Fatal("no access tokens: nothing else can run")
	}

	var accounts []models.MerchantAccount
	t.Run("locations and accounts", func(t *testing.T) {
		var locations []models.Location
		p.do(t, call{method: "GET", path: "/locations", token: merchant}).want(t, http.StatusOK).json(t, &locations)
		if len(locations) == 0 {
			t.Fatal("no locations")
		}
		p.do(t, call{method: "GET", path: "/locations/" + locations[0].Id.String(), token: merchant}).want(t, http.StatusOK)
		p.do(t, call{method: "GET", path: "/accounts", token: merchant}).want(t, http.StatusOK).json(t, &accounts)
		p.do(t, call{method: "GET", path: "/accounts?locationId=" + locations[0].Id.String(), token: merchant}).want(t, http.StatusOK)
	})
	if len(accounts) == 0 {
		t.Fatal("no merchant accounts: invoices cannot be made")
	}
	mid := accounts[0].Id.String()

	var toPay models.Invoice
	t.Run("invoices", func(t *testing.T) {
		create := call{method: "POST", path: "/payment-requests", token: merchant,
			body:   invoiceBody(mid, "C-1001", "136.50", line(2, "45.5"), line("1", 45.5)),
			header: http.Header{"Idempotency-Key": {uuid.NewString()}}}
		var inv models.Invoice
		p.do(t, create).want(t, http.StatusCreated).json(t, &inv)
		if a := p.do(t, create).want(t, http.StatusOK); a.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay without Idempotent-Replayed: true")
		}
		p.do(t, call{method: "GET", path: "/payment-requests/" + inv.Id.String(), token: merchant}).want(t, http.StatusOK)

		body := invoiceBody(mid, "C-1002", "10.00")
		body["send"], body["delivery"], body["customerPhone"] = true, "text", "+15125550148"
		p.do(t, call{method: "POST", path: "/payment-requests", token: merchant, body: body}).want(t, http.StatusCreated).json(t, &toPay)

		first := p.do(t, call{method: "GET", path: "/payment-requests?limit=1", token: merchant}).want(t, http.StatusOK)
		p.do(t, call{method: "GET", path: nextPage(t, p, first), token: merchant}).want(t, http.StatusOK)
		p.do(t, call{method: "GET", path: "/payment-requests?status=open&limit=100", token: merchant}).want(t, http.StatusOK)

		p.do(t, call{method: "POST", path: "/payment-requests/" + inv.Id.String() + "/send", token: merchant}).want(t, http.StatusOK)
		p.do(t, call{method: "POST", path: "/payment-requests/" + inv.Id.String() + "/cancel", token: merchant}).want(t, http.StatusOK)

		// Drafts and changes: made, changed by a merge patch (a stale
		// If-Match refused), finalized; another made and deleted.
		draft := invoiceBody(mid, "C-1003", "91.00", line(2, "45.5"))
		draft["send"], draft["draft"] = nil, true
		var d models.Invoice
		p.do(t, call{method: "POST", path: "/payment-requests", token: merchant, body: draft}).want(t, http.StatusCreated).json(t, &d)
		path := "/payment-requests/" + d.Id.String()
		patch := http.Header{"Content-Type": {"application/merge-patch+json"}, "If-Match": {`"1"`}}
		p.do(t, call{method: "PATCH", path: path, token: merchant, body: map[string]any{"memo": "Thanks", "lines": []any{line(1, "45.5")}},
			header: patch}).want(t, http.StatusOK)
		p.do(t, call{method: "PATCH", path: path, token: merchant, body: map[string]any{"memo": nil}, header: patch}).want(t, http.StatusPreconditionFailed)
		p.do(t, call{method: "POST", path: path + "/finalize", token: merchant, body: map[string]any{"send": false}}).want(t, http.StatusOK)
		p.do(t, call{method: "POST", path: path + "/finalize", token: merchant}).want(t, http.StatusUnprocessableEntity)
		draft["invoiceNumber"] = "C-1004"
		p.do(t, call{method: "POST", path: "/payment-requests", token: merchant, body: draft}).want(t, http.StatusCreated).json(t, &d)
		p.do(t, call{method: "DELETE", path: "/payment-requests/" + d.Id.String(), token: merchant}).want(t, http.StatusNoContent)
	})

	t.Run("reseller", func(t *testing.T) {
		p.do(t, call{method: "GET", path: "/organizations/" + seed.Reseller.OrganizationID.String() + "/portfolio", token: reseller}).
			want(t, http.StatusOK)
		var apps []models.Application
		first := p.do(t, call{method: "GET", path: "/applications?limit=2", token: reseller}).want(t, http.StatusOK)
		if first.json(t, &apps); len(apps) == 0 {
			t.Fatal("no applications")
		}
		p.do(t, call{method: "GET", path: nextPage(t, p, first), token: reseller}).want(t, http.StatusOK)
		p.do(t, call{method: "GET", path: "/applications?stage=submitted", token: reseller}).want(t, http.StatusOK)
		p.do(t, call{method: "GET", path: "/applications/" + apps[0].Id.String(), token: reseller}).want(t, http.StatusOK)
	})

	t.Run("400", func(t *testing.T) {
		// Rules the schema cannot state reach the server, and prism checks its 400.
		unbalanced := invoiceBody(mid, "C-2001", "10.00", line(1, "9.99"))
		noPhone := invoiceBody(mid, "C-2002", "10.00")
		noPhone["delivery"] = "text"
		for field, body := range map[string]map[string]any{"lines": unbalanced, "customerPhone": noPhone} {
			var problem models.Problem
			p.do(t, call{method: "POST", path: "/payment-requests", token: merchant, body: body}).want(t, http.StatusBadRequest).json(t, &problem)
			if problem.Errors == nil || len((*problem.Errors)[field]) == 0 {
				t.Errorf("400 without errors.%s: %+v", field, problem)
			}
		}
		a := p.do(t, call{method: "POST", path: "/oauth/token", body: map[string]string{"grant_type": "password"}}).want(t, http.StatusBadRequest)
		if got := a.problemTitle(t); got != "unsupported_grant_type" {
			t.Errorf("token error %q, want unsupported_grant_type", got)
		}

		// Requests the schema forbids: prism refuses them itself, and the
		// server's own 400 is checked against openapi.yaml without prism.
		for _, c := range []call{
			{method: "GET", path: "/payment-requests/not-a-uuid", token: merchant},
			{method: "GET", path: "/payment-requests?limit=0", token: merchant},
			{method: "POST", path: "/payment-requests", token: merchant, body: map[string]any{"amount": "x"}},
		} {
			p.refuses(t, c, prismInvalidRequest)
			direct(t, env, c, http.StatusBadRequest)
		}
	})

	t.Run("401", func(t *testing.T) {
		missing := call{method: "GET", path: "/locations"}
		p.refuses(t, missing, prismUnauthorized)
		if got := direct(t, env, missing, http.StatusUnauthorized).Problem(t).Title; got != "Missing access token" {
			t.Errorf("missing token: title %q", got)
		}
		a := p.do(t, call{method: "GET", path: "/locations", token: "not-a-token"}).want(t, http.StatusUnauthorized)
		if got := a.problemTitle(t); got != "Invalid access token" || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("invalid token: %q, WWW-Authenticate %q", got, a.header.Get("WWW-Authenticate"))
		}
		a = p.do(t, call{method: "POST", path: "/oauth/token", body: tokenJSON(seed.Merchant.KeyID, "ms_wrong")}).want(t, http.StatusUnauthorized)
		if got := a.problemTitle(t); got != "invalid_client" {
			t.Errorf("wrong secret: %q, want invalid_client", got)
		}
	})

	t.Run("403", func(t *testing.T) {
		viewer := keyToken(t, env, p, seed.Merchant.OrganizationID, auth.PaymentsView)
		for _, c := range []call{
			{method: "POST", path: "/payment-requests", token: viewer, body: invoiceBody(mid, "C-3001", "1.00")},
			{method: "GET", path: "/applications", token: merchant},
		} {
			if got := p.do(t, c).want(t, http.StatusForbidden).problemTitle(t); got != "Permission required" {
				t.Errorf("%s: title %q, want Permission required", c, got)
			}
		}
		c := call{method: "GET", path: "/organizations/" + seed.Merchant.OrganizationID.String() + "/portfolio", token: reseller}
		if got := p.do(t, c).want(t, http.StatusForbidden).problemTitle(t); got != "Not your organization" {
			t.Errorf("%s: title %q, want Not your organization", c, got)
		}
	})

	t.Run("404", func(t *testing.T) {
		unknown := uuid.NewString()
		for _, c := range []call{
			{method: "GET", path: "/payment-requests/" + unknown, token: merchant},
			{method: "POST", path: "/payment-requests/" + unknown + "/send", token: merchant},
			{method: "POST", path: "/payment-requests/" + unknown + "/cancel", token: merchant},
			{method: "GET", path: "/locations/" + unknown, token: merchant},
			{method: "GET", path: "/applications/" + unknown, token: reseller},
			{method: "DELETE", path: "/saved-cards/" + unknown, token: merchant},
		} {
			p.do(t, c).want(t, http.StatusNotFound)
		}
	})

	t.Run("422", func(t *testing.T) {
		for _, c := range []struct {
			call  call
			title string
		}{
			{call{method: "POST", path: "/payment-requests", token: merchant, body: invoiceBody(mid, "C-1001", "5.00")}, "Invoice number already used"},
			{call{method: "POST", path: "/payment-requests", token: merchant, body: invoiceBody(uuid.NewString(), "C-4001", "5.00")}, "Unknown merchant account"},
		} {
			if got := p.do(t, c.call).want(t, http.StatusUnprocessableEntity).problemTitle(t); got != c.title {
				t.Errorf("%s: title %q, want %q", c.call, got, c.title)
			}
		}
		key := http.Header{"Idempotency-Key": {uuid.NewString()}}
		p.do(t, call{method: "POST", path: "/payment-requests", token: merchant, body: invoiceBody(mid, "C-4002", "5.00"), header: key}).
			want(t, http.StatusCreated)
		p.do(t, call{method: "POST", path: "/payment-requests", token: merchant, body: invoiceBody(mid, "C-4002", "6.00"), header: key}).
			want(t, http.StatusUnprocessableEntity)
	})

	t.Run("pay through the page, then delete the card", func(t *testing.T) {
		payThroughPageThenDeleteCard(t, env, p, merchant, toPay)
	})

	// Last: it spends this address's token requests for the next minute.
	t.Run("429 on the token endpoint", func(t *testing.T) {
		for range 40 {
			a := p.do(t, call{method: "POST", path: "/oauth/token", body: tokenJSON(seed.Merchant.KeyID, "ms_wrong")})
			if a.status == http.StatusTooManyRequests {
				if a.header.Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
				return
			}
			a.want(t, http.StatusUnauthorized)
		}
		t.Fatal("no 429 after 40 token requests in a row")
	})

	p.checkLog(t)
}

// payThroughPageThenDeleteCard pays inv in full on its pay page, saving the
// card, then removes that card with DELETE /saved-cards/{id}. The pay page is
// HTML for people and not in openapi.yaml, so its two requests go to the
// server directly; the API requests around them go through prism.
func payThroughPageThenDeleteCard(t *testing.T, env *apitest.Env, p *prism, token string, inv models.Invoice) {
	if inv.Link == nil {
		t.Fatal("invoice without a pay link")
	}
	link, err := url.Parse(*inv.Link)
	if err != nil {
		t.Fatal(err)
	}
	page := env.URL + link.Path
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 15 * time.Second}
	resp, err := browser.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	form := readHiddenInputs(t, resp)
	if resp.StatusCode != http.StatusOK || len(form) == 0 {
		t.Fatalf("GET %s → %d; want 200 and a form with its CSRF token in a hidden field, got fields %v", link.Path, resp.StatusCode, form)
	}
	form.Set("cardNumber", "4111111111111111")
	form.Set("expiry", fmt.Sprintf("12%02d", (time.Now().Year()+3)%100))
	form.Set("cvv", "123")
	form.Set("cardholderName", "Dana Whitfield")
	form.Set("amount", inv.Balance.Text('f'))
	form.Set("saveCard", "on")
	resp, err = browser.PostForm(page, form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s → %d (after redirects): %s", link.Path, resp.StatusCode, body)
	}

	get := call{method: "GET", path: "/payment-requests/" + inv.Id.String(), token: token}
	var paid models.Invoice
	p.do(t, get).want(t, http.StatusOK).json(t, &paid)
	if paid.Status != models.InvoiceStatusPaid || paid.Payments == nil || len(*paid.Payments) != 1 || paid.SavedCards == nil || len(*paid.SavedCards) != 1 {
		t.Fatalf("after paying on the page: status %s, payments %v, saved cards %v; want paid, one payment, one saved card",
			paid.Status, paid.Payments, paid.SavedCards)
	}
	remove := call{method: "DELETE", path: "/saved-cards/" + (*paid.SavedCards)[0].Id.String(), token: token}
	p.do(t, remove).want(t, http.StatusNoContent)
	p.do(t, remove).want(t, http.StatusNotFound)
	p.do(t, get).want(t, http.StatusOK).json(t, &paid)
	if paid.SavedCards == nil || len(*paid.SavedCards) != 0 {
		t.Errorf("saved cards after the delete: %v, want none", paid.SavedCards)
	}
}

var (
	inputTag  = regexp.MustCompile(`(?is)<input\b[^>]*>`)
	inputAttr = regexp.MustCompile(`(?is)\b(type|name|value)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)`)
)

// readHiddenInputs reads a page and returns the hidden fields of its forms,
// the CSRF token among them.
func readHiddenInputs(t *testing.T, resp *http.Response) url.Values {
	t.Helper()
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	fields := url.Values{}
	for _, tag := range inputTag.FindAllString(string(page), -1) {
		attrs := map[string]string{}
		for _, m := range inputAttr.FindAllStringSubmatch(tag, -1) {
			attrs[strings.ToLower(m[1])] = html.UnescapeString(strings.Trim(m[2], `"'`))
		}
		if strings.EqualFold(attrs["type"], "hidden") && attrs["name"] != "" {
			fields.Set(attrs["name"], attrs["value"])
		}
	}
	return fields
}

// direct sends c to the server without prism; apitest checks the answer
// against openapi.yaml.
func direct(t *testing.T, env *apitest.Env, c call, status int) *apitest.Response {
	t.Helper()
	resp := env.Do(apitest.Request{Method: c.method, Path: c.path, Token: c.token, Body: c.body, Header: c.header})
	if resp.StatusCode != status {
		t.Fatalf("%s without prism → %d, want %d: %s", c, resp.StatusCode, status, resp.Body)
	}
	return resp
}

// nextPage is the path and query of a list answer's Link rel="next", which
// must point at prism, the server's public address.
func nextPage(t *testing.T, p *prism, a answer) string {
	t.Helper()
	m := regexp.MustCompile(`^<([^>]+)>;\s*rel="next"$`).FindStringSubmatch(a.header.Get("Link"))
	if m == nil {
		t.Fatalf("%s: Link %q, want a next page", a.call, a.header.Get("Link"))
	}
	path, ok := strings.CutPrefix(m[1], p.URL)
	if !ok {
		t.Fatalf("%s: next page %s is not at the public address %s", a.call, m[1], p.URL)
	}
	return path
}

// keyToken makes a key for org with these permissions and returns a token for it.
func keyToken(t *testing.T, env *apitest.Env, p *prism, org uuid.UUID, permissions ...string) string {
	t.Helper()
	key, _, err := env.App.Auth.CreateKey(t.Context(), nil, env.Owner(t, org), "contract key", permissions, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tok models.TokenResponse
	p.do(t, call{method: "POST", path: "/oauth/token", body: tokenJSON(key.KeyID, key.Secret)}).want(t, http.StatusOK).json(t, &tok)
	return tok.AccessToken
}

// invoiceBody is a create request with every key present, as the contract asks.
func invoiceBody(merchantAccountID, number, amount string, lines ...map[string]any) map[string]any {
	b := map[string]any{
		"merchantAccountId": merchantAccountID, "invoiceNumber": number, "amount": amount,
		"poNumber": nil, "customerName": "Dana Whitfield", "customerCompany": nil,
		"customerEmail": "dana@example.com", "customerPhone": nil, "delivery": nil, "memo": nil,
		"dueDate": nil, "lines": nil, "send": false,
	}
	if len(lines) > 0 {
		b["lines"] = lines
	}
	return b
}

func line(quantity, unitCost any) map[string]any {
	return map[string]any{"description": "Chafing dish rental", "quantity": quantity, "unitCost": unitCost,
		"uom": "EA", "commodityCode": nil, "upc": nil}
}

func tokenForm(id, secret string) string {
	return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}.Encode()
}

func tokenJSON(id, secret string) map[string]string {
	return map[string]string{"grant_type": "client_credentials", "client_id": id, "client_secret": secret}
}

var formHeader = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}

func basicHeader(id, secret string) http.Header {
	return http.Header{
		"Content-Type":  {"application/x-www-form-urlencoded"},
		"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))},
	}
}
