package portal_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/webhook"
)

// auditedAction is one change a member makes in the portal, and how the
// test sees that it was made.
type auditedAction struct {
	action string // as the audit log names it
	// setUp makes what the change needs and returns the form's page (for
	// its CSRF token), where it posts, what it posts, and a query counting
	// the changes made ($1 the organization; more arguments after).
	setUp func(t *testing.T) (page, path string, form url.Values, changes string, args []any)
	// again is how many entries a second sending of the form leaves: 1
	// for a form that changes nothing sent again (a replay, or a change
	// that is no longer possible), 2 for one that changes again (a send,
	// a ping).
	again int
}

// Every audited change a member makes in the portal has its entry,
// whatever the client does. The audit log's table is held locked (as a
// slow database would hold a write) until the change waits on it; the
// client then drops the connection, which cancels the request's context,
// as the reproduction's connection reset did. The change and its entry go
// or stay together: never a change without its entry. The browser then
// sends the form again: one change, one entry; and a third time: a
// replayed form writes no second entry. Pings and redeliveries are
// audited; no URL in the log keeps its query or fragment.
func TestAuditEntryOutlivesTheClient(t *testing.T) {
	t.Parallel()
	env, _ := newOwnEnv(t)
	db := env.App.People.DB
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	everything := auth.PermissionsFor(auth.KindMerchant)
	c, _ := portaltest.SignedIn(t, env, org, "Admin", everything...)
	ctx := t.Context()
	key := func(p portaltest.Page) string { return formKey(t, p) }
	endpoint := func(t *testing.T) webhook.Endpoint {
		e, _, _, err := env.App.Webhooks.Create(ctx, webhook.Actor{OrganizationID: org, Permissions: everything},
			webhook.NewEndpoint{URL: "https://hooks.example.com/in?token=s3cret", EventTypes: []string{"invoice.paid"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	count := func(t *testing.T, q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.GetContext(ctx, &n, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}

	for _, a := range []auditedAction{
		{action: "API key created", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			p := c.Get("/portal/keys")
			return "/portal/keys", "/portal/keys", url.Values{"name": {"Audited"}, "permissions": {auth.PaymentsView}, "idempotencyKey": {key(p)}},
				`SELECT count(*) FROM api_keys WHERE organization_id = $1 AND name = 'Audited'`, nil
		}},
		{action: "API key revoked", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			k := env.NewKey(t, org, auth.PaymentsView)
			return "/portal/keys", "/portal/keys/" + k.KeyID + "/revoke", nil,
				`SELECT count(*) FROM api_keys WHERE organization_id = $1 AND id = $2 AND revoked_at IS NOT NULL`, []any{k.KeyID}
		}},
		{action: "invoice created", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			p := c.Get("/portal/invoices/new")
			return "/portal/invoices/new", "/portal/invoices", form("idempotencyKey", key(p), "merchantAccountId", m.MIDs[0].Id.String(),
					"invoiceNumber", "AUDIT-1", "customerName", "Ada Park", "customerEmail", "ada@example.com", "amount", "12.00", "send", "no"),
				`SELECT count(*) FROM invoices WHERE organization_id = $1 AND invoice_number = 'AUDIT-1'`, nil
		}},
		{action: "invoice sent", again: 2, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			inv := m.MustCreate(t, m.Body("AUDIT-2", "12.00"))
			return "/portal/invoices/" + inv.Id.String(), "/portal/invoices/" + inv.Id.String() + "/send", nil,
				`SELECT count(*) FROM events WHERE organization_id = $1 AND type = 'invoice.sent' AND data->>'id' = $2`, []any{inv.Id.String()}
		}},
		{action: "invoice cancelled", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			inv := m.MustCreate(t, m.Body("AUDIT-3", "12.00"))
			return "/portal/invoices/" + inv.Id.String(), "/portal/invoices/" + inv.Id.String() + "/cancel", nil,
				`SELECT count(*) FROM invoices WHERE organization_id = $1 AND id = $2 AND status = 'cancelled'`, []any{inv.Id}
		}},
		{action: "payment recorded", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			inv := m.MustCreate(t, m.Body("AUDIT-4", "12.00"))
			p := c.Get("/portal/invoices/" + inv.Id.String() + "/payments")
			return "/portal/invoices/" + inv.Id.String(), "/portal/invoices/" + inv.Id.String() + "/payments",
				form("idempotencyKey", key(p), "amount", "5.00", "method", "cash"),
				`SELECT count(*) FROM recorded_payments WHERE organization_id = $1 AND invoice_id = $2`, []any{inv.Id}
		}},
		{action: "payment removed", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			inv := m.MustCreate(t, m.Body("AUDIT-5", "12.00"))
			if _, _, err := env.App.Invoices.RecordPayment(ctx, invoice.Actor{OrganizationID: org, Name: "setup"}, inv.Id,
				invoice.RecordedPayment{Amount: *apd.New(500, -2), Method: "cash"}, nil); err != nil {
				t.Fatal(err)
			}
			paid := recordedOf(t, m, inv.Id)
			return "/portal/invoices/" + inv.Id.String(), "/portal/invoices/" + inv.Id.String() + "/payments/" + paid.String() + "/remove", nil,
				`SELECT 1 - count(*) FROM recorded_payments WHERE organization_id = $1 AND id = $2`, []any{paid}
		}},
		{action: "reminder settings changed", again: 2, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			return "/portal/reminder-settings", "/portal/reminder-settings", form("enabled", "on", "offsetsDays", "1, 2"),
				`SELECT count(*) FROM reminder_settings WHERE organization_id = $1 AND offsets_days = '{1,2}'`, nil
		}},
		{action: "card payment refunded", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			sale := paidSale(t, env, m, "AUDIT-6", "20.00", apitest.CardApprove)
			path := "/portal/card-payments/" + sale.Id.String()
			p := c.Get(path)
			return path, path + "/refund", url.Values{"key": {between(p.Body, `name="key" value="`, `"`)}, "amount": {"5.00"}, "confirmed": {"yes"}},
				`SELECT count(*) FROM card_payments WHERE organization_id = $1 AND refund_of = $2 AND status = 'approved'`, []any{sale.Id}
		}},
		{action: "webhook endpoint created", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			p := c.Get("/portal/webhooks")
			return "/portal/webhooks", "/portal/webhooks", url.Values{"url": {"https://hooks.example.com/made?token=s3cret"},
					"eventTypes": {"invoice.paid"}, "idempotencyKey": {key(p)}},
				`SELECT count(*) FROM webhook_endpoints WHERE organization_id = $1 AND url LIKE '%/made?%'`, nil
		}},
		{action: "webhook endpoint changed", again: 2, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			e := endpoint(t)
			return "/portal/webhooks/" + e.ID.String(), "/portal/webhooks/" + e.ID.String() + "/status", url.Values{"status": {"disabled"}},
				`SELECT count(*) FROM webhook_endpoints WHERE organization_id = $1 AND id = $2 AND status = 'disabled'`, []any{e.ID}
		}},
		{action: "webhook secret rotated", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			e := endpoint(t)
			p := c.Get("/portal/webhooks/" + e.ID.String())
			return "/portal/webhooks/" + e.ID.String(), "/portal/webhooks/" + e.ID.String() + "/rotate-secret",
				url.Values{"expireCurrentInSeconds": {"3600"}, "idempotencyKey": {key(p)}},
				`SELECT count(*) FROM webhook_endpoints WHERE organization_id = $1 AND id = $2 AND previous_secret IS NOT NULL`, []any{e.ID}
		}},
		{action: "webhook endpoint pinged", again: 2, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			e := endpoint(t)
			return "/portal/webhooks/" + e.ID.String(), "/portal/webhooks/" + e.ID.String() + "/ping", nil,
				`SELECT count(*) FROM events WHERE organization_id = $1 AND type = 'webhook.ping' AND data->>'endpointId' = $2`, []any{e.ID.String()}
		}},
		{action: "webhook event sent again", again: 2, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			e := endpoint(t)
			ping, err := env.App.Webhooks.Ping(ctx, webhook.Actor{OrganizationID: org, Permissions: everything}, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			// The ping counted one send; each redelivery counts one more.
			return "/portal/events/" + ping.String(), "/portal/events/" + ping.String() + "/redeliver", nil,
				`SELECT cardinality(requested_sends) - 1 FROM webhook_endpoints WHERE organization_id = $1 AND id = $2`, []any{e.ID}
		}},
		{action: "webhook endpoint deleted", again: 1, setUp: func(t *testing.T) (string, string, url.Values, string, []any) {
			e := endpoint(t)
			return "/portal/webhooks/" + e.ID.String(), "/portal/webhooks/" + e.ID.String() + "/delete", nil,
				`SELECT 1 - count(*) FROM webhook_endpoints WHERE organization_id = $1 AND id = $2`, []any{e.ID}
		}},
	} {
		t.Run(a.action, func(t *testing.T) {
			page, path, f, changes, args := a.setUp(t)
			csrf := c.Get(page).Want(t, http.StatusOK).CSRF(t)
			changed := func() int { return count(t, changes, append([]any{org}, args...)...) }
			entries := func() int {
				return count(t, `SELECT count(*) FROM audit_log WHERE organization_id = $1 AND action = $2`, org, a.action)
			}

			dropWhileAuditing(t, db, c, path, csrf, f)
			if n, e := changed(), entries(); n != e {
				t.Fatalf("the client dropped the connection: %d changes, %d audit entries", n, e)
			}
			if a.action == "card payment refunded" {
				// The processor refunded; the refund's answer, lost with the
				// request, is settled when the form comes again.
				apitest.Want(t, "refunds recorded before the form comes again", changed(), 0)
			}
			c.Post(path, csrf, f)
			if n, e := changed(), entries(); n != 1 || e != 1 {
				t.Fatalf("the form sent again: %d changes, %d audit entries; want 1 and 1", n, e)
			}
			c.Post(path, csrf, f)
			apitest.Want(t, "audit entries after a third sending", entries(), a.again)
		})
	}

	var leaked []string
	if err := db.SelectContext(ctx, &leaked, `SELECT action || ': ' || detail FROM audit_log
		WHERE organization_id = $1 AND (detail LIKE '%s3cret%' OR detail LIKE '%#%' OR detail LIKE '%?%')`, org); err != nil {
		t.Fatal(err)
	}
	if len(leaked) > 0 {
		t.Errorf("audit entries keeping a URL's query or fragment: %q", leaked)
	}
	c.Get("/portal/audit").Want(t, http.StatusOK).Has(t, "webhook endpoint pinged", "webhook event sent again", "https://hooks.example.com/in")
}

// dropWhileAuditing posts form to path as c, holding the audit log's table
// locked until the change waits to write its entry; then the client drops
// the connection, and the lock goes once the server has given up.
func dropWhileAuditing(t *testing.T, db *sqlx.DB, c *portaltest.Client, path, csrf string, form url.Values) {
	t.Helper()
	lock, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback() //nolint:errcheck // ends the lock
	if _, err := lock.Exec(`LOCK TABLE audit_log IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	f := url.Values{"csrf": {csrf}}
	for k, v := range form {
		f[k] = v
	}
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Env.URL+path, strings.NewReader(f.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := c.HTTP.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Errorf("the post was answered %d while the audit log was locked:\n%s", resp.StatusCode, b)
		}
	}()
	waiting := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock'
			AND query LIKE '%INSERT INTO audit_log%'`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitUntil(t, "the change waits to write its audit entry", func() bool { return waiting() == 1 })
	cancel()
	<-done
	waitUntil(t, "the server gives up writing", func() bool { return waiting() == 0 })
}

// waitUntil polls ok for up to 10 s.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}
