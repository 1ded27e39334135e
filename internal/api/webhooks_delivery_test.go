package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/webhook"
)

// webhookEnv is an instance on a database of its own (a worker delivers
// every organization's webhooks) with a merchant and a receiver
// subscribed to everything.
func webhookEnv(t *testing.T, clock *apitest.Clock) (*apitest.Env, apitest.Merchant, *apitest.Receiver, models.WebhookEndpointWithSecret) {
	t.Helper()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: clock})
	m := apitest.NewMerchant(t, env)
	rc := apitest.NewReceiver(t)
	knownCustomer(t, env, m)
	return env, m, rc, endpoint(t, env, m.Token, rc.URL, "*")
}

// knownCustomer makes the customer of the merchant's invoices (apitest's
// Body) and fans its event out before any endpoint subscribes, so that
// each invoice a test makes brings only its own events.
func knownCustomer(t *testing.T, env *apitest.Env, m apitest.Merchant) {
	t.Helper()
	newCustomer(t, m, map[string]any{"email": "dana@example.com", "name": "Dana Whitfield"})
	apitest.Deliver(t, env.Webhooks(webhook.WorkerConfig{AllowPrivate: true}))
}

type eventDetail struct {
	hookEvent
	Deliveries []models.EventDelivery `json:"deliveries"`
}

func eventOf(t *testing.T, env *apitest.Env, m apitest.Merchant, id string) eventDetail {
	t.Helper()
	var d eventDetail
	resp := env.Do(apitest.Request{Method: "GET", Path: "/events/" + id, Token: m.Token})
	apitest.Want(t, "get event", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &d)
	return d
}

// A failed delivery is tried again on the schedule (compressed here as
// PAYREQ_WEBHOOK_RETRY_SCHEDULE compresses it), later when a 503 says so
// in Retry-After, with the same webhook-id; each attempt's status and
// error are kept; after the last try the delivery has failed.
func TestWebhookRetries(t *testing.T) {
	clock := apitest.NewClock(time.Now())
	env, m, rc, _ := webhookEnv(t, clock)
	rc.Answer = func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2:
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}
	worker := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true, Schedule: []time.Duration{time.Second, 2 * time.Second}})
	inv := m.MustCreate(t, m.Body("RT-1", "10.00"))
	apitest.Want(t, "first attempt", apitest.Deliver(t, worker), 1)
	hooks := rc.Hooks()
	id := hooks[0].Header.Get("webhook-id")
	d := eventOf(t, env, m, id).Deliveries[0]
	apitest.Want(t, "after a 500: status", d.Status, models.EventDeliveryStatusPending)
	apitest.Want(t, "after a 500: lastStatusCode", *d.LastStatusCode, int32(500))
	apitest.WantText(t, "after a 500: lastError", d.LastError, "HTTP 500")
	apitest.Want(t, "nothing due at once", apitest.Deliver(t, worker), 0)

	clock.Advance(1200 * time.Millisecond) // past 1 s ± 10 %
	apitest.Want(t, "second attempt", apitest.Deliver(t, worker), 1)
	clock.Advance(3 * time.Second) // past the schedule's 2 s, not the 60 s asked
	apitest.Want(t, "Retry-After honoured", apitest.Deliver(t, worker), 0)
	clock.Advance(time.Minute)
	apitest.Want(t, "third attempt", apitest.Deliver(t, worker), 1)
	d = eventOf(t, env, m, id).Deliveries[0]
	apitest.Want(t, "delivered", d.Status, models.EventDeliveryStatusDelivered)
	apitest.Want(t, "attempts", d.Attempts, int32(3))
	apitest.Want(t, "deliveredAt", d.DeliveredAt != nil, true)
	apitest.Want(t, "lastError cleared", d.LastError == nil, true)
	for _, h := range rc.Hooks() {
		apitest.Want(t, "the same webhook-id on every try", h.Header.Get("webhook-id"), id)
	}

	// Failing every time: two retries, then failed.
	rc.Answer = func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }
	env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/cancel", Token: m.Token})
	for range 3 {
		apitest.Want(t, "attempt", apitest.Deliver(t, worker), 1)
		clock.Advance(3 * time.Second)
	}
	apitest.Want(t, "no fourth attempt", apitest.Deliver(t, worker), 0)
	var cancelled []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=invoice.cancelled", Token: m.Token}).JSON(t, &cancelled)
	d = eventOf(t, env, m, cancelled[0].ID.String()).Deliveries[0]
	apitest.Want(t, "failed", d.Status, models.EventDeliveryStatusFailed)
	apitest.Want(t, "failed after", d.Attempts, int32(3))
	apitest.Want(t, "last status", *d.LastStatusCode, int32(502))
}

