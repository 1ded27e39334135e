package portal_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/webhook"
)

// merchantDay is a merchant with one of each thing the pages of card
// payments, deposits, webhooks and events show: a settled sale, its
// deposit, an endpoint and a ping event.
type merchantDay struct {
	m                              apitest.Merchant
	org                            uuid.UUID
	invoice, sale, deposit, mid    string
	endpoint, ping, invoiceEvent   string
	hookURL, invoiceNumber, retRef string
}

func newMerchantDay(t *testing.T, env *apitest.Env, number string) merchantDay {
	t.Helper()
	m := apitest.NewMerchant(t, env)
	d := merchantDay{m: m, org: uuid.MustParse(m.Org), invoiceNumber: number, mid: m.MIDs[0].Id.String()}
	sale := paidSale(t, env, m, number, "25.00", apitest.CardApprove)
	d.sale, d.invoice, d.retRef = sale.Id.String(), sale.InvoiceId.String(), apitest.Text(sale.RetRef)
	made, err := env.App.Payments.SettleOrganization(t.Context(), d.org, slog.New(slog.DiscardHandler))
	if err != nil || len(made) != 1 {
		t.Fatalf("settle: %d deposits, %v", len(made), err)
	}
	d.deposit = made[0].ID.String()
	d.hookURL = "https://hooks.example.com/" + strings.ToLower(number)
	e, _, _, err := env.App.Webhooks.Create(t.Context(), webhook.Actor{OrganizationID: d.org, Permissions: auth.PermissionsFor(auth.KindMerchant)},
		// Pings only: what the endpoint's types take beside webhooks.manage
		// (payments.view for invoice.*) is TestWebhookActionsNeedTheTypesPermissions'.
		webhook.NewEndpoint{URL: d.hookURL, EventTypes: []string{"webhook.ping"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.endpoint = e.ID.String()
	ping, err := env.App.Webhooks.Ping(t.Context(), webhook.Actor{OrganizationID: d.org, Permissions: auth.PermissionsFor(auth.KindMerchant)}, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	d.ping = ping.String()
	var created []struct{ ID string }
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=invoice.created", Token: m.Token}).JSON(t, &created)
	d.invoiceEvent = created[0].ID
	return d
}

// page is a path of these pages, the permissions it needs, and the form
// a POST sends (no values: refused for what it lacks, or harmless).
type matrixPage struct {
	method, path string
	needs        []string
}

func (d merchantDay) pages() []matrixPage {
	pv, pr, ev, wm := auth.PaymentsView, auth.PaymentsRefund, auth.EventsView, auth.WebhooksManage
	return []matrixPage{
		{"GET", "/portal/card-payments", []string{pv}},
		{"GET", "/portal/card-payments?format=csv", []string{pv}},
		{"GET", "/portal/card-payments/" + d.sale, []string{pv}},
		{"POST", "/portal/card-payments/" + d.sale + "/refund", []string{pv, pr}},
		{"GET", "/portal/deposits", []string{pv}},
		{"GET", "/portal/deposits?format=csv", []string{pv}},
		{"GET", "/portal/deposits/" + d.deposit, []string{pv}},
		{"GET", "/portal/events", []string{ev}},
		{"GET", "/portal/events/" + d.ping, []string{ev}},
		{"GET", "/portal/events/" + d.ping + "/json", []string{ev}},
		{"POST", "/portal/events/" + d.ping + "/redeliver", []string{wm}},
		{"GET", "/portal/webhooks", []string{wm}},
		{"POST", "/portal/webhooks", []string{wm}},
		{"GET", "/portal/webhooks/" + d.endpoint, []string{wm}},
		{"POST", "/portal/webhooks/" + d.endpoint + "/status", []string{wm}},
		{"POST", "/portal/webhooks/" + d.endpoint + "/rotate-secret", []string{wm}},
		{"POST", "/portal/webhooks/" + d.endpoint + "/ping", []string{wm}},
		{"GET", "/portal/webhooks/" + d.endpoint + "/delete", []string{wm}},
	}
}

// Every page of card payments, deposits, webhooks and events × a member
// holding each one permission of a merchant (and an Owner holding none of
// theirs, and a reseller's member holding every one of its own): a member
// holding what a page needs gets it (no 403, no failure); any other gets
// 403 naming the permission it lacks, and no link to it. Without a
// session, the sign-in.
func TestMoneyPagesPermissionMatrix(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	d := newMerchantDay(t, env, "MX-1")
	type who struct {
		name  string
		org   uuid.UUID
		role  string
		perms []string
	}
	var members []who
	for _, p := range auth.PermissionsFor(auth.KindMerchant) {
		members = append(members, who{"a Member with only " + p, d.org, "Member", []string{p}})
	}
	members = append(members, who{"an Owner with accounts.view", d.org, "Owner", []string{auth.AccountsView}},
		who{"a Member with payments.view and payments.refund", d.org, "Member", []string{auth.PaymentsView, auth.PaymentsRefund}})
	seed := env.Seed()
	members = append(members, who{"a reseller's Member with all of its permissions", seed.Reseller.OrganizationID, "Member",
		auth.PermissionsFor(auth.KindReseller)})
	links := map[string][]string{"/portal/card-payments": {auth.PaymentsView}, "/portal/deposits": {auth.PaymentsView},
		"/portal/events": {auth.EventsView}, "/portal/webhooks": {auth.WebhooksManage}}
	for _, w := range members {
		t.Run(w.name, func(t *testing.T) {
			c, _ := portaltest.SignedIn(t, env, w.org, w.role, w.perms...)
			home := c.Get("/portal/").Want(t, http.StatusOK)
			for link, needs := range links {
				holds := !slices.ContainsFunc(needs, func(p string) bool { return !slices.Contains(w.perms, p) })
				if strings.Contains(home.Body, `href="`+link+`"`) != holds {
					t.Errorf("a link to %s: %v, want %v", link, !holds, holds)
				}
			}
			for _, pg := range d.pages() {
				var got portaltest.Page
				if pg.method == "GET" {
					got = c.Get(pg.path)
				} else {
					got = c.Post(pg.path, home.CSRF(t), url.Values{})
				}
				missing := ""
				for _, p := range pg.needs {
					if !slices.Contains(w.perms, p) {
						missing = p
						break
					}
				}
				switch {
				case missing != "":
					if got.Status != http.StatusForbidden || !strings.Contains(got.Body, missing) {
						t.Errorf("%s %s: %d, want 403 naming %s", pg.method, pg.path, got.Status, missing)
					}
				case got.Status == http.StatusForbidden || got.Status >= 500:
					t.Errorf("%s %s: %d for a member holding %v:\n%s", pg.method, pg.path, got.Status, pg.needs, got.Body)
				}
			}
		})
	}
	guest := portaltest.NewClient(t, env)
	for _, pg := range d.pages() {
		if pg.method == "GET" {
			guest.Get(pg.path).WantRedirect(t, "/portal/sign-in")
		}
	}
	// The refund form was sent only empty-handed by members who may
	// refund: it refunded the sale (an empty amount is all of it) once.
	var refunds []struct{ ID string }
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=refund", Token: d.m.Token}).JSON(t, &refunds)
	if len(refunds) > 1 {
		t.Errorf("%d refunds", len(refunds))
	}
}

// Another merchant's sale, deposit, endpoint and events, by id in every
// path of these pages and in the lists' filters, to a member holding every
// permission: the same 404 as an unknown id (a list filtered by their id
// is empty), nothing of theirs in any answer, and nothing of theirs
// changed. A POST without the CSRF token changes nothing either.
func TestMoneyPagesOtherOrganizationsIDs(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	theirs := newMerchantDay(t, env, "THEIRS-9")
	mine := newMerchantDay(t, env, "MINE-9")
	c, _ := portaltest.SignedIn(t, env, mine.org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	csrf := c.Get("/portal/").CSRF(t)
	secrets := []string{theirs.sale, theirs.invoice, theirs.deposit, theirs.endpoint, theirs.ping, theirs.invoiceEvent,
		theirs.hookURL, theirs.invoiceNumber, theirs.retRef, theirs.mid}
	unknown := uuid.NewString()
	swap := func(path, id, with string) string { return strings.ReplaceAll(path, id, with) }
	for _, pg := range theirs.pages() {
		id := ""
		for _, s := range []string{theirs.sale, theirs.deposit, theirs.endpoint, theirs.ping} {
			if strings.Contains(pg.path, s) {
				id = s
			}
		}
		if id == "" {
			continue
		}
		send := func(path string) portaltest.Page {
			if pg.method == "GET" {
				return c.Get(path)
			}
			return c.Post(path, csrf, url.Values{"status": {"disabled"}, "expireCurrentInSeconds": {"0"}, "key": {"k-" + uuid.NewString()}})
		}
		got, other := send(pg.path), send(swap(pg.path, id, unknown))
		if got.Status != http.StatusNotFound || other.Status != http.StatusNotFound ||
			swap(got.Body, pg.path, "") != swap(other.Body, swap(pg.path, id, unknown), "") {
			t.Errorf("%s %s: %d, an unknown id %d; want the same 404", pg.method, pg.path, got.Status, other.Status)
		}
		for _, s := range secrets {
			if strings.Contains(got.Body, s) {
				t.Errorf("%s %s holds their %q", pg.method, pg.path, s)
			}
		}
	}
	c.Post("/portal/webhooks/"+theirs.endpoint+"/delete", csrf, nil).Want(t, http.StatusNotFound)
	for _, path := range []string{"/portal/card-payments?merchantAccountId=" + theirs.mid, "/portal/card-payments?invoiceId=" + theirs.invoice,
		"/portal/card-payments?depositId=" + theirs.deposit, "/portal/deposits?merchantAccountId=" + theirs.mid} {
		list := c.Get(path).Want(t, http.StatusOK)
		export := c.Get(path+"&format=csv").Want(t, http.StatusOK)
		if strings.Count(strings.TrimSpace(export.Body), "\n") != 0 {
			t.Errorf("%s exports rows:\n%s", path, export.Body)
		}
		for _, s := range secrets[:len(secrets)-1] { // their id is in the filter's own address
			if strings.Contains(list.Body, s) && s != theirs.invoice && s != theirs.deposit {
				t.Errorf("%s holds their %q", path, s)
			}
		}
		if regexp.MustCompile(`<tr><td[^>]*><a href="/portal/`).MatchString(list.Body) {
			t.Errorf("%s lists rows", path)
		}
	}
	if list := c.Get("/portal/events?limit=100"); strings.Contains(list.Body, theirs.ping) || strings.Contains(list.Body, theirs.invoiceEvent) {
		t.Error("my events list shows theirs")
	}
	if list := c.Get("/portal/webhooks"); strings.Contains(list.Body, theirs.hookURL) {
		t.Error("my webhooks list shows theirs")
	}

	// Nothing of theirs changed; nothing of mine by forged forms.
	for _, d := range []merchantDay{theirs} {
		e, err := env.App.Webhooks.Endpoint(t.Context(), d.org, uuid.MustParse(d.endpoint))
		if err != nil || e.Status != webhook.Enabled {
			t.Errorf("their endpoint: %+v, %v", e, err)
		}
	}
	for _, pg := range mine.pages() {
		if pg.method == "POST" {
			c.Do("POST", pg.path, url.Values{"status": {"disabled"}, "expireCurrentInSeconds": {"0"}, "key": {"k-forged"},
				"url": {"https://hooks.example.com/forged"}, "eventTypes": {"*"}}, nil).Want(t, http.StatusForbidden)
		}
	}
	c.Do("POST", "/portal/webhooks/"+mine.endpoint+"/delete", url.Values{}, nil).Want(t, http.StatusForbidden)
	for _, d := range []merchantDay{theirs, mine} {
		var refunds []struct{ ID string }
		env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=refund", Token: d.m.Token}).JSON(t, &refunds)
		if len(refunds) != 0 {
			t.Errorf("%s: %d refunds", d.invoiceNumber, len(refunds))
		}
		list, err := env.App.Webhooks.Endpoints(t.Context(), d.org)
		if err != nil || len(list) != 1 || list[0].Status != webhook.Enabled {
			t.Errorf("%s's endpoints: %+v, %v", d.invoiceNumber, list, err)
		}
	}
}
