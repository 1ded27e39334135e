package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/processor"
)

// Every operation × every permission: a key holding only the operation's
// permission gets through (anything but 401 and 403); a key holding only
// any other permission gets 403 "Permission required" naming the one it
// lacks.
func TestPermissionMatrix(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	orgOf := map[string]uuid.UUID{}
	for _, p := range auth.PermissionsFor(auth.KindMerchant) {
		orgOf[p] = seed.Merchant.OrganizationID
	}
	for _, p := range auth.PermissionsFor(auth.KindReseller) {
		orgOf[p] = seed.Reseller.OrganizationID
	}
	only := map[string]string{} // permission → token of a key with just it
	for p, org := range orgOf {
		k := env.NewKey(t, org, p)
		only[p] = env.Token(k.KeyID, k.Secret)
	}

	for _, e := range permissionEndpoints {
		for p, token := range only {
			t.Run(e.method+" "+e.spec+" with only "+p, func(t *testing.T) {
				path := strings.ReplaceAll(e.path, "{org}", orgOf[p].String())
				resp := env.Do(apitest.Request{Method: e.method, Path: path, Token: token})
				if p == e.permission {
					if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode >= 500 {
						t.Fatalf("the key with only %s: %d %s", p, resp.StatusCode, resp.Body)
					}
					return
				}
				problem := apitest.WantProblem(t, resp, http.StatusForbidden, "Permission required")
				if !strings.Contains(problem.Detail, e.permission) {
					t.Errorf("detail %q does not name %s", problem.Detail, e.permission)
				}
			})
		}
	}
}