func endpointOf(t *testing.T, env *apitest.Env, m apitest.Merchant, id uuid.UUID) models.WebhookEndpoint {
	t.Helper()
	var e models.WebhookEndpoint
	resp := env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints/" + id.String(), Token: m.Token})
	apitest.Want(t, "get endpoint", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &e)
	return e
}

// A 410 disables the endpoint at once; five days without a successful
// delivery do too; a disabled endpoint is sent nothing until enabled again.
func TestWebhookEndpointsDisabled(t *testing.T) {
	clock := apitest.NewClock(time.Now())
	env, m, rc, gone := webhookEnv(t, clock)
	rc.Answer = func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) }
	worker := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true, Schedule: []time.Duration{24 * time.Hour, 24 * time.Hour, 24 * time.Hour}})
	m.MustCreate(t, m.Body("GONE-1", "10.00"))
	apitest.Deliver(t, worker)
	e := endpointOf(t, env, m, gone.Id)
	apitest.Want(t, "after a 410", e.Status, models.WebhookEndpointStatusDisabled)
	apitest.WantText(t, "disabledReason", e.DisabledReason, "The endpoint answered 410 Gone.")
	m.MustCreate(t, m.Body("GONE-2", "10.00"))
	apitest.Want(t, "a disabled endpoint gets nothing", apitest.Deliver(t, worker), 0)
	apitest.Want(t, "requests to the gone endpoint", len(rc.Hooks()), 1)
	var enabled models.WebhookEndpoint
	env.Do(apitest.Request{Method: "PATCH", Path: "/webhook-endpoints/" + gone.Id.String(), Token: m.Token,
		Body: map[string]any{"status": "enabled"}}).JSON(t, &enabled)
	apitest.Want(t, "enabled again", enabled.DisabledReason == nil && enabled.Status == models.WebhookEndpointStatusEnabled, true)
	env.Do(apitest.Request{Method: "DELETE", Path: "/webhook-endpoints/" + gone.Id.String(), Token: m.Token})

	failing := apitest.NewReceiver(t)
	failing.Answer = func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }
	ep := endpoint(t, env, m.Token, failing.URL, "invoice.created")
	m.MustCreate(t, m.Body("DOWN-1", "10.00"))
	apitest.Deliver(t, worker)
	clock.Advance(3 * 24 * time.Hour)
	m.Renew()
	m.MustCreate(t, m.Body("DOWN-2", "10.00"))
	apitest.Deliver(t, worker)
	apitest.Want(t, "after 3 days of failures", endpointOf(t, env, m, ep.Id).Status, models.WebhookEndpointStatusEnabled)
	clock.Advance(2*24*time.Hour + time.Minute)
	m.Renew()
	m.MustCreate(t, m.Body("DOWN-3", "10.00"))
	apitest.Deliver(t, worker)
	e = endpointOf(t, env, m, ep.Id)
	apitest.Want(t, "after 5 days of failures", e.Status, models.WebhookEndpointStatusDisabled)
	apitest.WantText(t, "disabledReason", e.DisabledReason, "No delivery succeeded for 5 days.")
}

// After a rotation both secrets sign for 24 hours, so a receiver verifies
// with either; then only the new one.
func TestWebhookSecretRotation(t *testing.T) {
	clock := apitest.NewClock(time.Now())
	env, m, rc, ep := webhookEnv(t, clock)
	worker := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true})
	var rotated, replayed models.WebhookEndpointWithSecret
	key := http.Header{"Idempotency-Key": {uuid.NewString()}}
	resp := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + ep.Id.String() + "/rotate-secret", Token: m.Token, Header: key})
	apitest.Want(t, "rotate", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &rotated)
	if rotated.Secret == ep.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") {
		t.Fatalf("new secret %q", rotated.Secret)
	}
	// Sent again with its key, it rotates nothing: rotated twice, the old
	// secret checked below would have stopped at once.
	resp = env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + ep.Id.String() + "/rotate-secret", Token: m.Token, Header: key})
	apitest.Want(t, "rotation sent again", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &replayed)
	apitest.Want(t, "secret of the rotation sent again", replayed.Secret, rotated.Secret)
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + ep.Id.String() + "/rotate-secret",
		Token: m.Token, Header: key, Body: map[string]any{"expireCurrentInSeconds": 0}}), http.StatusUnprocessableEntity, "Idempotency key reused")
	m.MustCreate(t, m.Body("ROT-1", "10.00"))
	apitest.Deliver(t, worker)
	h := rc.Hooks()[0]
	apitest.Want(t, "signatures during the rotation", len(strings.Fields(h.Header.Get("webhook-signature"))), 2)
	verified(t, []apitest.Hook{h}, ep.Secret, true)
	verified(t, []apitest.Hook{h}, rotated.Secret, true)

	clock.Advance(25 * time.Hour)
	m.Renew()
	m.MustCreate(t, m.Body("ROT-2", "10.00"))
	apitest.Deliver(t, worker)
	h = rc.Hooks()[1]
	apitest.Want(t, "signatures after the rotation", len(strings.Fields(h.Header.Get("webhook-signature"))), 1)
	verified(t, []apitest.Hook{h}, rotated.Secret, false)
	old, _ := standardwebhooks.NewWebhook(ep.Secret)
	if old.VerifyIgnoringTimestamp(h.Body, h.Header) == nil {
		t.Error("the old secret still verifies a day after the rotation")
	}
}

