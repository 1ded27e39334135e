package api_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/webhook"
)

// TestNothingSecretInTheLog runs the whole flow, at debug level, with the
// delivery worker logging beside the server: tokens by form, JSON and
// Basic (and refused ones), an invoice created, replayed and delivered, the
// pay page with a saved card, declined and invalid cards, the card removed,
// card payments read and refunded, the reseller's applications, and its
// sign-up page's forms, refused and taken. Then no key secret, access
// token, pay link or form token, card number, security code, social
// security number, tax id or bank account number may appear anywhere in
// the log.
func TestNothingSecretInTheLog(t *testing.T) {
	// A database of its own, so its worker delivers no other test's messages.
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{
		Configure: func(c *config.Config) { c.LogLevel = "debug" },
		Clock:     apitest.NewClock(time.Now().Truncate(time.Second)),
	})
	worker, err := delivery.NewWorker(env.App.DB, delivery.Config{
		Invoices: env.App.Invoices, DataDir: env.App.Config.DataDir, PollInterval: 20 * time.Millisecond,
	}, env.App.Config.Logger(env.Log), env.Clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { worker.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	var secrets []string // everything that must not be logged
	keep := func(s ...string) {
		for _, v := range s {
			if v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	seed := env.Seed()
	extra := env.NewKey(t, seed.Merchant.OrganizationID, auth.PaymentsCreate, auth.PaymentsView)
	keep(seed.Merchant.Secret, seed.Reseller.Secret, extra.Secret)

	// Tokens through each channel, and refused attempts with wrong secrets.
	token := func(resp *apitest.Response) string {
		var tok models.TokenResponse
		if resp.StatusCode == http.StatusOK {
			resp.JSON(t, &tok)
			keep(tok.AccessToken, tok.AccessToken[strings.LastIndex(tok.AccessToken, ".")+1:])
		}
		return tok.AccessToken
	}
	merchant := token(env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Header: formHeader,
		Body: formBody("client_credentials", seed.Merchant.KeyID, seed.Merchant.Secret)}))
	token(env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: map[string]string{
		"grant_type": "client_credentials", "client_id": extra.KeyID, "client_secret": extra.Secret}}))
	reseller := token(env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: "grant_type=client_credentials",
		Header: basicHeader(seed.Reseller.KeyID, seed.Reseller.Secret)}))
	wrong := "ms_" + strings.Repeat("W", 40)
	keep(wrong)
	env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Header: formHeader, Body: formBody("client_credentials", seed.Merchant.KeyID, wrong)})
	env.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: "grant_type=client_credentials", Header: basicHeader(seed.Merchant.KeyID, wrong)})
	env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: merchant + "x"})
	if merchant == "" || reseller == "" {
		t.Fatal("no token")
	}

	// An invoice, created (and replayed) and sent; the worker delivers it.
	m := merchant0(t, env, merchant)
	b := m.Body("LOG-1", "100.00", apitest.Line("2", "30.00"), apitest.Line("1", "40.00"))
	b["send"], b["customerPhone"] = true, "+15035550123"
	idem := http.Header{"Idempotency-Key": {"log-test-" + uuid.NewString()}}
	resp := m.Create(t, b, idem)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
	m.Create(t, b, idem)
	var inv models.Invoice
	resp.JSON(t, &inv)
	path := apitest.PayPath(t, inv)
	keep(strings.TrimPrefix(path, "/pay/"))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(env.Log.String(), "message written to file") {
		if time.Now().After(deadline) {
			t.Fatalf("the worker delivered nothing: %s", env.Log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The pay page: an invalid number, a decline, then a payment saving the
	// card and a change of preference; the receipt.
	shown := env.Visit(t, "GET", path, nil, nil)
	keep(apitest.FormToken(t, shown))
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: "4111 1111 1111 1112", Amount: "10.00"}), http.StatusBadRequest)
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "10.00", Save: true}), http.StatusPaymentRequired)
	paid := env.Pay(t, path, apitest.Payment{Card: "4111-1111-1111-1111", Amount: "10.00", Save: true, Prefers: "text"})
	apitest.WantStatus(t, paid, http.StatusSeeOther)
	env.Visit(t, "GET", paid.Header.Get("Location"), nil, nil)
	keep(apitest.CardApprove, "4111 1111 1111 1112", "4111111111111112", "4111-1111-1111-1111", apitest.CardDecline)

	// Addresses no front knows, each holding the pay link's token: a
	// request no route took is logged as unmatched, never by its path.
	payToken := strings.TrimPrefix(path, "/pay/")
	for _, p := range []string{"//pay/", "/pay//", "/PAY/", "/pay/./", "/api/pay/", "/pay/%2e/", "/pay/assets/../"} {
		env.Visit(t, "GET", p+payToken, nil, nil)
		env.Visit(t, "POST", p+payToken, url.Values{"amount": {"1.00"}}, nil)
	}
	env.Visit(t, "GET", path+"/receipt", nil, nil)
	env.Visit(t, "DELETE", path, nil, nil)

	// The saved card removed through the API.
	got, raw := m.Read(t, inv.Id)
	if len(*got.SavedCards) != 1 {
		t.Fatalf("saved cards: %s", raw)
	}
	if r := env.Do(apitest.Request{Method: "DELETE", Path: "/saved-cards/" + (*got.SavedCards)[0].Id.String(), Token: merchant}); r.StatusCode != http.StatusNoContent {
		t.Fatalf("delete card: %d %s", r.StatusCode, r.Body)
	}

	// The card payments listed and read, the sale refunded (with a key,
	// and replayed), and a refund refused.
	sale := (*got.Payments)[0].Id.String()
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments", Token: merchant})
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + sale, Token: merchant})
	refundKey := http.Header{"Idempotency-Key": {"log-refund-" + uuid.NewString()}}
	for range 2 {
		env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + sale + "/refund", Token: merchant, Header: refundKey,
			Body: map[string]any{"amount": "4.00", "reason": "log test"}})
	}
	env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + sale + "/refund", Token: merchant, Body: map[string]any{"amount": "99.00"}})

	// A webhook endpoint made, its secret rotated, deliveries failed and
	// made, with the worker logging to the same log.
	rc := apitest.NewReceiver(t)
	rc.Answer = func(n int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader([]int{500, 410, 200}[min(n, 3)-1]) }
	var ep, rotated models.WebhookEndpointWithSecret
	env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: merchant,
		Body: map[string]any{"url": rc.URL, "eventTypes": []string{"*"}}}).JSON(t, &ep)
	env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + ep.Id.String() + "/rotate-secret", Token: merchant}).JSON(t, &rotated)
	for _, s := range []string{ep.Secret, rotated.Secret} {
		keep(s, strings.TrimPrefix(s, "whsec_"))
	}
	env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + ep.Id.String() + "/ping", Token: merchant})
	hooks := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true, Schedule: []time.Duration{time.Nanosecond}})
	apitest.Deliver(t, hooks)
	if len(rc.Hooks()) == 0 {
		t.Fatal("no webhook delivered")
	}
	for _, h := range rc.Hooks() {
		keep(h.Header.Get("webhook-signature"))
	}

	// The reseller reads its portfolio and every application, one of them
	// added now with numbers known here.
	re := &resellerEnv{Env: env, org: seed.Reseller.OrganizationID, token: reseller}
	added := re.addApplication(t, seed.Reseller.OrganizationID, "Logged")
	re.setStage(t, added, "needs_info", "Send a voided check.")
	re.get(t, "/organizations/"+re.org.String()+"/portfolio", http.StatusOK)
	var apps []models.Application
	for next := "/applications?limit=2"; next != ""; {
		r := re.get(t, next, http.StatusOK)
		var page []models.Application
		r.JSON(t, &page)
		apps = append(apps, page...)
		next = re.nextLink(t, r)
	}
	for _, a := range apps {
		re.get(t, "/applications/"+a.Id.String(), http.StatusOK)
	}
	// The reseller's sign-up page: a form refused (its numbers not sent
	// back), a form taken, its thank-you page.
	applicant := env.NewApplicant()
	refused := apitest.ApplicationForm()
	refused.Set("bank.routingNumber", "111000026")
	apitest.WantStatus(t, applicant.Send(t, seed.Reseller.Slug, refused), http.StatusBadRequest)
	taken := applicant.Send(t, seed.Reseller.Slug, apitest.ApplicationForm())
	apitest.WantStatus(t, taken, http.StatusSeeOther)
	apitest.WantStatus(t, applicant.Visit(t, "GET", taken.Header.Get("Location"), nil), http.StatusOK)
	keep(apitest.FormSecrets...)
	keep(fullNumbers(t, re, re.org)...)
	keep("870000001", "600000001", "99887766") // the added application's tax id, SSN, account

	// The fourth round's operations log as the others do: never their token.
	if r := env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: merchant,
		Body: map[string]any{"email": "log-check@example.com", "name": "Log Check"}}); r.StatusCode != http.StatusCreated {
		t.Fatalf("create customer: %d %s", r.StatusCode, r.Body)
	}
	for _, path := range []string{"/customers?q=Log", "/terminals", "/terminal-payments", "/recurring-invoices"} {
		if r := env.Do(apitest.Request{Method: "GET", Path: path, Token: merchant}); r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.StatusCode, r.Body)
		}
	}

	logs := env.Log.String()
	for _, want := range []string{`"path":"/oauth/token"`, `"path":"/payment-requests"`, `"path":"/pay/:token"`,
		`"path":"/customers"`, `"path":"/terminals"`, `"path":"/terminal-payments"`, `"path":"/recurring-invoices"`,
		`"path":"/saved-cards/:id"`, `"path":"/applications/:id"`, `"path":"/apply/:slug"`, `"path":"/apply/:slug/thanks/:reference"`, `"path":"unmatched"`, "message delivered", "webhook: delivery attempt failed"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the log lacks %s, so the flow did not run as meant:\n%s", want, logs)
		}
	}
	for _, s := range secrets {
		for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s))} {
			if strings.Contains(logs, form) {
				i := strings.Index(logs, form)
				t.Errorf("the log holds %q: …%s…", s, logs[max(0, i-120):min(len(logs), i+len(form)+40)])
			}
		}
	}
	// The security code is short enough to turn up in ids and durations by
	// chance, so it is looked for as a value, and the form's field names
	// must not be logged at all.
	for _, s := range []string{`"` + apitest.TestCVV + `"`, "=" + apitest.TestCVV, "cvv", "cardNumber", "client_secret", "Authorization", "Bearer ",
		"taxId", "ssn", "accountNumber"} {
		if strings.Contains(logs, s) {
			t.Errorf("the log holds %q", s)
		}
	}
}

// merchant0 is a merchant of the env's first seed with a token in hand.
func merchant0(t *testing.T, env *apitest.Env, token string) apitest.Merchant {
	t.Helper()
	m := apitest.Merchant{Env: env, Token: token}
	env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: token}).JSON(t, &m.MIDs)
	env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token}).JSON(t, &m.Locs)
	return m
}
