package portal_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/webhook"
)

var (
	webhookSecretIn = regexp.MustCompile(`id="webhook-secret" data-copy="Copy the secret">(whsec_[A-Za-z0-9+/=&#;]{44,100})<`)
	endpointLink    = regexp.MustCompile(`href="/portal/webhooks/([0-9a-f-]{36})"`)
)

// verifies says whether a delivery's webhook-signature holds a signature
// under secret, and how many it holds.
func verifies(t *testing.T, h apitest.Hook, secret string) (bool, int) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(h.Header.Get("webhook-id") + "." + h.Header.Get("webhook-timestamp") + "."))
	m.Write(h.Body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	sigs := strings.Fields(h.Header.Get("webhook-signature"))
	for _, s := range sigs {
		if s == want {
			return true, len(sigs)
		}
	}
	return false, len(sigs)
}

// A member who manages webhooks adds an endpoint in the portal (its secret
// shown once), pings it and sees each delivery attempt with its status
// code and error, on the endpoint's page and the event's; sends the event
// again; rotates the secret so that the old one stops at once (the next
// delivery carries one signature, under the new secret); disables,
// enables and deletes the endpoint. Each change is in the audit log,
// without the secret; the API sees what the portal made.
func TestWebhookEndpointInThePortal(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.WebhooksManage, auth.EventsView, auth.PaymentsView)
	rc := apitest.NewReceiver(t)
	rc.Answer = func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	worker := env.Webhooks(webhook.WorkerConfig{Schedule: []time.Duration{time.Second, time.Second}, AllowPrivate: true})

	list := c.Get("/portal/webhooks").Want(t, http.StatusOK).Has(t, `href="/portal/webhooks" aria-current="page"`,
		`value="*"`, `value="invoice.paid"`, `value="webhook.ping"`, "No endpoints yet.")
	if strings.Contains(list.Body, `value="application.submitted"`) {
		t.Error("a merchant is offered a reseller's event type")
	}
	made := c.Post("/portal/webhooks", list.CSRF(t), url.Values{"url": {rc.URL}, "description": {"Bookkeeping"},
		"eventTypes": {"invoice.created", "card_payment.refunded"}, "idempotencyKey": {formKey(t, list)}}).Want(t, http.StatusCreated).Has(t, "shown only this once")
	secret := webhookSecretIn.FindStringSubmatch(made.Body)
	if secret == nil {
		t.Fatalf("no secret shown:\n%s", made.Body)
	}
	secret[1] = html.UnescapeString(secret[1])
	id := endpointLink.FindStringSubmatch(made.Body)[1]
	// The form sent again (a double click, a reload): nothing more is
	// added; the page shows the endpoint its first sending added.
	twice := c.Post("/portal/webhooks", list.CSRF(t), url.Values{"url": {rc.URL}, "description": {"Bookkeeping"},
		"eventTypes": {"invoice.created", "card_payment.refunded"}, "idempotencyKey": {formKey(t, list)}}).
		Want(t, http.StatusOK).Has(t, "sent more than once", `href="/portal/webhooks/`+id+`"`)
	if got := webhookSecretIn.FindStringSubmatch(twice.Body); got == nil || html.UnescapeString(got[1]) != secret[1] {
		t.Fatalf("the form sent again shows another secret:\n%s", twice.Body)
	}
	c.Post("/portal/webhooks", list.CSRF(t), url.Values{"url": {rc.URL}, "description": {"Edited"},
		"eventTypes": {"invoice.created"}, "idempotencyKey": {formKey(t, list)}}).
		Want(t, http.StatusUnprocessableEntity).Has(t, "already added an endpoint with other values", `value="Edited"`)
	var viaAPI []struct {
		ID         string   `json:"id"`
		URL        string   `json:"url"`
		EventTypes []string `json:"eventTypes"`
	}
	key := env.NewKey(t, org, auth.WebhooksManage)
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: env.Token(key.KeyID, key.Secret)}).JSON(t, &viaAPI)
	if len(viaAPI) != 1 || viaAPI[0].ID != id || viaAPI[0].URL != rc.URL || strings.Join(viaAPI[0].EventTypes, " ") != "invoice.created card_payment.refunded" {
		t.Fatalf("the API lists %+v", viaAPI)
	}
	page := c.Get("/portal/webhooks").Has(t, rc.URL, "Bookkeeping", "<code>invoice.created</code>, <code>card_payment.refunded</code>")
	if strings.Contains(page.Body, secret[1]) {
		t.Fatal("the secret is shown again")
	}

	// A ping, answered 500 then 204: two attempts, each with its code.
	endpoint := c.Get("/portal/webhooks/"+id).Want(t, http.StatusOK).Has(t, "No attempts yet.")
	c.Post("/portal/webhooks/"+id+"/ping", endpoint.CSRF(t), nil).WantRedirect(t, "/portal/webhooks/"+id+"?done=pinged")
	apitest.Deliver(t, worker)
	env.Clock.Advance(2 * time.Second)
	apitest.Deliver(t, worker)
	endpoint = c.Get("/portal/webhooks/"+id).Has(t, "webhook.ping")
	rows := attemptRows(endpoint.Body)
	if len(rows) != 2 || !strings.Contains(rows[0], ">204<") || !strings.Contains(rows[0], "Delivered") ||
		!strings.Contains(rows[1], ">500<") || !strings.Contains(rows[1], "HTTP 500") || !strings.Contains(rows[1], "tried again later") {
		t.Fatalf("the endpoint's attempts, newest first:\n%s\n%s\n%s", strings.Join(rows, "\n"), endpoint.Body, env.Log.String())
	}
	if ok, n := verifies(t, rc.Hooks()[1], secret[1]); !ok || n != 1 {
		t.Errorf("the ping is not signed with the secret shown (%d signatures)", n)
	}
	ping := regexp.MustCompile(`href="/portal/events/([0-9a-f-]{36})"`).FindStringSubmatch(endpoint.Body)[1]
	ev := c.Get("/portal/events/"+ping).Want(t, http.StatusOK).Has(t, "webhook.ping", rc.URL, "Delivered <time datetime=", `&#34;type&#34;: &#34;webhook.ping&#34;`)
	if rows := attemptRows(ev.Body); len(rows) != 2 || !strings.Contains(rows[0], ">500<") || !strings.Contains(rows[1], ">204<") {
		t.Errorf("the event's attempts, oldest first:\n%s", strings.Join(rows, "\n"))
	}
	c.Post("/portal/events/"+ping+"/redeliver", ev.CSRF(t), nil).WantRedirect(t, "/portal/events/"+ping+"?done=redelivered")

	// Rotated, the old secret stopping at once: the redelivery carries the
	// new one alone.
	rotation := url.Values{"expireCurrentInSeconds": {"0"}, "idempotencyKey": {formKey(t, endpoint)}}
	rotated := c.Post("/portal/webhooks/"+id+"/rotate-secret", endpoint.CSRF(t), rotation).
		Want(t, http.StatusOK).Has(t, "shown only this once")
	second := webhookSecretIn.FindStringSubmatch(rotated.Body)
	if second == nil || html.UnescapeString(second[1]) == secret[1] {
		t.Fatalf("no new secret:\n%s", rotated.Body)
	}
	second[1] = html.UnescapeString(second[1])
	// The form sent again rotates nothing: the same secret, which the
	// redelivery below is signed with alone.
	again := c.Post("/portal/webhooks/"+id+"/rotate-secret", endpoint.CSRF(t), rotation).
		Want(t, http.StatusOK).Has(t, "it was not rotated again")
	if got := webhookSecretIn.FindStringSubmatch(again.Body); got == nil || html.UnescapeString(got[1]) != second[1] {
		t.Fatalf("the rotation sent again shows another secret:\n%s", again.Body)
	}
	apitest.Deliver(t, worker)
	hooks := rc.Hooks()
	if len(hooks) != 3 {
		t.Fatalf("the receiver got %d requests, want 3", len(hooks))
	}
	if ok, n := verifies(t, hooks[2], second[1]); !ok || n != 1 {
		t.Errorf("after a rotation stopping the old secret: signed by the new %v, %d signatures", ok, n)
	}
	c.Get("/portal/events/"+ping).Has(t, "Delivered")
	if rows := attemptRows(c.Get("/portal/webhooks/" + id).Body); len(rows) != 3 {
		t.Errorf("%d attempts after the redelivery, want 3", len(rows))
	}

	c.Post("/portal/webhooks/"+id+"/status", endpoint.CSRF(t), url.Values{"status": {"disabled"}}).
		WantRedirect(t, "/portal/webhooks/"+id+"?done=disabled")
	c.Get("/portal/webhooks/"+id).Has(t, "Disabled: Disabled in the portal by Member", `value="enabled"`)
	c.Post("/portal/webhooks/"+id+"/status", endpoint.CSRF(t), url.Values{"status": {"enabled"}}).
		WantRedirect(t, "/portal/webhooks/"+id+"?done=enabled")
	c.Get("/portal/webhooks/"+id+"/delete").Want(t, http.StatusOK).Has(t, "Delete the endpoint")
	c.Post("/portal/webhooks/"+id+"/delete", endpoint.CSRF(t), nil).WantRedirect(t, "/portal/webhooks?done=deleted")
	if list, err := env.App.Webhooks.Endpoints(t.Context(), org); err != nil || len(list) != 0 {
		t.Fatalf("endpoints after the deletion: %+v, %v", list, err)
	}
	c.Get("/portal/webhooks/"+id).Want(t, http.StatusNotFound)

	var audit []string
	if err := env.App.DB.Select(&audit, `SELECT action FROM audit_log WHERE organization_id = $1 AND action LIKE 'webhook%' ORDER BY at, id`, org); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(audit, ", "); got != "webhook endpoint created, webhook endpoint pinged, webhook event sent again, webhook secret rotated, "+
		"webhook endpoint changed, webhook endpoint changed, webhook endpoint deleted" {
		t.Errorf("the audit log: %s", got)
	}
	log := c.Get("/portal/audit").Body + env.Log.String()
	for _, s := range []string{secret[1], second[1]} {
		if strings.Contains(log, s) || strings.Contains(log, url.QueryEscape(s)) {
			t.Errorf("a secret is in the log or the audit log")
		}
	}
}