// expireCurrentInSeconds says how long the old secret keeps signing: 0
// stops it at once (a leaked secret), so the next delivery carries one
// signature, the new secret's. Out of range is a 400 that changes nothing.
func TestWebhookSecretExpiry(t *testing.T) {
	clock := apitest.NewClock(time.Now())
	env, m, rc, ep := webhookEnv(t, clock)
	worker := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true})
	rotate := func(body any) *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + ep.Id.String() + "/rotate-secret", Token: m.Token, Body: body})
	}
	signatures := func(h apitest.Hook) int { return len(strings.Fields(h.Header.Get("webhook-signature"))) }
	for _, bad := range []any{-1, 86401, 1.5, "0", nil} {
		p := apitest.WantProblem(t, rotate(map[string]any{"expireCurrentInSeconds": bad}), http.StatusBadRequest, "")
		if p.Errors == nil || len((*p.Errors)["expireCurrentInSeconds"]) == 0 {
			t.Errorf("expireCurrentInSeconds %v: errors %v, want expireCurrentInSeconds", bad, p.Errors)
		}
	}
	// A typo must not fall back to the default and keep a leaked secret a day.
	apitest.WantProblem(t, rotate(map[string]any{"expireCurrentInSecond": 0}), http.StatusBadRequest, "")
	m.MustCreate(t, m.Body("EXP-1", "10.00"))
	apitest.Deliver(t, worker)
	apitest.Want(t, "signatures after refused rotations", signatures(rc.Hooks()[0]), 1)
	verified(t, rc.Hooks()[:1], ep.Secret, true)

	var now models.WebhookEndpointWithSecret
	resp := rotate(map[string]any{"expireCurrentInSeconds": 0})
	apitest.Want(t, "rotate at once", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &now)
	m.MustCreate(t, m.Body("EXP-2", "10.00"))
	apitest.Deliver(t, worker)
	h := rc.Hooks()[1]
	apitest.Want(t, "signatures after a rotation at once", signatures(h), 1)
	verified(t, []apitest.Hook{h}, now.Secret, true)
	old, _ := standardwebhooks.NewWebhook(ep.Secret)
	if old.Verify(h.Body, h.Header) == nil {
		t.Error("the old secret still verifies after a rotation with expireCurrentInSeconds 0")
	}

	var minute models.WebhookEndpointWithSecret
	resp = rotate(map[string]any{"expireCurrentInSeconds": 60})
	apitest.Want(t, "rotate for a minute", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &minute)
	m.MustCreate(t, m.Body("EXP-3", "10.00"))
	apitest.Deliver(t, worker)
	h = rc.Hooks()[2]
	apitest.Want(t, "signatures within the minute", signatures(h), 2)
	verified(t, []apitest.Hook{h}, now.Secret, true)
	verified(t, []apitest.Hook{h}, minute.Secret, true)
	clock.Advance(61 * time.Second)
	m.MustCreate(t, m.Body("EXP-4", "10.00"))
	apitest.Deliver(t, worker)
	apitest.Want(t, "signatures after the minute", signatures(rc.Hooks()[3]), 1)
	verified(t, rc.Hooks()[3:], minute.Secret, true)
}

