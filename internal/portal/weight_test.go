package portal_test

import (
	"fmt"
	"log/slog"
	"net/http"
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

// maxPageWeight is what a portal page may weigh before compression, its
// stylesheet, scripts and images included (decisions.md, "Performance
// targets (third round)").
const maxPageWeight = 60 << 10

// What a page loads besides itself: its stylesheet, scripts and images
// (inline data: images are part of the page already).
var pageLoads = regexp.MustCompile(`<(?:link[^>]+rel="stylesheet"[^>]+href|script[^>]+src|img[^>]+src)="(/[^"]+)"`)

// weigh is the page at path and what it loads, in bytes uncompressed, and
// what each weighs, for the failure's message.
func weigh(t *testing.T, c *portaltest.Client, path string) (int, string) {
	t.Helper()
	p := c.Get(path).Want(t, http.StatusOK)
	total, parts := len(p.Body), []string{fmt.Sprintf("page %d", len(p.Body))}
	for _, m := range pageLoads.FindAllStringSubmatch(p.Body, -1) {
		a := c.Get(strings.ReplaceAll(m[1], "&amp;", "&")).Want(t, http.StatusOK)
		total += len(a.Body)
		parts = append(parts, fmt.Sprintf("%s %d", m[1], len(a.Body)))
	}
	return total, strings.Join(parts, ", ")
}

// Every main page of a merchant's member and of a reseller's, in its
// fullest realistic state (a full page of rows; an invoice with as many
// lines as its page shows, payments of each kind, a refund and its
// events; 30 days of deposits in the chart), weighs at most 60 KB before
// compression with its stylesheet and scripts.
func TestPagesWeighAtMost60KB(t *testing.T) {
	t.Parallel()
	start := time.Now().AddDate(0, 0, -32).Truncate(time.Second)
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(start)})
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	refunds := env.NewKey(t, org, auth.PaymentsRefund)

	// 30 days of card sales settled each day (one a day, 50 on the last,
	// as many as a deposit's page lists): full pages of card payments and
	// deposits, and a chart with every day drawn.
	customers := []string{"Ada Park", "Bo Chen", "Carmen Díaz-Villanueva", "Dev Patel", "Eun-ji Seo", "Farah Haddad"}
	var sale string
	for i := range 30 {
		b := m.Body(fmt.Sprintf("INV-2026-%04d", 1000+i), "120.00", apitest.Line("2", "45"), apitest.Line("1", "30"))
		b["customerName"], b["customerCompany"] = customers[i%len(customers)], "Harbor & Finch Interiors LLC"
		b["customerEmail"] = fmt.Sprintf("accounts.payable+%d@harborfinch.example.com", i)
		inv := m.MustCreate(t, b)
		apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "120.00"}), http.StatusSeeOther)
		for j := 0; i == 29 && j < 49; j++ {
			b["invoiceNumber"] = fmt.Sprintf("INV-2026-%04d", 1100+j)
			inv := m.MustCreate(t, b)
			apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "120.00"}), http.StatusSeeOther)
		}
		if i == 0 {
			var sales []struct{ Id string }
			env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=sale&invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &sales)
			sale = sales[0].Id
			r := env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + sale + "/refund", Token: env.Token(refunds.KeyID, refunds.Secret),
				Body: map[string]any{"amount": "15.00", "reason": "One chair arrived with a scratched leg"}})
			apitest.Want(t, "refund", r.StatusCode, http.StatusCreated)
		}
		env.Clock.Advance(24 * time.Hour)
		m.Renew()
		if _, err := env.App.Payments.SettleOrganization(t.Context(), org, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}

	// The invoice of the detail page: as many lines as its page shows
	// (maxShownLines, 100; the PDF has the rest), paid in part by card
	// (refunded in part), by check and in cash, sent, and its events.
	var lines []map[string]any
	cents := 0
	for i := range 120 {
		cents += (1 + i%4) * ((10+i)*100 + 50)
		l := apitest.Line(fmt.Sprint(1+i%4), fmt.Sprintf("%d.50", 10+i))
		l["description"] = fmt.Sprintf("Walnut side table, oiled finish, 45 × 45 cm (room %d)", i+1)
		l["uom"], l["commodityCode"] = "EA", "94036010"
		lines = append(lines, l)
	}
	b := m.Body("INV-2026-2000", fmt.Sprintf("%d.%02d", cents/100, cents%100), lines...)
	b["customerName"], b["customerCompany"], b["poNumber"] = "Carmen Díaz-Villanueva", "Harbor & Finch Interiors LLC", "PO-77812"
	b["memo"], b["dueDate"], b["send"] = "Deliver to the loading dock behind the building, weekdays 8–4.", env.Clock.Now().AddDate(0, 0, 30).Format(time.DateOnly), true
	full := m.MustCreate(t, b)
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, full), apitest.Payment{Card: apitest.CardApprove, Amount: "500.00", Save: true}), http.StatusSeeOther)
	read, _ := m.Read(t, full.Id)
	r := env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + (*read.Payments)[0].Id.String() + "/refund", Token: env.Token(refunds.KeyID, refunds.Secret),
		Body: map[string]any{"amount": "45.00", "reason": "One table top was cracked"}})
	apitest.Want(t, "refund", r.StatusCode, http.StatusCreated)
	for _, p := range []map[string]any{
		{"amount": "250.00", "method": "check", "reference": "Check 1042"},
		{"amount": "80.00", "method": "cash", "reference": "Counter, receipt 5531"},
	} {
		r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + full.Id.String() + "/payments", Token: m.Token, Body: p})
		apitest.Want(t, "record", r.StatusCode, http.StatusCreated)
	}

	// Open invoices, some overdue: 100 in all, for a list of 100 a page.
	for i := range 20 {
		b := m.Body(fmt.Sprintf("INV-2026-%04d", 3000+i), "1250.00")
		b["customerName"], b["customerCompany"] = customers[i%len(customers)], "Harbor & Finch Interiors LLC"
		b["dueDate"] = env.Clock.Now().AddDate(0, 0, 10*(i%3-1)).Format(time.DateOnly)
		m.MustCreate(t, b)
	}

	// Webhook endpoints, keys and members, as a busy merchant has them.
	var endpoint string
	for i := range 5 {
		desc := fmt.Sprintf("Accounting sync, region %d", i+1)
		e, _, _, err := env.App.Webhooks.Create(t.Context(), webhook.Actor{OrganizationID: org, Permissions: auth.PermissionsFor(auth.KindMerchant)}, webhook.NewEndpoint{
			URL: fmt.Sprintf("https://hooks.harborfinch.example.com/payreq/region-%d/events", i+1), Description: &desc,
			EventTypes: []string{"invoice.created", "invoice.paid", "card_payment.approved", "card_payment.refunded"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		endpoint = e.ID.String()
		if _, err := env.App.Webhooks.Ping(t.Context(), webhook.Actor{OrganizationID: org, Permissions: auth.PermissionsFor(auth.KindMerchant)}, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		env.NewKey(t, org, auth.PermissionsFor(auth.KindMerchant)[:1+i%4]...)
	}
	for i := range 10 {
		portaltest.NewMember(t, env, org, []string{"Admin", "Member"}[i%2], auth.PaymentsView, auth.PaymentsCreate)
	}

	c, _ := portaltest.SignedIn(t, env, org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	var deposits, events []struct{ Id string }
	env.Do(apitest.Request{Method: "GET", Path: "/deposits?limit=1", Token: m.Token}).JSON(t, &deposits)
	env.Do(apitest.Request{Method: "GET", Path: "/events?limit=1&type=invoice.created", Token: m.Token}).JSON(t, &events)
	pages := map[string]string{
		"home":               "/portal/",
		"invoices":           "/portal/invoices",
		"invoices, 100":      "/portal/invoices?limit=100",
		"card payments, 100": "/portal/card-payments?limit=100",
		"events, 100":        "/portal/events?limit=100",
		"deposits, 100":      "/portal/deposits?limit=100",
		"invoice":            "/portal/invoices/" + full.Id.String(),
		"new invoice":        "/portal/invoices/new",
		"record a payment":   "/portal/invoices/" + full.Id.String() + "/payments",
		"card payments":      "/portal/card-payments",
		"card payment":       "/portal/card-payments/" + sale,
		"deposits":           "/portal/deposits",
		"deposit":            "/portal/deposits/" + deposits[0].Id,
		"webhooks":           "/portal/webhooks",
		"webhook endpoint":   "/portal/webhooks/" + endpoint,
		"events":             "/portal/events",
		"event":              "/portal/events/" + events[0].Id,
		"keys":               "/portal/keys",
		"members":            "/portal/members",
		"audit log":          "/portal/audit",
		"reminder settings":  "/portal/reminder-settings",
		"locations and MIDs": "/portal/locations",
		"account":            "/portal/account",
	}
	seed := env.Seed()
	reseller, _ := portaltest.SignedIn(t, env, seed.Reseller.OrganizationID, "Owner", auth.PermissionsFor(auth.KindReseller)...)
	var apps []struct{ Id string }
	env.Do(apitest.Request{Method: "GET", Path: "/applications", Token: env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)}).JSON(t, &apps)
	resellerPages := map[string]string{
		"reseller home": "/portal/",
		"portfolio":     "/portal/portfolio",
		"applications":  "/portal/applications",
		"application":   "/portal/applications/" + apps[0].Id,
	}
	for who, set := range map[*portaltest.Client]map[string]string{c: pages, reseller: resellerPages} {
		for name, path := range set {
			n, parts := weigh(t, who, path)
			t.Logf("%-20s %6d bytes (%s)", name, n, parts)
			if n > maxPageWeight {
				t.Errorf("%s (%s) weighs %d bytes with what it loads, more than 60 KB (%d): %s", name, path, n, maxPageWeight, parts)
			}
		}
	}
}
