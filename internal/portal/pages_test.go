package portal_test

import (
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

// Home sums the day: open invoices and their balances, the overdue ones
// (past their due date in their location's zone), the money received this
// week by card and otherwise, and the deposits on their way.
func TestHomeSumsTheDay(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView)
	la, _ := time.LoadLocation("America/Los_Angeles")
	yesterday := env.Clock.Now().In(la).AddDate(0, 0, -1).Format(time.DateOnly)
	b := m.Body("HOME-A", "100.00")
	b["dueDate"] = yesterday
	m.MustCreate(t, b)
	partPaid := m.MustCreate(t, m.Body("HOME-B", "50.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, partPaid), apitest.Payment{Card: apitest.CardApprove, Amount: "20.00"}), http.StatusSeeOther)
	record := func(inv uuid.UUID, amount string, at time.Time) {
		t.Helper()
		r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.String() + "/payments", Token: m.Token,
			Body: map[string]any{"amount": amount, "method": "cash", "receivedAt": at.UTC().Format(time.RFC3339)}})
		apitest.Want(t, "record "+amount, r.StatusCode, http.StatusCreated)
	}
	record(partPaid.Id, "5.00", env.Clock.Now().AddDate(0, 0, -10)) // not this week
	paid := m.MustCreate(t, m.Body("HOME-C", "10.00"))
	record(paid.Id, "10.00", env.Clock.Now())
	cancelled := m.MustCreate(t, m.Body("HOME-D", "5.00"))
	apitest.Want(t, "cancel", env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + cancelled.Id.String() + "/cancel", Token: m.Token}).StatusCode, http.StatusOK)
	deposits, err := env.App.Payments.SettleOrganization(t.Context(), uuid.MustParse(m.Org), slog.New(slog.DiscardHandler))
	if err != nil || len(deposits) != 1 {
		t.Fatalf("settle: %v, %v", deposits, err)
	}
	net := deposits[0].NetAmount

	home := c.Get("/portal/").Want(t, http.StatusOK)
	home.Has(t, "$125.00</span> owed on", "2 open invoices", "$100.00</span> overdue on 1 invoice<",
		"$30.00</span> paid this week in 2 payments", "$"+net.Text('f')+"</span> in 1 deposit on the way")

	other, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.LocationsView)
	if p := other.Get("/portal/").Want(t, http.StatusOK); strings.Contains(p.Body, "owed on") || strings.Contains(p.Body, `href="/portal/invoices"`) {
		t.Errorf("a member without payments.view sees the figures or the invoices:\n%s", p.Body)
	}
}

// Reminder settings: read by payments.view, changed by payments.create
// through the domain's rules (the API then reads what was saved); what is
// refused comes back beside the field, nothing saved.
func TestReminderSettingsPage(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	p := c.Get("/portal/reminder-settings").Want(t, http.StatusOK).Has(t, `value="-3, 0, 3, 7, 14"`, "09:00")
	for _, bad := range []struct{ offsets, message string }{
		{"-3, soon", "“soon” is not one"},
		{"100", "from -30 to 90"},
		{"1, 1", "each offset once"},
		{"1 2 3 4 5 6 7 8 9", "at most 8"},
	} {
		c.Post("/portal/reminder-settings", p.CSRF(t), form("enabled", "on", "offsetsDays", bad.offsets)).
			Want(t, http.StatusBadRequest).ErrorBeside(t, "offsetsDays", bad.message).Has(t, `value="`+strings.ReplaceAll(bad.offsets, `"`, "&#34;")+`"`)
	}
	c.Post("/portal/reminder-settings", p.CSRF(t), form("enabled", "on", "offsetsDays", "7, −3,0")).WantRedirect(t, "/portal/reminder-settings?done=saved")
	var got struct {
		Enabled     bool
		OffsetsDays []int
	}
	env.Do(apitest.Request{Method: "GET", Path: "/reminder-settings", Token: m.Token}).JSON(t, &got)
	if !got.Enabled || len(got.OffsetsDays) != 3 || got.OffsetsDays[0] != -3 || got.OffsetsDays[2] != 7 {
		t.Errorf("the API reads %+v", got)
	}
	c.Get("/portal/reminder-settings?done=saved").Has(t, "were saved", `value="-3, 0, 7"`, `id="enabled" name="enabled" value="on" checked`)
	if a := auditOf(t, env, uuid.MustParse(m.Org), "reminder settings changed"); len(a) != 1 || a[0] != "on, days -3, 0, 7" {
		t.Errorf("audit: %q", a)
	}

	viewer, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView)
	v := viewer.Get("/portal/reminder-settings").Want(t, http.StatusOK).Has(t, "-3, 0, 7", "payments.create")
	if strings.Contains(v.Body, `action="/portal/reminder-settings"`) {
		t.Error("a member without payments.create is shown the form")
	}
	viewer.Post("/portal/reminder-settings", v.CSRF(t), form("offsetsDays", "1")).Want(t, http.StatusForbidden)
}