// Pings and redeliveries: at most 10 a minute per endpoint. The 11th is a
// 429 with Retry-After that sends nothing; another endpoint is not held
// back; a minute later the endpoint takes them again.
func TestWebhookPingAndRedeliverLimit(t *testing.T) {
	clock := apitest.NewClock(time.Now())
	env := apitest.New(t, testDSN, apitest.Options{Clock: clock})
	m := apitest.NewMerchant(t, env)
	limited := endpoint(t, env, m.Token, "https://hooks.example.com/limited", "invoice.created")
	other := endpoint(t, env, m.Token, "https://hooks.example.com/other", "webhook.ping")
	ping := func(id uuid.UUID) *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + id.String() + "/ping", Token: m.Token})
	}
	m.MustCreate(t, m.Body("LIM-1", "10.00"))
	var created []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=invoice.created", Token: m.Token}).JSON(t, &created)
	redeliver := func() *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/events/" + created[0].ID.String() + "/redeliver", Token: m.Token})
	}
	for i := range 9 {
		apitest.Want(t, fmt.Sprintf("ping %d", i+1), ping(limited.Id).StatusCode, http.StatusAccepted)
	}
	apitest.Want(t, "redelivery, the 10th send", redeliver().StatusCode, http.StatusAccepted)
	for name, resp := range map[string]*apitest.Response{"11th ping": ping(limited.Id), "11th send, a redelivery": redeliver()} {
		apitest.WantProblem(t, resp, http.StatusTooManyRequests, "Too many requests")
		apitest.Want(t, name+" Retry-After", resp.Header.Get("Retry-After"), "60")
	}
	apitest.Want(t, "a ping to another endpoint", ping(other.Id).StatusCode, http.StatusAccepted)
	var pings []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=webhook.ping&limit=100", Token: m.Token}).JSON(t, &pings)
	apitest.Want(t, "ping events", len(pings), 10)

	clock.Advance(61 * time.Second)
	apitest.Want(t, "a ping a minute later", ping(limited.Id).StatusCode, http.StatusAccepted)
}

// A redelivered event comes again with the same webhook-id; a ping goes to
// its endpoint alone.
func TestWebhookRedeliverAndPing(t *testing.T) {
	env, m, rc, ep := webhookEnv(t, nil)
	other := apitest.NewReceiver(t)
	endpoint(t, env, m.Token, other.URL, "invoice.paid")
	worker := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true})
	m.MustCreate(t, m.Body("RD-1", "10.00"))
	apitest.Deliver(t, worker)
	first := verified(t, rc.Hooks(), ep.Secret, true)[0]
	resp := env.Do(apitest.Request{Method: "POST", Path: "/events/" + first.ID.String() + "/redeliver", Token: m.Token})
	apitest.Want(t, "redeliver", resp.StatusCode, http.StatusAccepted)
	apitest.Deliver(t, worker)
	again := verified(t, rc.Hooks(), ep.Secret, true)
	apitest.Want(t, "deliveries", len(again), 2)
	apitest.Want(t, "the same webhook-id", again[1].ID, first.ID)
	apitest.Want(t, "the same body", string(rc.Hooks()[1].Body), string(rc.Hooks()[0].Body))

	var accepted models.EventAccepted
	resp = env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + ep.Id.String() + "/ping", Token: m.Token})
	apitest.Want(t, "ping", resp.StatusCode, http.StatusAccepted)
	resp.JSON(t, &accepted)
	apitest.Deliver(t, worker)
	pings := verified(t, rc.Hooks(), ep.Secret, true)
	apitest.Want(t, "ping delivered", pings[2].Type, "webhook.ping")
	apitest.Want(t, "ping id", pings[2].ID, accepted.EventId)
	apitest.Want(t, "the other endpoint got", len(other.Hooks()), 0)
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/events/" + uuid.NewString() + "/redeliver", Token: m.Token}), http.StatusNotFound, "")
}