// Every operation that takes an id, and every filter that takes one, with
// another organization's ids: the same 404 as an unknown id (403 for a
// portfolio, whose id is the organization's own), no data of theirs in any
// answer, and nothing of theirs changed.
func TestOtherOrganizationsIDs(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	theirs := apitest.NewMerchant(t, env) // the organization whose ids are tried
	inv := func() models.Invoice {
		b := theirs.Body("THEIRS-1", "30.00")
		b["customerName"], b["memo"] = "Their Customer Name", "their memo text"
		return theirs.MustCreate(t, b)
	}()
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Save: true}), http.StatusSeeOther)
	if resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: theirs.Token,
		Body: map[string]any{"amount": "2.00", "method": "check", "reference": "their check reference"}}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("their recorded payment: %d %s", resp.StatusCode, resp.Body)
	}
	theirDraft := func() models.Invoice {
		b := theirs.Body("THEIRS-DRAFT", "8.00")
		b["draft"], b["memo"] = true, "their memo text"
		return theirs.MustCreate(t, b)
	}()
	before, beforeRaw := theirs.Read(t, inv.Id)
	if len(*before.SavedCards) != 1 {
		t.Fatalf("no saved card: %s", beforeRaw)
	}
	card, sale, check := (*before.SavedCards)[0], (*before.Payments)[0], (*before.Payments)[1]
	if sale.Method != models.PaymentMethodCard {
		sale, check = check, sale
	}
	theirDeposits := settle(t, env, theirs)
	if len(theirDeposits) != 1 {
		t.Fatalf("the other merchant has %d deposits, want 1", len(theirDeposits))
	}
	deposit := theirDeposits[0].ID.String()
	theirHook := endpoint(t, env, theirs.Token, "https://hooks.example.com/theirs", "*")
	var theirEvents []struct{ ID string }
	env.Do(apitest.Request{Method: "GET", Path: "/events?limit=1", Token: theirs.Token}).JSON(t, &theirEvents)
	hook, theirEvent := theirHook.Id.String(), theirEvents[0].ID
	theirCustomer := inv.CustomerId.String()
	theirLoc, theirMID := theirs.Locs[0], theirs.MIDs[0]
	theirSeries := createSeries(t, theirs, recurringBody(t, theirs, "2030-01-31")).Id.String()
	theirTerminal := addTerminal(t, env, theirMID, processor.SimTerminalSlow, "Their counter")
	theirTerminalPayment := mustTerminalPayment(t, theirs, theirTerminal.Id, inv.Id, "1.00")
	theirSeed := env.Seed()
	theirReseller := env.Token(theirSeed.Reseller.KeyID, theirSeed.Reseller.Secret)
	var theirApps []models.Application
	env.Do(apitest.Request{Method: "GET", Path: "/applications", Token: theirReseller}).JSON(t, &theirApps)
	if len(theirApps) == 0 {
		t.Fatal("the other reseller has no applications")
	}

	me := apitest.NewMerchant(t, env)
	myTerminal := addTerminal(t, env, me.MIDs[0], processor.SimTerminalOK, "My counter")
	myInv := me.MustCreate(t, me.Body("MINE-T", "5.00"))
	myInvoice := me.MustCreate(t, me.Body("MINE-EDIT", "5.00"))
	mySeed := env.Seed()
	myReseller := env.Token(mySeed.Reseller.KeyID, mySeed.Reseller.Secret)

	// Text that only their records hold; no answer to me may contain it.
	secrets := []string{inv.Id.String(), sale.Id.String(), check.Id.String(), "their check reference", *sale.RetRef, inv.InvoiceNumber, "Their Customer Name", "their memo text", card.Id.String(), deposit, hook, theirEvent, "hooks.example.com/theirs",
		theirLoc.Id.String(), theirLoc.Name, theirMID.Id.String(), theirMID.Mid, theirApps[0].Id.String(),
		theirApps[0].Business.LegalName, theirSeed.Reseller.OrganizationID.String(), theirTerminal.Id.String(), theirTerminal.Hsn,
		"Their counter", theirTerminalPayment.Id.String(), theirCustomer, theirSeries}

	unknown := uuid.NewString()
	cases := []struct {
		name         string
		method, path string // %s: their id, or an unknown one
		theirs       string
		token        string
		body         any
		status       int
		header       http.Header
	}{
		{"read invoice", "GET", "/payment-requests/%s", inv.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"read invoice as a PDF", "GET", "/payment-requests/%s", inv.Id.String(), me.Token, nil, http.StatusNotFound,
			http.Header{"Accept": {"application/pdf"}}},
		{"record a payment", "POST", "/payment-requests/%s/payments", inv.Id.String(), me.Token,
			map[string]any{"amount": "1.00", "method": "cash"}, http.StatusNotFound, nil},
		{"remove their recorded payment from their invoice", "DELETE", "/payment-requests/" + inv.Id.String() + "/payments/%s",
			check.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"remove a recorded payment", "DELETE", "/payment-requests/%s/payments/" + check.Id.String(), inv.Id.String(), me.Token, nil,
			http.StatusNotFound, nil},
		{"send invoice", "POST", "/payment-requests/%s/send", inv.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"cancel invoice", "POST", "/payment-requests/%s/cancel", inv.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"change invoice", "PATCH", "/payment-requests/%s", inv.Id.String(), me.Token, map[string]any{"memo": "mine"}, http.StatusNotFound, nil},
		{"change draft", "PATCH", "/payment-requests/%s", theirDraft.Id.String(), me.Token, map[string]any{"memo": "mine"}, http.StatusNotFound, nil},
		{"finalize draft", "POST", "/payment-requests/%s/finalize", theirDraft.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"delete draft", "DELETE", "/payment-requests/%s", theirDraft.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"change invoice onto their MID", "PATCH", "/payment-requests/" + myInvoice.Id.String(), theirMID.Id.String(), me.Token,
			map[string]any{"merchantAccountId": "?"}, http.StatusUnprocessableEntity, nil},
		{"change invoice onto their customer", "PATCH", "/payment-requests/" + myInvoice.Id.String(), theirCustomer, me.Token,
			map[string]any{"customerId": "%s"}, http.StatusUnprocessableEntity, nil},
		{"delete saved card", "DELETE", "/saved-cards/%s", card.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"read card payment", "GET", "/card-payments/%s", sale.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"refund card payment", "POST", "/card-payments/%s/refund", sale.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"list card payments by their MID", "GET", "/card-payments?merchantAccountId=%s", theirMID.Id.String(), me.Token, nil, http.StatusOK, nil},
		{"list card payments of their invoice", "GET", "/card-payments?invoiceId=%s", inv.Id.String(), me.Token, nil, http.StatusOK, nil},
		{"list card payments of their deposit", "GET", "/card-payments?depositId=%s", deposit, me.Token, nil, http.StatusOK, nil},
		{"read deposit", "GET", "/deposits/%s", deposit, me.Token, nil, http.StatusNotFound, nil},
		{"list deposits of their MID", "GET", "/deposits?merchantAccountId=%s", theirMID.Id.String(), me.Token, nil, http.StatusOK, nil},
		{"read webhook endpoint", "GET", "/webhook-endpoints/%s", hook, me.Token, nil, http.StatusNotFound, nil},
		{"change webhook endpoint", "PATCH", "/webhook-endpoints/%s", hook, me.Token, map[string]any{"status": "disabled"}, http.StatusNotFound, nil},
		{"rotate webhook secret", "POST", "/webhook-endpoints/%s/rotate-secret", hook, me.Token, nil, http.StatusNotFound, nil},
		{"ping webhook endpoint", "POST", "/webhook-endpoints/%s/ping", hook, me.Token, nil, http.StatusNotFound, nil},
		{"delete webhook endpoint", "DELETE", "/webhook-endpoints/%s", hook, me.Token, nil, http.StatusNotFound, nil},
		{"read event", "GET", "/events/%s", theirEvent, me.Token, nil, http.StatusNotFound, nil},
		{"redeliver event", "POST", "/events/%s/redeliver", theirEvent, me.Token, nil, http.StatusNotFound, nil},
		{"read event as a reseller", "GET", "/events/%s", theirEvent, myReseller, nil, http.StatusNotFound, nil},
		{"read location", "GET", "/locations/%s", theirLoc.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"read application", "GET", "/applications/%s", theirApps[0].Id.String(), myReseller, nil, http.StatusNotFound, nil},
		{"portfolio", "GET", "/organizations/%s/portfolio", theirSeed.Reseller.OrganizationID.String(), myReseller, nil, http.StatusForbidden, nil},
		{"list invoices by their MID", "GET", "/payment-requests?merchantAccountId=%s", theirMID.Id.String(), me.Token, nil, http.StatusOK, nil},
		{"list invoices by their location", "GET", "/payment-requests?locationId=%s", theirLoc.Id.String(), me.Token, nil, http.StatusOK, nil},
		{"list accounts of their location", "GET", "/accounts?locationId=%s", theirLoc.Id.String(), me.Token, nil, http.StatusOK, nil},
		{"create on their MID", "POST", "/payment-requests", theirMID.Id.String(), me.Token, me.Body("MINE-1", "5.00"), http.StatusUnprocessableEntity, nil},
		{"read recurring invoice", "GET", "/recurring-invoices/%s", theirSeries, me.Token, nil, http.StatusNotFound, nil},
		{"pause recurring invoice", "PATCH", "/recurring-invoices/%s", theirSeries, me.Token, map[string]any{"status": "paused"}, http.StatusNotFound, nil},
		{"end recurring invoice", "DELETE", "/recurring-invoices/%s", theirSeries, me.Token, nil, http.StatusNotFound, nil},
		{"recurring invoice on their MID", "POST", "/recurring-invoices", theirMID.Id.String(), me.Token, recurringBody(t, me, "2030-01-31"),
			http.StatusUnprocessableEntity, nil},
		{"recurring invoice for their customer", "POST", "/recurring-invoices", theirCustomer, me.Token,
			func() map[string]any { b := recurringBody(t, me, "2030-01-31"); b["customerId"] = "%s"; return b }(),
			http.StatusUnprocessableEntity, nil},
		{"list recurring invoices of their customer", "GET", "/recurring-invoices?customerId=%s", theirCustomer, me.Token, nil, http.StatusOK, nil},
		{"read customer", "GET", "/customers/%s", theirCustomer, me.Token, nil, http.StatusNotFound, nil},
		{"change customer", "PATCH", "/customers/%s", theirCustomer, me.Token, map[string]any{"notes": "mine now"}, http.StatusNotFound, nil},
		{"delete customer", "DELETE", "/customers/%s", theirCustomer, me.Token, nil, http.StatusNotFound, nil},
		{"list invoices of their customer", "GET", "/payment-requests?customerId=%s", theirCustomer, me.Token, nil, http.StatusOK, nil},
		{"create for their customer", "POST", "/payment-requests", theirCustomer, me.Token,
			func() map[string]any {
				b := me.Body("MINE-2", "5.00")
				b["customerId"], b["customerEmail"] = "%s", nil
				return b
			}(),
			http.StatusUnprocessableEntity, nil},
		{"read terminal", "GET", "/terminals/%s", theirTerminal.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"read terminal payment", "GET", "/terminal-payments/%s", theirTerminalPayment.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"cancel terminal payment", "POST", "/terminal-payments/%s/cancel", theirTerminalPayment.Id.String(), me.Token, nil, http.StatusNotFound, nil},
		{"list terminal payments of their terminal", "GET", "/terminal-payments?terminalId=%s", theirTerminal.Id.String(), me.Token, nil, http.StatusOK, nil},
		{"list terminal payments of their invoice", "GET", "/terminal-payments?invoiceId=%s", inv.Id.String(), me.Token, nil, http.StatusOK, nil},
		{"terminal payment at their terminal", "POST", "/terminal-payments", theirTerminal.Id.String(), me.Token,
			map[string]any{"terminalId": "%s", "invoiceId": myInv.Id.String()}, http.StatusUnprocessableEntity, nil},
		{"terminal payment toward their invoice", "POST", "/terminal-payments", inv.Id.String(), me.Token,
			map[string]any{"terminalId": myTerminal.Id.String(), "invoiceId": "%s"}, http.StatusUnprocessableEntity, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			send := func(id string) *apitest.Response {
				body := tc.body
				if b, ok := body.(map[string]any); ok {
					// The members marked "%s" take the id; without any, the MID.
					marked := false
					for _, v := range b {
						marked = marked || v == "%s"
					}
					c := map[string]any{}
					for k, v := range b {
						c[k] = v
						if v == "%s" || !marked && k == "merchantAccountId" && v != nil {
							c[k] = id
						}
					}
					body = c
				}
				return env.Do(apitest.Request{Method: tc.method, Path: strings.ReplaceAll(tc.path, "%s", id), Token: tc.token, Body: body,
					Header: tc.header})
			}
			got := send(tc.theirs)
			if got.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", got.StatusCode, got.Body, tc.status)
			}
			for _, s := range secrets {
				if strings.Contains(string(got.Body), s) || strings.Contains(strings.Join(got.Header.Values("Link"), " "), s) {
					t.Errorf("the answer holds their %q: %s", s, got.Body)
				}
			}
			switch {
			case tc.status == http.StatusOK:
				if strings.TrimSpace(string(got.Body)) != "[]" {
					t.Errorf("a list filtered by their id is not empty: %s", got.Body)
				}
			case tc.status != http.StatusForbidden:
				// Exactly as an id that does not exist, so ids cannot be probed.
				if other := send(unknown); string(other.Body) != string(got.Body) || other.StatusCode != got.StatusCode {
					t.Errorf("their id:\n  %d %s\nan unknown id:\n  %d %s", got.StatusCode, got.Body, other.StatusCode, other.Body)
				}
			}
		})
	}

	// Nothing of theirs changed: not sent, not cancelled, card kept; their
	// draft still a draft, unchanged.
	draftAfter, _ := theirs.Read(t, theirDraft.Id)
	apitest.Want(t, "their draft's status", draftAfter.Status, models.InvoiceStatusDraft)
	apitest.Want(t, "their draft's version", draftAfter.Version, int32(1))
	apitest.WantText(t, "their draft's memo", draftAfter.Memo, "their memo text")
	after, afterRaw := theirs.Read(t, inv.Id)
	apitest.Want(t, "their status", after.Status, before.Status)
	apitest.Want(t, "their sentAt set", after.SentAt != nil, false)
	apitest.Want(t, "their cancelledAt set", after.CancelledAt != nil, false)
	apitest.Want(t, "their saved cards", len(*after.SavedCards), 1)
	var theirsAfter models.Customer
	env.Do(apitest.Request{Method: "GET", Path: "/customers/" + theirCustomer, Token: theirs.Token}).JSON(t, &theirsAfter)
	apitest.Want(t, "their customer's notes", theirsAfter.Notes == nil, true)
	apitest.Want(t, "their customer's saved cards", len(theirsAfter.SavedCards), 1)
	apitest.Want(t, "their amount refunded", after.AmountRefunded.Text('f'), "0.00")
	apitest.Want(t, "their amount paid", after.AmountPaid.Text('f'), "12.00")
	apitest.Want(t, "their payments", len(*after.Payments), 2)
	var seriesAfter models.RecurringInvoice
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices/" + theirSeries, Token: theirs.Token}).JSON(t, &seriesAfter)
	apitest.Want(t, "their recurring invoice still active", seriesAfter.Status, models.RecurringInvoiceStatusActive)
	var hookAfter models.WebhookEndpoint
	env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints/" + hook, Token: theirs.Token}).JSON(t, &hookAfter)
	apitest.Want(t, "their endpoint still enabled", hookAfter.Status, models.WebhookEndpointStatusEnabled)
	if t.Failed() {
		t.Logf("their invoice before: %s\nafter: %s", beforeRaw, afterRaw)
	}
	var mine []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests", Token: me.Token}).JSON(t, &mine)
	if slices.ContainsFunc(mine, func(i models.Invoice) bool { return i.MerchantAccountId == theirMID.Id }) {
		t.Errorf("an invoice of mine is on their MID")
	}
}