// attemptRows are the rows of the attempts tables of a page.
func attemptRows(body string) []string {
	var rows []string
	for _, table := range strings.Split(body, "<tbody>")[1:] {
		table = table[:strings.Index(table, "</tbody>")]
		rows = append(rows, strings.Split(table, "<tr>")[1:]...)
	}
	return rows
}

// A member is offered only the event types whose data it may read, and
// one it may not read is refused with 403 naming the permission; a bad
// URL, no type, a description too long or a rotation out of range is a 400
// beside its field, the values kept; an eleventh ping within a minute is a
// 429 saying when to come back; a forged form is a 403. Nothing is made.
func TestWebhookRefusals(t *testing.T) {
	t.Parallel()
	env, seed := newEnv(t)
	org := seed.Merchant.OrganizationID
	count := func() int {
		list, err := env.App.Webhooks.Endpoints(t.Context(), org)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}

	narrow, _ := portaltest.SignedIn(t, env, org, "Member", auth.WebhooksManage)
	page := narrow.Get("/portal/webhooks").Want(t, http.StatusOK).Has(t, `value="webhook.ping"`)
	for _, v := range []string{`value="*"`, `value="invoice.paid"`} {
		if strings.Contains(page.Body, v) {
			t.Errorf("a member without payments.view or events.view is shown %s", v)
		}
	}
	refused := narrow.Post("/portal/webhooks", page.CSRF(t), url.Values{"url": {"https://hooks.example.com/a"}, "eventTypes": {"invoice.paid"},
		"idempotencyKey": {formKey(t, page)}}).
		Want(t, http.StatusForbidden).Has(t, "payments.view", `value="https://hooks.example.com/a"`)
	if !strings.HasPrefix(between(refused.Body, "<title>", "</title>"), "Error: ") {
		t.Errorf("the refusal's title does not say so: %s", between(refused.Body, "<title>", "</title>"))
	}
	narrow.Post("/portal/webhooks", page.CSRF(t), url.Values{"url": {"https://hooks.example.com/a"}, "eventTypes": {"*"},
		"idempotencyKey": {formKey(t, page)}}).Want(t, http.StatusForbidden)

	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.WebhooksManage, auth.PaymentsView)
	page = c.Get("/portal/webhooks")
	key := formKey(t, page)
	c.Post("/portal/webhooks", page.CSRF(t), url.Values{"url": {"ftp://hooks.example.com/a"}, "eventTypes": {"invoice.paid"}, "idempotencyKey": {key}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "url", "https://").Has(t, `value="invoice.paid" checked`)
	c.Post("/portal/webhooks", page.CSRF(t), url.Values{"url": {"https://hooks.example.com/a"}, "description": {"kept"}, "idempotencyKey": {key}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "eventTypes", "at least one").Has(t, `value="kept"`)
	c.Post("/portal/webhooks", page.CSRF(t), url.Values{"url": {"https://hooks.example.com/a"}, "eventTypes": {"invoice.eaten"}, "idempotencyKey": {key}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "eventTypes", "known event types")
	c.Post("/portal/webhooks", page.CSRF(t), url.Values{"url": {"https://hooks.example.com/a"}, "eventTypes": {"*"},
		"description": {strings.Repeat("d", 501)}, "idempotencyKey": {key}}).Want(t, http.StatusBadRequest).ErrorBeside(t, "description", "500")
	c.Do("POST", "/portal/webhooks", url.Values{"url": {"https://hooks.example.com/a"}, "eventTypes": {"*"}}, nil).Want(t, http.StatusForbidden)
	c.Post("/portal/webhooks", page.CSRF(t), url.Values{"url": {"https://hooks.example.com/a"}, "eventTypes": {"*"}}).
		Want(t, http.StatusBadRequest).Has(t, "This form is incomplete", `value="https://hooks.example.com/a"`)
	if n := count(); n != 0 {
		t.Fatalf("%d endpoints made by refused forms", n)
	}

	// A refused form leaves its key free: the same form, corrected, adds one.
	made := c.Post("/portal/webhooks", page.CSRF(t), url.Values{"url": {"https://hooks.example.com/a"}, "eventTypes": {"*"},
		"idempotencyKey": {key}}).Want(t, http.StatusCreated)
	id := endpointLink.FindStringSubmatch(made.Body)[1]
	c.Post("/portal/webhooks/"+id+"/rotate-secret", page.CSRF(t), url.Values{"expireCurrentInSeconds": {"soon"}, "idempotencyKey": {key}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "expireCurrentInSeconds", "0 to 86400")
	c.Post("/portal/webhooks/"+id+"/rotate-secret", page.CSRF(t), url.Values{"expireCurrentInSeconds": {"0"}}).
		Want(t, http.StatusBadRequest).Has(t, "This form is incomplete")
	c.Post("/portal/webhooks/"+id+"/status", page.CSRF(t), url.Values{"status": {"paused"}}).Want(t, http.StatusBadRequest)
	for range webhook.MaxRequestedSends {
		c.Post("/portal/webhooks/"+id+"/ping", page.CSRF(t), nil).WantRedirect(t, "/portal/webhooks/"+id+"?done=pinged")
	}
	limited := c.Post("/portal/webhooks/"+id+"/ping", page.CSRF(t), nil).Want(t, http.StatusTooManyRequests)
	if limited.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on the 429")
	}
	if e, err := env.App.Webhooks.Endpoint(t.Context(), org, uuid.MustParse(id)); err != nil || e.Status != webhook.Enabled {
		t.Errorf("the endpoint after refused changes: %+v, %v", e, err)
	}
}

// A member holding webhooks.manage without payments.view changes,
// rotates (the new secret never shown), pings, redelivers to and deletes
// no invoice.paid endpoint: each is a 403 naming payments.view, and the
// endpoint is as it was. A member holding both does each.
func TestWebhookActionsNeedTheTypesPermissions(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	e, _, _, err := env.App.Webhooks.Create(t.Context(), webhook.Actor{OrganizationID: org, Permissions: auth.PermissionsFor(auth.KindMerchant)},
		webhook.NewEndpoint{URL: "https://hooks.example.com/paid", EventTypes: []string{"invoice.paid"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ping, err := env.App.Webhooks.Ping(t.Context(), webhook.Actor{OrganizationID: org, Permissions: auth.PermissionsFor(auth.KindMerchant)}, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	path := "/portal/webhooks/" + e.ID.String()
	actions := []struct {
		path string
		form url.Values
	}{
		{path + "/status", url.Values{"status": {"disabled"}}},
		{path + "/rotate-secret", url.Values{"expireCurrentInSeconds": {"0"}, "idempotencyKey": {uuid.NewString()}}},
		{path + "/ping", nil},
		{"/portal/events/" + ping.String() + "/redeliver", nil},
		{path + "/delete", nil},
	}
	narrow, _ := portaltest.SignedIn(t, env, org, "Member", auth.WebhooksManage, auth.EventsView)
	csrf := narrow.Get("/portal/webhooks").Want(t, http.StatusOK).CSRF(t)
	for _, a := range actions {
		got := narrow.Post(a.path, csrf, a.form).Want(t, http.StatusForbidden).Has(t, "payments.view")
		if strings.Contains(got.Body, "whsec_") {
			t.Errorf("%s: a refusal shows a secret", a.path)
		}
	}
	after, err := env.App.Webhooks.Endpoint(t.Context(), org, e.ID)
	if err != nil || after.Status != webhook.Enabled {
		t.Fatalf("after the refusals: %+v, %v", after, err)
	}
	var sends int
	if err := env.App.DB.Get(&sends, `SELECT cardinality(requested_sends) FROM webhook_endpoints WHERE id = $1`, e.ID); err != nil || sends != 1 {
		t.Errorf("sends recorded: %d (%v), want the first ping's alone", sends, err)
	}
	if got := auditOf(t, env, org, "webhook secret rotated"); len(got) != 0 {
		t.Errorf("refused rotations audited: %q", got)
	}

	wide, _ := portaltest.SignedIn(t, env, org, "Member", auth.WebhooksManage, auth.EventsView, auth.PaymentsView)
	csrf = wide.Get("/portal/webhooks").Want(t, http.StatusOK).CSRF(t)
	for _, a := range actions {
		if got := wide.Post(a.path, csrf, a.form); got.Status >= 400 {
			t.Errorf("%s with payments.view: %d", a.path, got.Status)
		}
	}
}