// Without PAYREQ_WEBHOOK_ALLOW_PRIVATE, an endpoint must be https on the
// public internet: every other URL is a 400 keyed url, and a delivery that
// would connect to a private address (a name resolving there since) is
// refused at the connection.
func TestWebhookURLRules(t *testing.T) {
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Configure: func(c *config.Config) { c.WebhookAllowPrivate = false }})
	m := apitest.NewMerchant(t, env)
	for _, url := range []string{
		"http://hooks.example.com/payreq", "https://127.0.0.1/hooks", "https://10.1.2.3/hooks", "https://169.254.169.254/latest",
		"https://[::1]/hooks", "https://localhost/hooks", "https://192.168.1.20:8443/x", "https://[fd00::1]/x", "https://100.64.0.1/",
		"https://user:password@hooks.example.com/", "ftp://hooks.example.com/", "https://hooks.example.com/" + strings.Repeat("a", 2048),
		"/relative",
	} {
		resp := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token,
			Body: map[string]any{"url": url, "eventTypes": []string{"*"}}})
		p := apitest.WantProblem(t, resp, http.StatusBadRequest, "")
		if p.Errors == nil || len((*p.Errors)["url"]) == 0 {
			t.Errorf("%.60s: errors %v, want url", url, p.Errors)
		}
	}
	for _, types := range []any{[]string{"invoice.exploded"}, []string{}, nil, "*"} {
		resp := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token,
			Body: map[string]any{"url": "https://203.0.114.7/hooks", "eventTypes": types}})
		p := apitest.WantProblem(t, resp, http.StatusBadRequest, "")
		found := false
		for k := range *p.Errors {
			found = found || strings.HasPrefix(k, "eventTypes")
		}
		apitest.Want(t, fmt.Sprintf("eventTypes %v named", types), found, true)
	}
	var list []models.WebhookEndpoint
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "endpoints made by refused requests", len(list), 0)

	// At delivery: an endpoint made where private addresses were allowed.
	lax := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	lm := apitest.NewMerchant(t, lax)
	rc := apitest.NewReceiver(t)
	endpoint(t, lax, lm.Token, rc.URL, "*")
	lm.MustCreate(t, lm.Body("SSRF-1", "10.00"))
	strict := lax.Webhooks(webhook.WorkerConfig{})
	apitest.Deliver(t, strict)
	apitest.Want(t, "requests that reached the private address", len(rc.Hooks()), 0)
	var events []hookEvent
	lax.Do(apitest.Request{Method: "GET", Path: "/events", Token: lm.Token}).JSON(t, &events)
	d := eventOf(t, lax, lm, events[0].ID.String()).Deliveries[0]
	apitest.WantText(t, "lastError", d.LastError, "not a public internet address")
}

// A host with an IPv6 zone (any %), an address of the ranges that lead
// back to IPv4 or site-local space, and a port outside 1–65535 are refused
// on creation and on PATCH: a 400 keyed url that changes nothing. The
// refusal says what kind of address is wanted, never what a name resolved
// to; that goes to the server's log.
func TestWebhookURLZonesRangesAndPorts(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) { c.WebhookAllowPrivate = false }})
	m := apitest.NewMerchant(t, env)
	ep := endpoint(t, env, m.Token, "https://203.0.114.7/hooks", "invoice.paid")
	for _, url := range []string{
		"https://[::1%25lo]:18443/hook", "https://[::1%25zz]/", "https://[fe80::1%25eth0]/", "https://[fd00:ec2::254%25eth0]/",
		"https://[2001:4860:4860::8888%25eth0]/",
		"https://[fec0::1]/", "https://[::7f00:1]/", "https://[::ffff:808:808]/", "https://[::ffff:7f00:1]/",
		"https://[64:ff9b::a00:1]/", "https://[64:ff9b:1::1]/", "https://[2002:a00:1::1]/",
		"https://hooks.example.com:0/", "https://hooks.example.com:65536/", "https://hooks.example.com:99999/", "https://203.0.114.7:0/",
	} {
		for _, req := range []apitest.Request{
			{Method: "POST", Path: "/webhook-endpoints", Token: m.Token, Body: map[string]any{"url": url, "eventTypes": []string{"*"}}},
			{Method: "PATCH", Path: "/webhook-endpoints/" + ep.Id.String(), Token: m.Token, Body: map[string]any{"url": url}},
		} {
			p := apitest.WantProblem(t, env.Do(req), http.StatusBadRequest, "")
			if p.Errors == nil || len((*p.Errors)["url"]) == 0 {
				t.Errorf("%s %s: errors %v, want url", req.Method, url, p.Errors)
			}
		}
	}
	var list []models.WebhookEndpoint
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "endpoints", len(list), 1)
	apitest.Want(t, "url after the refused changes", list[0].Url, "https://203.0.114.7/hooks")

	p := apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token,
		Body: map[string]any{"url": "https://localhost/hooks", "eventTypes": []string{"*"}}}), http.StatusBadRequest, "")
	reason := strings.Join((*p.Errors)["url"], " ")
	if strings.Contains(reason, "127.0.0.1") || strings.Contains(reason, "::1") || strings.Contains(reason, "localhost") {
		t.Errorf("the refusal tells what localhost resolves to: %q", reason)
	}
	if !strings.Contains(env.Log.String(), "127.0.0.1") {
		t.Errorf("the log does not say what localhost resolved to:\n%s", env.Log.String())
	}
}