// Every event type × the keys that read or subscribe, in a merchant and a
// reseller: events.view lists a type (filter type=…), and webhooks.manage
// subscribes to it (creation and PATCH), only beside the permission that
// protects its data; webhook.ping needs none. "*" needs the permission of
// every type the organization's kind receives. A refusal is a 403 naming
// the permission and changes nothing.
func TestEventPermissionMatrix(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	protectedBy := map[string]string{
		"invoice.created": auth.PaymentsView, "invoice.sent": auth.PaymentsView, "invoice.send_failed": auth.PaymentsView,
		"invoice.part_paid": auth.PaymentsView, "invoice.paid": auth.PaymentsView, "invoice.cancelled": auth.PaymentsView,
		"invoice.finalized": auth.PaymentsView, "invoice.updated": auth.PaymentsView, "invoice.deleted": auth.PaymentsView,
		"invoice.payment_recorded": auth.PaymentsView, "invoice.payment_removed": auth.PaymentsView, "invoice.reminder_sent": auth.PaymentsView,
		"card_payment.approved": auth.PaymentsView, "card_payment.declined": auth.PaymentsView, "card_payment.refunded": auth.PaymentsView,
		"terminal_payment.approved": auth.PaymentsView, "terminal_payment.declined": auth.PaymentsView,
		"terminal_payment.cancelled": auth.PaymentsView, "terminal_payment.timed_out": auth.PaymentsView,
		"terminal_payment.failed": auth.PaymentsView,
		"customer.created":        auth.PaymentsView, "customer.updated": auth.PaymentsView, "customer.deleted": auth.PaymentsView,
		"saved_card.removed": auth.PaymentsView, "deposit.created": auth.PaymentsView, "deposit.paid": auth.PaymentsView,
		"recurring_invoice.created": auth.PaymentsView, "recurring_invoice.updated": auth.PaymentsView,
		"recurring_invoice.issued": auth.PaymentsView, "recurring_invoice.skipped": auth.PaymentsView, "recurring_invoice.ended": auth.PaymentsView,
		"application.submitted": auth.ApplicationsView, "application.stage_changed": auth.ApplicationsView, "webhook.ping": "",
	}
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	var inSpec, inTable []string
	for _, v := range spec.Components.Schemas["EventType"].Value.Enum {
		inSpec = append(inSpec, v.(string))
	}
	for typ := range protectedBy {
		inTable = append(inTable, typ)
	}
	slices.Sort(inSpec)
	slices.Sort(inTable)
	if !slices.Equal(inSpec, inTable) {
		t.Fatalf("openapi.yaml's event types %v, this test's %v", inSpec, inTable)
	}

	for _, o := range []struct {
		kind string
		id   uuid.UUID
		data string // the permission protecting the data of the kind's events
	}{{auth.KindMerchant, seed.Merchant.OrganizationID, auth.PaymentsView}, {auth.KindReseller, seed.Reseller.OrganizationID, auth.ApplicationsView}} {
		token := func(permissions ...string) string {
			k := env.NewKey(t, o.id, permissions...)
			return env.Token(k.KeyID, k.Secret)
		}
		keys := []struct {
			name        string
			token       string
			permissions []string
		}{
			{"events.view", token(auth.EventsView), nil},
			{"events.view " + o.data, token(auth.EventsView, o.data), []string{o.data}},
			{"webhooks.manage", token(auth.WebhooksManage), nil},
			{"webhooks.manage " + o.data, token(auth.WebhooksManage, o.data), []string{o.data}},
		}
		// Each key PATCHes an endpoint of its own: changing one takes the
		// permissions of the types it receives already, which another
		// key's PATCH may have widened.
		hooks := map[string]models.WebhookEndpointWithSecret{}
		for _, k := range keys[2:] {
			hooks[k.name] = endpoint(t, env, k.token, "https://hooks.example.com/matrix", "webhook.ping")
		}
		for typ, permission := range protectedBy {
			for _, k := range keys {
				t.Run(o.kind+" "+typ+" with "+k.name, func(t *testing.T) {
					allowed := permission == "" || slices.Contains(k.permissions, permission)
					var reqs []apitest.Request
					if strings.HasPrefix(k.name, auth.EventsView) {
						reqs = append(reqs, apitest.Request{Method: "GET", Path: "/events?type=" + typ})
					} else {
						reqs = append(reqs,
							apitest.Request{Method: "PATCH", Path: "/webhook-endpoints/" + hooks[k.name].Id.String(), Body: map[string]any{"eventTypes": []string{typ}}},
							apitest.Request{Method: "POST", Path: "/webhook-endpoints", Body: map[string]any{"url": "https://hooks.example.com/" + typ, "eventTypes": []string{typ}}})
					}
					for _, req := range reqs {
						req.Token = k.token
						resp := env.Do(req)
						if !allowed {
							p := apitest.WantProblem(t, resp, http.StatusForbidden, "Permission required")
							if !strings.Contains(p.Detail, permission) {
								t.Errorf("%s %s: detail %q does not name %s", req.Method, req.Path, p.Detail, permission)
							}
							continue
						}
						if resp.StatusCode >= 300 {
							t.Fatalf("%s %s: %d %s", req.Method, req.Path, resp.StatusCode, resp.Body)
						}
						if resp.StatusCode == http.StatusCreated {
							var made models.WebhookEndpoint
							resp.JSON(t, &made)
							env.Do(apitest.Request{Method: "DELETE", Path: "/webhook-endpoints/" + made.Id.String(), Token: k.token})
						}
					}
				})
			}
		}
		for _, k := range keys[2:] {
			resp := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: k.token,
				Body: map[string]any{"url": "https://hooks.example.com/all", "eventTypes": []string{"*"}}})
			if k.permissions == nil {
				p := apitest.WantProblem(t, resp, http.StatusForbidden, "Permission required")
				if !strings.Contains(p.Detail, o.data) {
					t.Errorf("%s * with %s: detail %q does not name %s", o.kind, k.name, p.Detail, o.data)
				}
				continue
			}
			apitest.Want(t, o.kind+" * with "+k.name, resp.StatusCode, http.StatusCreated)
		}
		var list []models.WebhookEndpoint
		env.Do(apitest.Request{Method: "GET", Path: "/webhook-endpoints", Token: keys[2].token}).JSON(t, &list)
		apitest.Want(t, o.kind+" endpoints left (the two PATCHed and *)", len(list), 3)
	}
}
