package portal_test

import (
	"encoding/csv"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

// The events list shows what GET /events shows the same member's key:
// with payments.view the invoice's events and pings, without it the pings
// alone; a type filter naming a type the member may not read is a 403
// naming the permission, as in the API; an event of another kind is a
// 404 by id. The CSV holds the same events as the API's list.
func TestEventsFilteredByPermission(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	inv := m.MustCreate(t, m.Body("EV-1", "12.00"))
	hook := env.NewKey(t, org, auth.WebhooksManage)
	var made struct{ ID string }
	env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: env.Token(hook.KeyID, hook.Secret),
		Body: map[string]any{"url": "https://hooks.example.com/ev", "eventTypes": []string{"webhook.ping"}}}).JSON(t, &made)
	env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints/" + made.ID + "/ping", Token: env.Token(hook.KeyID, hook.Secret)})

	wide, _ := portaltest.SignedIn(t, env, org, "Member", auth.EventsView, auth.PaymentsView)
	narrow, _ := portaltest.SignedIn(t, env, org, "Member", auth.EventsView)
	for _, tc := range []struct {
		name  string
		c     *portaltest.Client
		perms []string
	}{{"with payments.view", wide, []string{auth.EventsView, auth.PaymentsView}}, {"without", narrow, []string{auth.EventsView}}} {
		key := env.NewKey(t, org, tc.perms...)
		var api []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		env.Do(apitest.Request{Method: "GET", Path: "/events?limit=100", Token: env.Token(key.KeyID, key.Secret)}).JSON(t, &api)
		page := tc.c.Get("/portal/events?limit=100").Want(t, http.StatusOK)
		body := page.Body[strings.Index(page.Body, "<tbody>"):]
		if n := strings.Count(body, "<tr>"); n != len(api) || len(api) == 0 {
			t.Errorf("%s: %d events listed, the API lists %d", tc.name, n, len(api))
		}
		for _, e := range api {
			if !strings.Contains(body, `href="/portal/events/`+e.ID+`"`) {
				t.Errorf("%s: %s %s is not listed", tc.name, e.Type, e.ID)
			}
		}
		export := tc.c.Get("/portal/events?format=csv").Want(t, http.StatusOK)
		records, err := csv.NewReader(strings.NewReader(export.Body)).ReadAll()
		if err != nil || len(records) != len(api)+1 || strings.Join(records[0], ",") != "id,type,createdAt,data" {
			t.Fatalf("%s: the export: %v, %d records, want %d", tc.name, err, len(records), len(api)+1)
		}
		for i, e := range api {
			if records[i+1][0] != e.ID || records[i+1][1] != e.Type {
				t.Errorf("%s: row %d is %s %s, the API's %s %s", tc.name, i, records[i+1][0], records[i+1][1], e.ID, e.Type)
			}
		}
	}
	wide.Get("/portal/events").Has(t, "EV-1", "invoice.created")
	if page := narrow.Get("/portal/events"); strings.Contains(page.Body, "EV-1") || !strings.Contains(page.Body, "webhook.ping") {
		t.Errorf("without payments.view, the list shows the invoice's event or lacks the ping")
	}
	narrow.Get("/portal/events?type=invoice.created").Want(t, http.StatusForbidden).Has(t, "payments.view")
	narrow.Get("/portal/events?type=invoice.created&format=csv").Want(t, http.StatusForbidden)
	narrow.Get("/portal/events?type=invoice.eaten").Want(t, http.StatusBadRequest)
	var created []struct{ ID string }
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=invoice.created", Token: m.Token}).JSON(t, &created)
	if len(created) != 1 {
		t.Fatalf("invoice.created events: %+v", created)
	}
	wide.Get("/portal/events/"+created[0].ID).Want(t, http.StatusOK).Has(t, inv.Id.String())
	narrow.Get("/portal/events/"+created[0].ID).Want(t, http.StatusNotFound)
	narrow.Get("/portal/events/"+created[0].ID+"/json").Want(t, http.StatusNotFound)
	if got := wide.Get("/portal/events/"+created[0].ID+"/json").Want(t, http.StatusOK); !strings.Contains(got.Body, `"invoiceNumber":"EV-1"`) {
		t.Errorf("the JSON download: %s", got.Body)
	}
}