// A stored URL whose host has an IPv6 zone (as an older version, or a name
// rebound since, could leave one) is refused at the connection: nothing
// reaches the address, and the delivery says only what kind of failure it
// was.
func TestWebhookZoneRefusedAtDial(t *testing.T) {
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	knownCustomer(t, env, m)
	ep := endpoint(t, env, m.Token, "https://hooks.example.com/payreq", "*")
	if _, err := env.App.DB.Exec(`UPDATE webhook_endpoints SET url = $2 WHERE id = $1`, ep.Id,
		fmt.Sprintf("http://[::1%%25lo]:%d/hooks", ln.Addr().(*net.TCPAddr).Port)); err != nil {
		t.Fatal(err)
	}
	m.MustCreate(t, m.Body("ZONE-1", "10.00"))
	apitest.Want(t, "attempts", apitest.Deliver(t, env.Webhooks(webhook.WorkerConfig{Timeout: 2 * time.Second})), 1)
	// The first connection the listener accepts is the test's own: the
	// worker's never came.
	probe, err := net.Dial("tcp6", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	apitest.Want(t, "the first connection to [::1] comes from", conn.RemoteAddr().String(), probe.LocalAddr().String())
	var events []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events", Token: m.Token}).JSON(t, &events)
	apitest.WantText(t, "lastError", eventOf(t, env, m, events[0].ID.String()).Deliveries[0].LastError, "not a public internet address")
}

// A delivery's lastError says what kind of failure it was, never an
// address or the network's own words; those go to the server's log.
func TestWebhookErrorsSayOnlyTheKind(t *testing.T) {
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	plain := apitest.NewReceiver(t) // answers a TLS handshake in plain HTTP
	unavailable := apitest.NewReceiver(t)
	unavailable.Answer = func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	want := map[uuid.UUID]string{}
	for url, kind := range map[string]string{
		strings.Replace(plain.URL, "http://", "https://", 1): "TLS handshake failed",
		"http://" + closed + "/hooks":                        "connection failed",
		unavailable.URL:                                      "HTTP 503",
	} {
		want[endpoint(t, env, m.Token, url, "invoice.created").Id] = kind
	}
	m.MustCreate(t, m.Body("KIND-1", "10.00"))
	apitest.Want(t, "attempts", apitest.Deliver(t, env.Webhooks(webhook.WorkerConfig{AllowPrivate: true})), 3)
	var events []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=invoice.created", Token: m.Token}).JSON(t, &events)
	for _, d := range eventOf(t, env, m, events[0].ID.String()).Deliveries {
		apitest.WantText(t, "lastError of the "+want[d.EndpointId]+" endpoint", d.LastError, want[d.EndpointId])
	}
	logged := env.Log.String()
	for _, detail := range []string{"connection refused", "HTTPS"} {
		if !strings.Contains(logged, detail) {
			t.Errorf("the log does not hold %q:\n%s", detail, logged)
		}
	}
}

// An organization has at most 16 endpoints; the 17th is a 422.
func TestWebhookEndpointLimit(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token,
				Body: map[string]any{"url": fmt.Sprintf("https://hooks.example.com/%d", i), "eventTypes": []string{"invoice.paid"}}}).StatusCode
		}()
	}
	wg.Wait()
	made, refused := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			made++
		case http.StatusUnprocessableEntity:
			refused++
		}
	}
	apitest.Want(t, "made of 20 at once", made, 16)
	apitest.Want(t, "refused", refused, 4)
	var list []models.WebhookEndpoint
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "listed", len(list), 16)
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token,
		Body: map[string]any{"url": "https://hooks.example.com/17", "eventTypes": []string{"*"}}}), http.StatusUnprocessableEntity, "Too many webhook endpoints")
}

