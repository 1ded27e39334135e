package portal_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

// merchantPaths are the pages of the merchant's day and what each needs
// (any one of permissions); {id} is an invoice, {payment} a payment
// recorded toward it.
var merchantPaths = []struct {
	method, path string
	permissions  []string
	nav          string // the navigation's link to it, if any
}{
	{"GET", "/portal/invoices", []string{auth.PaymentsView}, "/portal/invoices"},
	{"GET", "/portal/invoices?format=csv", []string{auth.PaymentsView}, ""},
	{"GET", "/portal/invoices/new", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/invoices/{id}", []string{auth.PaymentsView}, ""},
	{"GET", "/portal/invoices/{id}/pdf", []string{auth.PaymentsView}, ""},
	{"GET", "/portal/invoices/{id}/edit", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices/{id}/edit", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/invoices/{id}/duplicate", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices/{id}/finalize", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/invoices/{id}/delete", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices/{id}/delete", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/invoices/{id}/payments", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices/{id}/payments", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices/{id}/payments/{payment}/remove", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices/{id}/send", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/invoices/{id}/cancel", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices/{id}/cancel", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/reminder-settings", []string{auth.PaymentsView}, "/portal/reminder-settings"},
	{"POST", "/portal/reminder-settings", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/locations", []string{auth.LocationsView, auth.AccountsView}, "/portal/locations"},
	{"GET", "/portal/terminals", []string{auth.AccountsView}, "/portal/terminals"},
	{"GET", "/portal/invoices/{id}/terminal", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/invoices/{id}/terminal", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/customers", []string{auth.PaymentsView}, "/portal/customers"},
	{"GET", "/portal/recurring", []string{auth.PaymentsView}, "/portal/recurring"},
	{"GET", "/portal/recurring?format=csv", []string{auth.PaymentsView}, ""},
	{"GET", "/portal/recurring/new", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/recurring", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/invoices/{id}/recurring", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/recurring/{series}", []string{auth.PaymentsView}, ""},
	{"GET", "/portal/recurring/{series}/edit", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/recurring/{series}/edit", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/recurring/{series}/status", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/recurring/{series}/end", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/recurring/{series}/end", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/customers?format=csv", []string{auth.PaymentsView}, ""},
	{"GET", "/portal/customers/new", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/customers", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/customers/{customer}", []string{auth.PaymentsView}, ""},
	{"GET", "/portal/customers/{customer}/edit", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/customers/{customer}/edit", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/customers/{customer}/cards/{card}/remove", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/customers/{customer}/cards/{card}/remove", []string{auth.PaymentsCreate}, ""},
	{"GET", "/portal/customers/{customer}/delete", []string{auth.PaymentsCreate}, ""},
	{"POST", "/portal/customers/{customer}/delete", []string{auth.PaymentsCreate}, ""},
}

// Every page × every merchant permission: a member holding only one that
// the page needs gets through (no 403, no 5xx); a member holding only
// another gets 403 naming what is needed, and no link to the page. A POST
// without its CSRF token is refused whatever the member holds.
func TestPortalPermissionMatrix(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	inv := m.MustCreate(t, m.Body("MATRIX-1", "40.00"))
	r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "1.00", "method": "cash"}})
	apitest.Want(t, "record", r.StatusCode, http.StatusCreated)
	payment := recordedOf(t, m, inv.Id)
	series := createSeriesOf(t, m, map[string]any{"merchantAccountId": m.MIDs[0].Id.String(), "customerId": inv.CustomerId.String(),
		"invoiceNumberPrefix": "MATRIX", "amount": "40.00", "lines": nil, "memo": nil, "poNumber": nil, "delivery": nil, "reminders": nil,
		"interval": "month", "intervalCount": 1, "startOn": time.Now().Add(48 * time.Hour).Format(time.DateOnly), "endAfter": nil,
		"endOn": nil, "dueDays": 14, "send": true, "autoPay": nil})
	fill := func(path string) string {
		return strings.NewReplacer("{id}", inv.Id.String(), "{payment}", payment.String(), "{customer}", inv.CustomerId.String(),
			"{card}", uuid.NewString(), "{series}", series).Replace(path)
	}

	for _, p := range auth.PermissionsFor(auth.KindMerchant) {
		c, _ := portaltest.SignedIn(t, env, org, "Member", p)
		home := c.Get("/portal/").Want(t, http.StatusOK)
		for _, e := range merchantPaths {
			allowed := slices.Contains(e.permissions, p)
			t.Run(e.method+" "+e.path+" with only "+p, func(t *testing.T) {
				var got portaltest.Page
				if e.method == "GET" {
					got = c.Get(fill(e.path))
				} else {
					got = c.Post(fill(e.path), home.CSRF(t), form("idempotencyKey", uuid.NewString()))
				}
				if allowed && (got.Status == http.StatusForbidden || got.Status >= 500) {
					t.Fatalf("%d with %s:\n%s", got.Status, p, got.Body)
				}
				if !allowed {
					got.Want(t, http.StatusForbidden).Has(t, e.permissions[0])
				}
				if e.nav != "" && strings.Contains(home.Body, `href="`+e.nav+`"`) != allowed {
					t.Errorf("link to %s shown: %v, allowed: %v", e.nav, !allowed, allowed)
				}
			})
		}
	}

	// No CSRF token, or another origin: 403, whatever the member holds.
	owner, _ := portaltest.SignedIn(t, env, org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	page := owner.Get("/portal/")
	before, _ := m.Read(t, inv.Id)
	for _, e := range merchantPaths {
		if e.method != "POST" {
			continue
		}
		f := form("idempotencyKey", uuid.NewString(), "amount", "1", "method", "cash", "offsetsDays", "1")
		owner.Do("POST", fill(e.path), f, nil).Want(t, http.StatusForbidden)
		f.Set("csrf", page.CSRF(t))
		owner.Do("POST", fill(e.path), f, http.Header{"Origin": {"https://evil.example.com"}}).Want(t, http.StatusForbidden)
	}
	after, raw := m.Read(t, inv.Id)
	if after.Status != before.Status || len(*after.Payments) != len(*before.Payments) || after.AmountPaid.Text('f') != before.AmountPaid.Text('f') {
		t.Errorf("forged forms changed the invoice: %s", raw)
	}
}

// Another organization's invoice and payment ids answer 404 on every page
// and action that takes them, as unknown ids do; nothing of theirs shows
// in any answer (the lists and the export included), and nothing of
// theirs changes.
func TestPortalOtherOrganizationsIDs(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	theirs := apitest.NewMerchant(t, env)
	b := theirs.Body("THEIRS-1", "30.00")
	b["customerName"], b["memo"] = "Their Customer Name", "their memo text"
	inv := theirs.MustCreate(t, b)
	r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: theirs.Token,
		Body: map[string]any{"amount": "2.00", "method": "check", "reference": "their check reference"}})
	apitest.Want(t, "their payment", r.StatusCode, http.StatusCreated)
	payment := recordedOf(t, theirs, inv.Id)
	before, beforeRaw := theirs.Read(t, inv.Id)

	me, c := merchant(t, env, auth.PermissionsFor(auth.KindMerchant)...)
	mine := me.MustCreate(t, me.Body("MINE-1", "10.00"))
	home := c.Get("/portal/")
	secrets := []string{inv.Id.String(), payment.String(), "THEIRS-1", "Their Customer Name", "their memo text", "their check reference", theirs.MIDs[0].Mid}

	unknown := uuid.NewString()
	for _, e := range merchantPaths {
		if !strings.Contains(e.path, "{id}") && !strings.Contains(e.path, "{customer}") {
			continue
		}
		for _, ids := range []struct{ name, invoice, payment, customer string }{
			{"their invoice", inv.Id.String(), payment.String(), inv.CustomerId.String()},
			{"an unknown invoice", unknown, payment.String(), unknown},
			{"their payment on my invoice", mine.Id.String(), payment.String(), mine.CustomerId.String()},
		} {
			if ids.invoice == mine.Id.String() && !strings.Contains(e.path, "{payment}") && !strings.Contains(e.path, "{card}") {
				continue
			}
			t.Run(e.method+" "+e.path+", "+ids.name, func(t *testing.T) {
				path := strings.NewReplacer("{id}", ids.invoice, "{payment}", ids.payment, "{customer}", ids.customer,
					"{card}", unknown).Replace(e.path)
				var got portaltest.Page
				if e.method == "GET" {
					got = c.Get(path)
				} else {
					got = c.Post(path, home.CSRF(t), form("idempotencyKey", uuid.NewString(), "amount", "1.00", "method", "cash"))
				}
				got.Want(t, http.StatusNotFound)
				for _, s := range secrets {
					if strings.Contains(got.Body, s) {
						t.Errorf("the answer holds %q", s)
					}
				}
			})
		}
	}
	for _, path := range []string{"/portal/invoices", "/portal/invoices?format=csv", "/portal/invoices?customerName=Their", "/portal/", "/portal/locations",
		"/portal/customers", "/portal/customers?q=their", "/portal/customers?format=csv"} {
		got := c.Get(path).Want(t, http.StatusOK)
		for _, s := range secrets {
			if strings.Contains(got.Body, s) {
				t.Errorf("%s holds %q", path, s)
			}
		}
	}
	after, afterRaw := theirs.Read(t, inv.Id)
	if after.Status != before.Status || after.SentAt != nil || len(*after.Payments) != 1 || after.Status == models.InvoiceStatusCancelled {
		t.Errorf("their invoice changed:\n%s\n%s", beforeRaw, afterRaw)
	}
}