// Locations and MIDs, read-only: locations.view shows the locations,
// accounts.view their MIDs, as the API's keys read them.
func TestLocationsPage(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	both, _ := portaltest.SignedIn(t, env, org, "Member", auth.LocationsView, auth.AccountsView)
	p := both.Get("/portal/locations").Want(t, http.StatusOK).Has(t, m.Locs[0].Name, m.Locs[1].Name, "America/Los_Angeles",
		m.MIDs[0].Mid, m.MIDs[2].Mid, m.Locs[0].AddressLine1)
	if strings.Contains(p.Body, "<form method=\"post\" action=\"/portal/locations") {
		t.Error("the page changes something")
	}
	places, _ := portaltest.SignedIn(t, env, org, "Member", auth.LocationsView)
	if p := places.Get("/portal/locations").Want(t, http.StatusOK).Has(t, m.Locs[0].Name); strings.Contains(p.Body, m.MIDs[0].Mid) {
		t.Error("MIDs shown without accounts.view")
	}
	mids, _ := portaltest.SignedIn(t, env, org, "Member", auth.AccountsView)
	if p := mids.Get("/portal/locations").Want(t, http.StatusOK).Has(t, m.MIDs[0].Mid, "locations.view"); strings.Contains(p.Body, m.Locs[0].AddressLine1) {
		t.Error("locations shown without locations.view")
	}
	none, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	none.Get("/portal/locations").Want(t, http.StatusForbidden).Has(t, "locations.view or accounts.view")
}

// Home puts "New invoice" first and says the latest events in words,
// with their time in the organization's zone; it repeats no menu and
// names no permission. The navigation is in three groups: the business's
// pages, Settings, Developers, each with what the member may open. The
// members', keys' and audit log's times are in the organization's zone
// too, not UTC.
func TestHomeAndNavigation(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	b := m.Body("HOME-1", "30.00")
	b["customerName"] = "Dana Whitfield"
	m.MustCreate(t, b)
	owner, _ := portaltest.SignedIn(t, env, org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	home := owner.Get("/portal/").Want(t, http.StatusOK)
	main := between(home.Body, `<main id="main">`, `</main>`)
	if !strings.HasPrefix(strings.TrimSpace(between(main, "</h1>", "</ul>")), `<p><a class="button" href="/portal/invoices/new">New invoice</a></p>`) {
		t.Errorf("home does not start with New invoice:\n%s", main)
	}
	if !regexp.MustCompile(`<li><a href="/portal/events/[0-9a-f-]{36}">Invoice created · HOME-1 · \$30\.00 · [^<]*Dana Whitfield</a> <span class="note"><time datetime="[^"]+">[^<]+ P[SD]T</time></span></li>`).MatchString(main) {
		t.Errorf("home's recent activity does not say the invoice made in words:\n%s", main)
	}
	for _, s := range []string{"payments.view", "<code>", `href="/portal/deposits"`, `href="/portal/keys"`} {
		if strings.Contains(main, s) {
			t.Errorf("home's content holds %q (a permission or the menu again)", s)
		}
	}
	nav := between(home.Body, `<nav aria-label="Portal">`, `</nav>`)
	order := []string{`href="/portal/"`, `href="/portal/invoices"`, `href="/portal/customers"`, `href="/portal/card-payments">Payments<`,
		`href="/portal/deposits"`, `>Settings</p>`, `href="/portal/settings/business"`, `href="/portal/settings/tax-rates"`,
		`href="/portal/reminder-settings"`, `href="/portal/terminals"`, `href="/portal/members"`,
		`href="/portal/audit"`, `>Developers</p>`, `href="/portal/keys"`, `href="/portal/webhooks"`, `href="/portal/events"`}
	at := 0
	for _, s := range order {
		i := strings.Index(nav[at:], s)
		if i < 0 {
			t.Fatalf("the navigation lacks %s after what comes before it:\n%s", s, nav)
		}
		at += i
	}
	if !strings.Contains(home.Body, `<details class="menu"><summary>Menu</summary>`) {
		t.Error("the navigation is not behind its Menu button")
	}
	for _, path := range []string{"/portal/members", "/portal/keys", "/portal/audit"} {
		if page := owner.Get(path).Want(t, http.StatusOK); strings.Contains(page.Body, " UTC</time>") || !strings.Contains(page.Body, "PST</time>") && !strings.Contains(page.Body, "PDT</time>") {
			t.Errorf("%s does not show its times in the organization's zone", path)
		}
	}

	viewer, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	page := viewer.Get("/portal/").Want(t, http.StatusOK)
	nav = between(page.Body, `<nav aria-label="Portal">`, `</nav>`)
	if strings.Contains(nav, "Developers") || strings.Contains(page.Body, "New invoice") || strings.Contains(page.Body, "Recent activity") {
		t.Errorf("a Member with payments.view only is offered what they may not open:\n%s", page.Body)
	}
}