// An Idempotency-Key adds one endpoint: a replay answers 200 with the
// endpoint as it is now (its secret since rotated), another body with the
// key is a 422, eight requests at once with one key add one endpoint, and
// the key of an endpoint deleted since is a 422.
func TestWebhookEndpointIdempotency(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	create := func(key string, body map[string]any) *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token, Body: body,
			Header: http.Header{"Idempotency-Key": {key}}})
	}
	key := uuid.NewString()
	body := map[string]any{"url": "https://hooks.example.com/idem", "description": "Books", "eventTypes": []string{"invoice.paid"}}
	first := create(key, body)
	apitest.Want(t, "first", first.StatusCode, http.StatusCreated)
	var made, again models.WebhookEndpointWithSecret
	first.JSON(t, &made)
	replay := create(key, map[string]any{"eventTypes": []string{"invoice.paid"}, "description": "Books", "url": "https://hooks.example.com/idem"})
	apitest.Want(t, "replay", replay.StatusCode, http.StatusOK)
	apitest.Want(t, "Idempotent-Replayed", replay.Header.Get("Idempotent-Replayed"), "true")
	replay.JSON(t, &again)
	apitest.Want(t, "replayed id", again.Id, made.Id)
	apitest.Want(t, "replayed secret", again.Secret, made.Secret)

	var rotated models.WebhookEndpointWithSecret
	env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + made.Id.String() + "/rotate-secret", Token: m.Token}).JSON(t, &rotated)
	create(key, body).JSON(t, &again)
	apitest.Want(t, "secret replayed after a rotation", again.Secret, rotated.Secret)
	apitest.WantProblem(t, create(key, map[string]any{"url": "https://hooks.example.com/other", "eventTypes": []string{"*"}}),
		http.StatusUnprocessableEntity, "Idempotency key reused")

	// A key longer than 255 characters is refused before anything is made.
	apitest.WantProblem(t, create(strings.Repeat("k", 256), body), http.StatusBadRequest, "")

	// Eight at once with one key.
	key2 := uuid.NewString()
	created := apitest.AtOnce(t, 8, func() int {
		return create(key2, map[string]any{"url": "https://hooks.example.com/burst", "eventTypes": []string{"*"}}).StatusCode
	})
	apitest.Want(t, "made of 8 at once with one key", created, 1)
	var list []models.WebhookEndpoint
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "endpoints", len(list), 2)

	apitest.Want(t, "delete", env.Do(apitest.Request{Method: "DELETE", Path: "/webhook-endpoints/" + made.Id.String(), Token: m.Token}).StatusCode,
		http.StatusNoContent)
	apitest.WantProblem(t, create(key, body), http.StatusUnprocessableEntity, "Idempotency key reused")
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "endpoints after the deleted one's key", len(list), 1)
}

// A receiver that never answers costs one attempt of the time limit; one
// that answers megabytes is read no further than needed; a redirect is not
// followed.
func TestWebhookHostileReceivers(t *testing.T) {
	env, m, rc, _ := webhookEnv(t, nil)
	target := apitest.NewReceiver(t)
	release := make(chan struct{})
	defer close(release)
	rc.Answer = func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1: // never answers
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case 2: // 10 MB
			w.WriteHeader(http.StatusOK)
			chunk := []byte(strings.Repeat("x", 1<<20))
			for range 10 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		default: // a redirect elsewhere
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		}
	}
	worker := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true, Timeout: 300 * time.Millisecond})
	for _, n := range []string{"HR-1", "HR-2", "HR-3"} {
		m.MustCreate(t, m.Body(n, "10.00"))
		apitest.Deliver(t, worker)
	}
	var events []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events", Token: m.Token}).JSON(t, &events)
	// Newest first: the redirect, the 10 MB, the silence.
	silent, big, redirected := eventOf(t, env, m, events[2].ID.String()).Deliveries[0], eventOf(t, env, m, events[1].ID.String()).Deliveries[0],
		eventOf(t, env, m, events[0].ID.String()).Deliveries[0]
	apitest.WantText(t, "silent receiver", silent.LastError, "timed out")
	apitest.Want(t, "silent receiver status", silent.Status, models.EventDeliveryStatusPending)
	apitest.Want(t, "10 MB answer", big.Status, models.EventDeliveryStatusDelivered)
	apitest.Want(t, "redirect status", *redirected.LastStatusCode, int32(307))
	apitest.WantText(t, "redirect", redirected.LastError, "HTTP 307: redirects are not followed")
	apitest.Want(t, "requests to the redirect's target", len(target.Hooks()), 0)
}

// Two instances' workers deliver each event once per endpoint, sharing
// the work.
func TestWebhookWorkersShareTheWork(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	dir := t.TempDir()
	first := apitest.New(t, dsn, apitest.Options{DataDir: dir})
	second := apitest.New(t, dsn, apitest.Options{DataDir: dir})
	m := apitest.NewMerchant(t, first)
	rc := apitest.NewReceiver(t)
	endpoint(t, first, m.Token, rc.URL, "invoice.created")
	for i := range 30 {
		m.MustCreate(t, m.Body(fmt.Sprintf("TW-%d", i), "10.00"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, env := range []*apitest.Env{first, second} {
		w := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true, Workers: 3, PollInterval: 10 * time.Millisecond})
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Run(ctx)
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(rc.Hooks()) < 30 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // room for a second, wrong, delivery to show
	cancel()
	wg.Wait()
	seen := map[string]int{}
	for _, h := range rc.Hooks() {
		seen[h.Header.Get("webhook-id")]++
	}
	apitest.Want(t, "events delivered", len(seen), 30)
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s delivered %d times", id, n)
		}
	}
}

