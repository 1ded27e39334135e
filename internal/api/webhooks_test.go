package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/smtpfake"
	"github.com/payreq/payreq/internal/webhook"
)

// endpoint registers a receiver's URL for types and returns the endpoint
// with its secret.
func endpoint(t *testing.T, env *apitest.Env, token, url string, types ...string) models.WebhookEndpointWithSecret {
	t.Helper()
	var e models.WebhookEndpointWithSecret
	resp := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: token,
		Body: map[string]any{"url": url, "description": "test receiver", "eventTypes": types}})
	apitest.Want(t, "create endpoint", resp.StatusCode, http.StatusCreated)
	resp.JSON(t, &e)
	return e
}

type hookEvent struct {
	ID        uuid.UUID       `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// verified checks every hook with the Standard Webhooks reference library
// under secret and returns the events, in the order received.
func verified(t *testing.T, hooks []apitest.Hook, secret string, checkTime bool) []hookEvent {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var out []hookEvent
	for _, h := range hooks {
		verify := wh.Verify
		if !checkTime {
			verify = wh.VerifyIgnoringTimestamp
		}
		if err := verify(h.Body, h.Header); err != nil {
			t.Fatalf("the reference library refuses a delivery: %v (headers %v)", err, h.Header)
		}
		var e hookEvent
		if err := json.Unmarshal(h.Body, &e); err != nil {
			t.Fatal(err)
		}
		apitest.Want(t, "webhook-id is the event id", h.Header.Get("webhook-id"), e.ID.String())
		apitest.Want(t, "content type", h.Header.Get("Content-Type"), "application/json")
		out = append(out, e)
	}
	return out
}

func typesOf(events []hookEvent) map[string]int {
	n := map[string]int{}
	for _, e := range events {
		n[e.Type]++
	}
	return n
}

// Every change a merchant or a reseller makes is an event pushed to the
// endpoints subscribed to it, signed so that the Standard Webhooks
// reference library verifies it, its data the resource as the API showed
// it then; GET /events lists them and GET /events/{id} shows the delivery.
func TestEveryChangeIsAnEventDeliveredAndVerified(t *testing.T) {
	// A database of its own: a worker delivers every organization's webhooks.
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	rc := apitest.NewReceiver(t)
	all := endpoint(t, env, m.Token, rc.URL, "*")
	paidOnly := apitest.NewReceiver(t)
	paidEndpoint := endpoint(t, env, m.Token, paidOnly.URL, "invoice.paid")

	// invoice.created and invoice.sent; card_payment.declined, approved; invoice.part_paid, paid.
	b := m.Body("EV-1", "100.00")
	b["send"] = true
	inv := m.MustCreate(t, b)
	env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardDecline, Amount: "40.00"})
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "40.00", Save: true}), http.StatusSeeOther)
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: "4000000000000259", Amount: "60.00"}), http.StatusSeeOther)
	got, _ := m.Read(t, inv.Id)
	// card_payment.refunded, and a declined refund: card_payment.declined.
	refund(env, m.Token, (*got.Payments)[0].Id, map[string]any{"amount": "5.00"}, "")
	refund(env, m.Token, (*got.Payments)[1].Id, nil, "")
	// saved_card.removed; invoice.cancelled; deposit.created and deposit.paid.
	apitest.Want(t, "remove card", env.Do(apitest.Request{Method: "DELETE", Path: "/saved-cards/" + (*got.SavedCards)[0].Id.String(), Token: m.Token}).StatusCode, http.StatusNoContent)
	// customer.created (the first invoice's email made its customer); customer.updated (the card the pay page saved, its removal, then the PATCH), customer.deleted.
	apitest.Want(t, "change the customer", env.Do(apitest.Request{Method: "PATCH", Path: "/customers/" + inv.CustomerId.String(), Token: m.Token,
		Body: map[string]any{"notes": "Pays by card"}}).StatusCode, http.StatusOK)
	gone := newCustomer(t, m, map[string]any{"email": "gone@example.com"})
	apitest.Want(t, "delete a customer", env.Do(apitest.Request{Method: "DELETE", Path: "/customers/" + gone.Id.String(), Token: m.Token}).StatusCode,
		http.StatusNoContent)
	other := m.MustCreate(t, m.Body("EV-2", "10.00"))
	env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + other.Id.String() + "/cancel", Token: m.Token})
	deposit := settle(t, env, m)[0]
	// invoice.send_failed: the delivery worker gives up on the pay link (the
	// mail server refuses connections; one attempt allowed).
	down := smtpfake.Start(t, smtpfake.Down)
	mail, err := delivery.NewWorker(env.App.DB, delivery.Config{
		Invoices: env.App.Invoices, SMTPURL: down.URL("billing@example.com"), DataDir: env.App.Config.DataDir, PollInterval: 20 * time.Millisecond, MaxAttempts: 1,
	}, quiet, env.Clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	mailed := make(chan struct{})
	go func() { mail.Run(ctx); close(mailed) }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got, _ := m.Read(t, inv.Id); got.SendProblem != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pay link never failed")
		}
	}
	stop()
	<-mailed
	ping := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + all.Id.String() + "/ping", Token: m.Token})
	apitest.Want(t, "ping", ping.StatusCode, http.StatusAccepted)

	worker := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true})
	apitest.Deliver(t, worker)
	events := verified(t, rc.Hooks(), all.Secret, true)
	want := map[string]int{"invoice.created": 2, "invoice.sent": 1, "card_payment.declined": 2, "card_payment.approved": 2,
		"invoice.part_paid": 1, "invoice.paid": 1, "card_payment.refunded": 1, "saved_card.removed": 1, "invoice.cancelled": 1,
		"deposit.created": 1, "invoice.send_failed": 1, "webhook.ping": 1, "customer.created": 2, "customer.updated": 3,
		"customer.deleted": 1}
	for typ, n := range want {
		apitest.Want(t, typ+" events", typesOf(events)[typ], n)
	}
	apitest.Want(t, "events delivered", len(events), 21)
	onlyPaid := verified(t, paidOnly.Hooks(), paidEndpoint.Secret, true)
	apitest.Want(t, "the invoice.paid endpoint got", len(onlyPaid), 1)
	apitest.Want(t, "the invoice.paid endpoint got", onlyPaid[0].Type, "invoice.paid")

	for _, e := range events {
		switch e.Type {
		case "invoice.paid":
			var data models.Invoice
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatal(err)
			}
			apitest.Want(t, "invoice.paid data status", data.Status, models.InvoiceStatusPaid)
			apitest.Want(t, "invoice.paid data payments", len(*data.Payments), 2)
			apitest.Want(t, "invoice.paid data amountRefunded (before the refund)", data.AmountRefunded.Text('f'), "0.00")
		case "invoice.part_paid":
			var data models.Invoice
			json.Unmarshal(e.Data, &data)
			apitest.Want(t, "invoice.part_paid data balance", data.Balance.Text('f'), "60.00")
		case "card_payment.refunded":
			var data models.CardPayment
			json.Unmarshal(e.Data, &data)
			apitest.Want(t, "card_payment.refunded data is the refund", data.Kind, models.CardPaymentKindRefund)
		case "customer.updated":
			var data models.Customer
			json.Unmarshal(e.Data, &data)
			if data.Notes == nil { // the pay page's card saved on the customer, and its removal
				break
			}
			apitest.Want(t, "customer.updated data notes", apitest.Text(data.Notes), "Pays by card")
			apitest.Want(t, "customer.updated data invoiceCount", data.InvoiceCount, int32(1))
		case "deposit.created":
			var data models.Deposit
			json.Unmarshal(e.Data, &data)
			apitest.Want(t, "deposit.created data", data.Id, deposit.ID)
		}
		if strings.Contains(string(e.Data), apitest.CardApprove) || strings.Contains(string(e.Data), "4000000000000259") {
			t.Errorf("%s carries a card number: %s", e.Type, e.Data)
		}
	}

	// The reseller's application moves on (what payreq applications stage does).
	seed := env.Seed()
	reseller := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	rrc := apitest.NewReceiver(t)
	rEndpoint := endpoint(t, env, reseller, rrc.URL, "application.stage_changed")
	var apps []models.Application
	env.Do(apitest.Request{Method: "GET", Path: "/applications?stage=submitted", Token: reseller}).JSON(t, &apps)
	if err := env.App.Resellers.SetStage(context.Background(), apps[0].Id, "in_review", "Looking"); err != nil {
		t.Fatal(err)
	}
	// Thursday: the deposit is paid.
	env.Clock.Advance(4 * 24 * time.Hour)
	m.Renew()
	settle(t, env, m)
	apitest.Deliver(t, worker)
	stage := verified(t, rrc.Hooks(), rEndpoint.Secret, false)
	apitest.Want(t, "reseller events", len(stage), 1)
	apitest.Want(t, "reseller event type", stage[0].Type, "application.stage_changed")
	if strings.Contains(string(stage[0].Data), "taxId\"") || !strings.Contains(string(stage[0].Data), "in_review") {
		t.Errorf("application data: %s", stage[0].Data)
	}
	apitest.Want(t, "deposit.paid", typesOf(verified(t, rc.Hooks(), all.Secret, false))["deposit.paid"], 1)

	// The merchant's events, newest first; one of them with its deliveries.
	var list []json.RawMessage
	resp := env.Do(apitest.Request{Method: "GET", Path: "/events?limit=100", Token: m.Token})
	apitest.Want(t, "list events", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &list)
	apitest.Want(t, "merchant events", len(list), 22)
	var paidEvents []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=invoice.paid", Token: m.Token}).JSON(t, &paidEvents)
	apitest.Want(t, "invoice.paid events", len(paidEvents), 1)
	var detail struct {
		hookEvent
		Deliveries []models.EventDelivery `json:"deliveries"`
	}
	resp = env.Do(apitest.Request{Method: "GET", Path: "/events/" + paidEvents[0].ID.String(), Token: m.Token})
	apitest.Want(t, "get event", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &detail)
	apitest.Want(t, "deliveries of invoice.paid", len(detail.Deliveries), 2)
	for _, d := range detail.Deliveries {
		apitest.Want(t, "delivery status", d.Status, models.EventDeliveryStatusDelivered)
		apitest.Want(t, "delivery attempts", d.Attempts, int32(1))
		apitest.Want(t, "delivery lastStatusCode", d.LastStatusCode != nil && *d.LastStatusCode == 200, true)
	}
	var resellerEvents []hookEvent
	reseller = env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	env.Do(apitest.Request{Method: "GET", Path: "/events", Token: reseller}).JSON(t, &resellerEvents)
	for _, e := range resellerEvents {
		if !strings.HasPrefix(e.Type, "application.") {
			t.Errorf("the reseller sees a %s event", e.Type)
		}
	}
	if n := typesOf(resellerEvents); n["application.submitted"] != 5 {
		t.Errorf("the reseller's events %v, want the demo's 5 applications submitted", n)
	}
}

// An event commits with its change or not at all: a change whose
// transaction fails after its event was written leaves neither.
func TestEventAndChangeCommitTogether(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	env := apitest.New(t, dsn, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	// Fails every transaction that wrote an event for an invoice BOOM, at
	// commit: after the change and its event were both written.
	for _, stmt := range []string{
		`CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN IF NEW.data->>'invoiceNumber' = 'BOOM' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$`,
		`CREATE CONSTRAINT TRIGGER boom AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION boom()`,
	} {
		if _, err := env.App.DB.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	email, send := "dana@example.com", false
	d := invoice.Draft{MerchantAccountID: m.MIDs[0].Id, InvoiceNumber: "BOOM", Amount: *apd.New(1000, -2),
		CustomerEmail: &email, Send: &send}
	_, _, err := env.App.Invoices.Create(context.Background(), invoice.Actor{OrganizationID: uuid.MustParse(m.Org), Name: "test"}, d, nil)
	if err == nil {
		t.Fatal("the change committed although its event failed")
	}
	var invoices, events int
	env.App.DB.Get(&invoices, `SELECT count(*) FROM invoices WHERE invoice_number = 'BOOM'`)
	env.App.DB.Get(&events, `SELECT count(*) FROM events WHERE data->>'invoiceNumber' = 'BOOM'`)
	apitest.Want(t, "invoices BOOM", invoices, 0)
	apitest.Want(t, "events of BOOM", events, 0)
	// Another invoice: both.
	m.MustCreate(t, m.Body("FINE", "10.00"))
	env.App.DB.Get(&events, `SELECT count(*) FROM events WHERE type = 'invoice.created' AND data->>'invoiceNumber' = 'FINE'`)
	apitest.Want(t, "events of FINE", events, 1)
}

// An event is read with the permission that protects its data: a key with
// only events.view, or only webhooks.manage, reaches invoices and card
// payments neither through a list, nor by id, nor by a redelivery or a
// subscription; webhook.ping, the endpoint's own, it does.
func TestEventsNeedTheirDataPermission(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	hook := endpoint(t, env, m.Token, "https://hooks.example.com/all", "*")
	inv := m.MustCreate(t, m.Body("PERM-1", "10.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"}), http.StatusSeeOther)
	var ping models.EventAccepted
	env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + hook.Id.String() + "/ping", Token: m.Token}).JSON(t, &ping)
	protected := map[string]string{} // type → an event's id
	for _, typ := range []string{"invoice.created", "card_payment.approved"} {
		var events []hookEvent
		env.Do(apitest.Request{Method: "GET", Path: "/events?type=" + typ, Token: m.Token}).JSON(t, &events)
		if len(events) != 1 {
			t.Fatalf("%s events: %d", typ, len(events))
		}
		protected[typ] = events[0].ID.String()
	}
	token := func(permissions ...string) string {
		k := env.NewKey(t, org, permissions...)
		return env.Token(k.KeyID, k.Secret)
	}
	eventsOnly, eventsAndPayments := token(auth.EventsView), token(auth.EventsView, auth.PaymentsView)
	webhooksOnly, webhooksAndPayments := token(auth.WebhooksManage), token(auth.WebhooksManage, auth.PaymentsView)
	wantPermission := func(what string, resp *apitest.Response, permission string) {
		t.Helper()
		p := apitest.WantProblem(t, resp, http.StatusForbidden, "Permission required")
		if !strings.Contains(p.Detail, permission) {
			t.Errorf("%s: detail %q does not name %s", what, p.Detail, permission)
		}
	}

	// Lists leave out what the key may not read; a filter naming it is a 403.
	var seen []hookEvent
	env.Do(apitest.Request{Method: "GET", Path: "/events?limit=100", Token: eventsOnly}).JSON(t, &seen)
	apitest.Want(t, "events listed to events.view alone", fmt.Sprint(typesOf(seen)), fmt.Sprint(map[string]int{"webhook.ping": 1}))
	env.Do(apitest.Request{Method: "GET", Path: "/events?limit=100", Token: eventsAndPayments}).JSON(t, &seen)
	apitest.Want(t, "events listed with payments.view", fmt.Sprint(typesOf(seen)),
		fmt.Sprint(map[string]int{"webhook.ping": 1, "invoice.created": 1, "card_payment.approved": 1, "invoice.paid": 1, "customer.created": 1}))
	unknown := env.Do(apitest.Request{Method: "GET", Path: "/events/" + uuid.NewString(), Token: eventsOnly})
	for typ, id := range protected {
		wantPermission("filter "+typ, env.Do(apitest.Request{Method: "GET", Path: "/events?type=" + typ, Token: eventsOnly}), auth.PaymentsView)
		// By id: the same 404 as an unknown id.
		got := env.Do(apitest.Request{Method: "GET", Path: "/events/" + id, Token: eventsOnly})
		apitest.Want(t, "read "+typ+" with events.view alone", got.StatusCode, http.StatusNotFound)
		apitest.Want(t, "read "+typ+" with events.view alone: body", string(got.Body), string(unknown.Body))
		apitest.Want(t, "read "+typ+" with payments.view", env.Do(apitest.Request{Method: "GET", Path: "/events/" + id, Token: eventsAndPayments}).StatusCode, http.StatusOK)
		redeliver := apitest.Request{Method: "POST", Path: "/events/" + id + "/redeliver", Token: webhooksOnly}
		apitest.WantProblem(t, env.Do(redeliver), http.StatusNotFound, "Not found")
		redeliver.Token = webhooksAndPayments
		apitest.Want(t, "redeliver "+typ+" with payments.view", env.Do(redeliver).StatusCode, http.StatusAccepted)
	}
	apitest.Want(t, "filter webhook.ping", env.Do(apitest.Request{Method: "GET", Path: "/events?type=webhook.ping", Token: eventsOnly}).StatusCode, http.StatusOK)
	apitest.Want(t, "read the ping", env.Do(apitest.Request{Method: "GET", Path: "/events/" + ping.EventId.String(), Token: eventsOnly}).StatusCode, http.StatusOK)
	// The ping's endpoint receives every type (*), invoices among them.
	wantPermission("redeliver the ping to *", env.Do(apitest.Request{Method: "POST", Path: "/events/" + ping.EventId.String() + "/redeliver",
		Token: webhooksOnly}), auth.PaymentsView)
	apitest.Want(t, "redeliver the ping with payments.view", env.Do(apitest.Request{Method: "POST", Path: "/events/" + ping.EventId.String() + "/redeliver",
		Token: webhooksAndPayments}).StatusCode, http.StatusAccepted)

	// Subscriptions, on creation and on PATCH.
	for _, types := range [][]string{{"invoice.paid"}, {"card_payment.approved"}, {"webhook.ping", "invoice.created"}, {"*"}} {
		wantPermission(fmt.Sprintf("create %v", types), env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: webhooksOnly,
			Body: map[string]any{"url": "https://hooks.example.com/mine", "eventTypes": types}}), auth.PaymentsView)
		wantPermission(fmt.Sprintf("PATCH %v", types), env.Do(apitest.Request{Method: "PATCH", Path: "/webhook-endpoints/" + hook.Id.String(), Token: webhooksOnly,
			Body: map[string]any{"eventTypes": types}}), auth.PaymentsView)
	}
	pings := endpoint(t, env, webhooksOnly, "https://hooks.example.com/pings", "webhook.ping")
	wantPermission("PATCH * without eventTypes", env.Do(apitest.Request{Method: "PATCH", Path: "/webhook-endpoints/" + hook.Id.String(), Token: webhooksOnly,
		Body: map[string]any{"description": "everything"}}), auth.PaymentsView)
	apitest.Want(t, "PATCH pings without eventTypes", env.Do(apitest.Request{Method: "PATCH", Path: "/webhook-endpoints/" + pings.Id.String(), Token: webhooksOnly,
		Body: map[string]any{"description": "pings"}}).StatusCode, http.StatusOK)
	all := endpoint(t, env, webhooksAndPayments, "https://hooks.example.com/everything", "*")
	var list []models.WebhookEndpoint
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: webhooksOnly}).JSON(t, &list)
	apitest.Want(t, "endpoints", len(list), 3)
	apitest.Want(t, "the first endpoint's types", fmt.Sprint(list[0].EventTypes), "[*]")
	apitest.Want(t, "the ping endpoint", list[1].Id, pings.Id)
	apitest.Want(t, "the endpoint of payments.view", list[2].Id, all.Id)

	// A reseller's "*" needs applications.view.
	seed := env.Seed()
	k := env.NewKey(t, seed.Reseller.OrganizationID, auth.WebhooksManage)
	wantPermission("a reseller's *", env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: env.Token(k.KeyID, k.Secret),
		Body: map[string]any{"url": "https://hooks.example.com/reseller", "eventTypes": []string{"*"}}}), auth.ApplicationsView)
}

// A key holding webhooks.manage changes, rotates, pings, redelivers to or
// deletes only endpoints whose every type it could subscribe to: without
// payments.view, each action on an invoice.paid endpoint is a 403 naming
// it and changes nothing (the secret is not rotated, so none is shown);
// with payments.view each is taken.
func TestWebhookActionsNeedTheTypesPermissions(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	hook := endpoint(t, env, m.Token, "https://hooks.example.com/paid", "invoice.paid")
	var ping models.EventAccepted
	env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + hook.Id.String() + "/ping", Token: m.Token}).JSON(t, &ping)
	token := func(permissions ...string) string {
		k := env.NewKey(t, org, permissions...)
		return env.Token(k.KeyID, k.Secret)
	}
	narrow, wide := token(auth.WebhooksManage), token(auth.WebhooksManage, auth.PaymentsView)
	path := "/webhook-endpoints/" + hook.Id.String()
	actions := []struct {
		name   string
		req    apitest.Request
		status int // taken with payments.view
	}{
		{"change", apitest.Request{Method: "PATCH", Path: path, Body: map[string]any{"description": "changed"}}, http.StatusOK},
		{"disable", apitest.Request{Method: "PATCH", Path: path, Body: map[string]any{"status": "disabled"}}, http.StatusOK},
		{"enable", apitest.Request{Method: "PATCH", Path: path, Body: map[string]any{"status": "enabled"}}, http.StatusOK},
		{"change the URL", apitest.Request{Method: "PATCH", Path: path, Body: map[string]any{"url": "https://hooks.example.com/mine"}}, http.StatusOK},
		{"rotate", apitest.Request{Method: "POST", Path: path + "/rotate-secret", Body: map[string]any{"expireCurrentInSeconds": 0}}, http.StatusOK},
		{"ping", apitest.Request{Method: "POST", Path: path + "/ping"}, http.StatusAccepted},
		{"redeliver", apitest.Request{Method: "POST", Path: "/events/" + ping.EventId.String() + "/redeliver"}, http.StatusAccepted},
		{"delete", apitest.Request{Method: "DELETE", Path: path}, http.StatusNoContent},
	}
	for _, a := range actions {
		a.req.Token = narrow
		p := apitest.WantProblem(t, env.Do(a.req), http.StatusForbidden, "Permission required")
		if !strings.Contains(p.Detail, auth.PaymentsView) {
			t.Errorf("%s: detail %q does not name %s", a.name, p.Detail, auth.PaymentsView)
		}
	}
	var after models.WebhookEndpoint
	env.Do(apitest.Request{Method: "GET", Path: path, Token: m.Token}).JSON(t, &after)
	if after.Url != hook.Url || apitest.Text(after.Description) != "test receiver" || after.Status != models.WebhookEndpointStatusEnabled {
		t.Errorf("refused actions changed the endpoint: %+v", after)
	}
	var sent int
	if err := env.App.DB.Get(&sent, `SELECT cardinality(requested_sends) FROM webhook_endpoints WHERE id = $1`, hook.Id); err != nil || sent != 1 {
		t.Errorf("sends recorded: %d (%v), want the first ping's alone", sent, err)
	}
	for _, a := range actions {
		a.req.Token = wide
		apitest.Want(t, a.name+" with payments.view", env.Do(a.req).StatusCode, a.status)
	}
}