// Events are kept 30 days.
func TestEventsKeptThirtyDays(t *testing.T) {
	clock := apitest.NewClock(time.Now())
	env, m, _, _ := webhookEnv(t, clock)
	m.MustCreate(t, m.Body("OLD-1", "10.00"))
	clock.Advance(29 * 24 * time.Hour)
	m.Renew()
	m.MustCreate(t, m.Body("NEW-1", "10.00"))
	clock.Advance(2 * 24 * time.Hour)
	m.Renew()
	if err := env.App.Events.DeleteOld(context.Background()); err != nil {
		t.Fatal(err)
	}
	var events []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events", Token: m.Token}).JSON(t, &events)
	apitest.Want(t, "events left", len(events), 1)
	apitest.Want(t, "the newer one", strings.Contains(string(events[0].Data), "NEW-1"), true)
}

// Unknown event types and malformed ids are 400s naming what was wrong.
func TestEventsRefuseBadInput(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	for _, q := range []string{"type=invoice.exploded", "type=*", "createdFrom=yesterday", "limit=0", "cursor=nonsense"} {
		name, _, _ := strings.Cut(q, "=")
		p := apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/events?" + q, Token: m.Token}), http.StatusBadRequest, "")
		if p.Errors == nil || len((*p.Errors)["query."+name]) == 0 {
			t.Errorf("%s: errors do not name query.%s", q, name)
		}
	}
	for _, path := range []string{"/events/not-a-uuid", "/webhook-endpoints/not-a-uuid"} {
		apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: path, Token: m.Token}), http.StatusBadRequest, "")
	}
	p := apitest.WantProblem(t, env.Do(apitest.Request{Method: "PATCH", Path: "/webhook-endpoints/" + uuid.NewString(), Token: m.Token,
		Body: map[string]any{"eventTypes": []string{"invoice.exploded"}}}), http.StatusBadRequest, "")
	named := false
	for k := range *p.Errors {
		named = named || strings.HasPrefix(k, "eventTypes")
	}
	apitest.Want(t, "PATCH eventTypes named", named, true)
}

// The answers of items 19 and 20 of the third review. Where private
// addresses are allowed (PAYREQ_WEBHOOK_ALLOW_PRIVATE, as in make run), a
// host with an IPv6 zone is still refused, on creation and on PATCH. Where
// they are not, a host that resolves off the public internet is refused
// with "must be on the public internet" and nothing more: not in the
// problem's detail, not in its errors, no address it resolved to.
func TestWebhookURLZonesAlwaysAndNoResolvedAddress(t *testing.T) {
	lax := apitest.New(t, testDSN, apitest.Options{})
	lm := apitest.NewMerchant(t, lax)
	ep := endpoint(t, lax, lm.Token, "http://127.0.0.1:18443/x", "invoice.paid")
	for _, url := range []string{"https://[::1%25lo]:18443/x", "http://[fe80::1%25eth0]/x", "https://[::1%25zz]/"} {
		for _, req := range []apitest.Request{
			{Method: "POST", Path: "/webhook-endpoints", Token: lm.Token, Body: map[string]any{"url": url, "eventTypes": []string{"*"}}},
			{Method: "PATCH", Path: "/webhook-endpoints/" + ep.Id.String(), Token: lm.Token, Body: map[string]any{"url": url}},
		} {
			p := apitest.WantProblem(t, lax.Do(req), http.StatusBadRequest, "")
			if p.Errors == nil || len((*p.Errors)["url"]) == 0 {
				t.Errorf("%s %s with private addresses allowed: errors %v, want url", req.Method, url, p.Errors)
			}
		}
	}
	var list []models.WebhookEndpoint
	lax.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: lm.Token}).JSON(t, &list)
	if len(list) != 1 || list[0].Url != "http://127.0.0.1:18443/x" {
		t.Errorf("endpoints after the refusals: %+v", list)
	}

	strict := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) { c.WebhookAllowPrivate = false }})
	sm := apitest.NewMerchant(t, strict)
	resp := strict.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: sm.Token,
		Body: map[string]any{"url": "https://localhost/", "eventTypes": []string{"*"}}})
	p := apitest.WantProblem(t, resp, http.StatusBadRequest, "")
	apitest.Want(t, "the url's refusal", strings.Join((*p.Errors)["url"], " | "), "must be on the public internet")
	apitest.Want(t, "the problem's detail", p.Detail, "Correct the fields listed in errors and send the request again.")
	if !strings.Contains(strict.Log.String(), "127.0.0.1") && !strings.Contains(strict.Log.String(), "::1") {
		t.Errorf("the log does not say what localhost resolved to:\n%s", strict.Log.String())
	}
}
