package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
)

// recurringBody is a monthly series from startOn for a new customer of
// m's, every key present, with a prefix of its own (a prefix is once per
// organization).
func recurringBody(t *testing.T, m apitest.Merchant, startOn string) map[string]any {
	t.Helper()
	c := newCustomer(t, m, map[string]any{"email": "rec-" + uuid.NewString()[:8] + "@example.com", "name": "Dana Whitfield"})
	return map[string]any{
		"merchantAccountId": m.MIDs[0].Id.String(), "customerId": c.Id.String(), "invoiceNumberPrefix": "RET-" + uuid.NewString()[:8],
		"amount": "108.25",
		"lines":  []map[string]any{{"description": "Retainer", "quantity": 1, "unitCost": "100.00", "taxRate": "8.25", "uom": nil, "commodityCode": nil, "upc": nil}},
		"memo":   "Monthly retainer", "poNumber": nil, "delivery": nil, "reminders": nil,
		"interval": "month", "intervalCount": 1, "startOn": startOn, "endAfter": nil, "endOn": nil, "dueDays": 14, "send": true,
	}
}

func createSeries(t *testing.T, m apitest.Merchant, body map[string]any) models.RecurringInvoice {
	t.Helper()
	resp := m.Env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: body})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
	var sr models.RecurringInvoice
	resp.JSON(t, &sr)
	return sr
}

func wantStatus(t *testing.T, resp *apitest.Response, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, resp.Body)
	}
}

func days(ds []openapi_types.Date) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Format(time.DateOnly)
	}
	return out
}

// TestRecurringInvoiceLifecycle: created once per Idempotency-Key, read,
// listed by its filters, paused, resumed, issued through the invoice's
// own creation on its day, changed for what follows, and ended.
func TestRecurringInvoiceLifecycle(t *testing.T) {
	t.Parallel()
	clock := apitest.NewClock(time.Date(2027, 1, 20, 18, 0, 0, 0, time.UTC))
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: clock})
	m := apitest.NewMerchant(t, env)
	body := recurringBody(t, m, "2027-01-31")
	body["invoiceNumberPrefix"] = "RET"
	key := http.Header{"Idempotency-Key": {"series-1"}}
	first := env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: body, Header: key})
	wantStatus(t, first, http.StatusCreated)
	var sr models.RecurringInvoice
	first.JSON(t, &sr)
	apitest.Want(t, "status", sr.Status, models.RecurringInvoiceStatusActive)
	apitest.Want(t, "upcoming", len(sr.Upcoming), 3)
	apitest.Want(t, "upcoming[1]", days(sr.Upcoming)[1], "2027-02-28")
	apitest.Want(t, "upcoming[2]", days(sr.Upcoming)[2], "2027-03-31")
	apitest.Want(t, "issuedCount", sr.IssuedCount, int32(0))
	apitest.Want(t, "lastInvoiceId set", sr.LastInvoiceId != nil, false)

	again := env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: body, Header: key})
	wantStatus(t, again, http.StatusOK)
	apitest.Want(t, "Idempotent-Replayed", again.Header.Get("Idempotent-Replayed"), "true")
	other := recurringBody(t, m, "2027-02-01")
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: other, Header: key}),
		http.StatusUnprocessableEntity, "Idempotency key reused")

	path := "/recurring-invoices/" + sr.Id.String()
	var list []models.RecurringInvoice
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices?status=active&customerId=" + body["customerId"].(string), Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "listed", len(list), 1)
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices?customerId=" + uuid.NewString(), Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "listed for another customer", len(list), 0)
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices?status=paused", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "listed paused", len(list), 0)

	patch := func(b map[string]any) models.RecurringInvoice {
		t.Helper()
		resp := env.Do(apitest.Request{Method: "PATCH", Path: path, Token: m.Token, Body: b})
		wantStatus(t, resp, http.StatusOK)
		var got models.RecurringInvoice
		resp.JSON(t, &got)
		return got
	}
	apitest.Want(t, "paused", patch(map[string]any{"status": "paused"}).Status, models.RecurringInvoiceStatusPaused)
	apitest.Want(t, "resumed", patch(map[string]any{"status": "active"}).Status, models.RecurringInvoiceStatusActive)

	// Due from 00:00 in Los Angeles, the MID's location's zone.
	clock.Advance(time.Date(2027, 1, 31, 8, 0, 30, 0, time.UTC).Sub(clock.Now()))
	if done, errs := env.App.Recurring.IssueDue(context.Background()); len(errs) > 0 || done.Issued != 1 {
		t.Fatalf("issued %+v, %v", done, errs)
	}
	m.Renew() // the clock moved past the token's life
	var got models.RecurringInvoice
	env.Do(apitest.Request{Method: "GET", Path: path, Token: m.Token}).JSON(t, &got)
	apitest.Want(t, "issuedCount", got.IssuedCount, int32(1))
	apitest.Want(t, "nextIssueOn", got.NextIssueOn.Format(time.DateOnly), "2027-02-28")
	if got.LastInvoiceId == nil {
		t.Fatal("no lastInvoiceId")
	}
	inv, raw := m.Read(t, *got.LastInvoiceId)
	apitest.Want(t, "invoiceNumber", inv.InvoiceNumber, "RET-0001")
	apitest.Want(t, "dueDate", inv.DueDate.Format(time.DateOnly), "2027-02-14")
	apitest.Want(t, "amount", inv.Amount.Text('f'), "108.25")
	apitest.Want(t, "status", inv.Status, models.InvoiceStatusOpen)
	apitest.Want(t, "customerId", inv.CustomerId.String(), body["customerId"].(string))
	apitest.WantText(t, "customerName", inv.CustomerName, "Dana Whitfield")
	if inv.SentAt == nil {
		t.Fatalf("not sent: %s", raw)
	}

	// Lines without an amount make the amount their total; what is issued
	// already does not change.
	changed := patch(map[string]any{"lines": []map[string]any{{"description": "Retainer", "quantity": 2, "unitCost": "100.00", "uom": nil, "commodityCode": nil, "upc": nil}}, "memo": nil})
	apitest.Want(t, "amount from lines", changed.Amount.Text('f'), "200.00")
	apitest.Want(t, "memo cleared", changed.Memo == nil, true)
	apitest.Want(t, "dueDays kept", changed.DueDays, int32(14))
	inv, _ = m.Read(t, *got.LastInvoiceId)
	apitest.Want(t, "issued amount", inv.Amount.Text('f'), "108.25")

	bad := env.Do(apitest.Request{Method: "PATCH", Path: path, Token: m.Token, Body: map[string]any{"amount": "150.00"}})
	if p := apitest.WantProblem(t, bad, http.StatusBadRequest, "Invalid request"); p.Errors == nil || len((*p.Errors)["lines"]) == 0 {
		t.Fatalf("amount that the lines do not add up to: %+v", p)
	}

	ended := env.Do(apitest.Request{Method: "DELETE", Path: path, Token: m.Token})
	wantStatus(t, ended, http.StatusOK)
	var end models.RecurringInvoice
	ended.JSON(t, &end)
	apitest.Want(t, "ended", end.Status, models.RecurringInvoiceStatusEnded)
	apitest.Want(t, "nextIssueOn once ended", end.NextIssueOn == nil, true)
	apitest.Want(t, "upcoming once ended", len(end.Upcoming), 0)
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "PATCH", Path: path, Token: m.Token, Body: map[string]any{"status": "active"}}),
		http.StatusUnprocessableEntity, "Recurring invoice ended")

	var events []struct{ Type string }
	env.Do(apitest.Request{Method: "GET", Path: "/events?limit=100", Token: m.Token}).JSON(t, &events)
	seen := map[string]int{}
	for _, e := range events {
		seen[e.Type]++
	}
	for typ, n := range map[string]int{"recurring_invoice.created": 1, "recurring_invoice.updated": 3, "recurring_invoice.issued": 1, "recurring_invoice.ended": 1} {
		if seen[typ] != n {
			t.Errorf("%d %s events, want %d (all: %v)", seen[typ], typ, n, seen)
		}
	}
}

// TestRecurringInvoiceRefusals: each a problem keyed by the field as sent,
// and nothing written.
func TestRecurringInvoiceRefusals(t *testing.T) {
	t.Parallel()
	clock := apitest.NewClock(time.Date(2027, 1, 20, 18, 0, 0, 0, time.UTC))
	env := apitest.New(t, testDSN, apitest.Options{Clock: clock})
	m := apitest.NewMerchant(t, env)
	cases := []struct {
		name   string
		edit   func(map[string]any)
		status int
		field  string
	}{
		// 2027-01-19 is yesterday in Los Angeles.
		{"startOn in the past", func(b map[string]any) { b["startOn"] = "2027-01-19" }, http.StatusBadRequest, "startOn"},
		{"both endAfter and endOn", func(b map[string]any) { b["endAfter"], b["endOn"] = 3, "2027-06-30" }, http.StatusBadRequest, "endOn"},
		{"intervalCount 0", func(b map[string]any) { b["intervalCount"] = 0 }, http.StatusBadRequest, "intervalCount"},
		{"intervalCount 13", func(b map[string]any) { b["intervalCount"] = 13 }, http.StatusBadRequest, "intervalCount"},
		{"an unknown interval", func(b map[string]any) { b["interval"] = "fortnight" }, http.StatusBadRequest, "interval"},
		{"lines that do not add up", func(b map[string]any) { b["amount"] = "100.00" }, http.StatusBadRequest, "lines"},
		{"a tax rate above 100", func(b map[string]any) {
			b["lines"].([]map[string]any)[0]["taxRate"] = "100.5"
		}, http.StatusBadRequest, "lines[0].taxRate"},
		{"dueDays 366", func(b map[string]any) { b["dueDays"] = 366 }, http.StatusBadRequest, "dueDays"},
		{"a prefix of 41 characters", func(b map[string]any) { b["invoiceNumberPrefix"] = "ABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJA" }, http.StatusBadRequest, "invoiceNumberPrefix"},
		{"a key left out", func(b map[string]any) { delete(b, "endOn") }, http.StatusBadRequest, "endOn"},
	}
	unknown := recurringBody(t, m, "2027-01-20")
	unknown["customerId"] = uuid.NewString()
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: unknown}),
		http.StatusUnprocessableEntity, "Unknown customer")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := recurringBody(t, m, "2027-01-20")
			c.edit(b)
			resp := env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: b})
			p := apitest.WantProblem(t, resp, c.status, "Invalid request")
			if p.Errors == nil || len((*p.Errors)[c.field]) == 0 {
				t.Fatalf("errors %v, want one keyed %s", p.Errors, c.field)
			}
		})
	}
	var list []models.RecurringInvoice
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "series written", len(list), 0)
	// Today in Los Angeles is accepted; its prefix, once.
	first := recurringBody(t, m, "2027-01-20")
	createSeries(t, m, first)
	again := recurringBody(t, m, "2027-02-01")
	again["invoiceNumberPrefix"] = first["invoiceNumberPrefix"]
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: again}),
		http.StatusUnprocessableEntity, "Invoice number prefix already used")
}

// TestRecurringAutoPayConsent: the pay page of a series' invoice offers the
// consent to future charges (and a one-off invoice's does not); a card
// saved with it pays the series automatically; autoPay with a card saved
// without it, of another customer or of another organization → 422 keyed
// autoPay.savedCardId, nothing written.
func TestRecurringAutoPayConsent(t *testing.T) {
	t.Parallel()
	clock := apitest.NewClock(time.Date(2027, 1, 20, 18, 0, 0, 0, time.UTC))
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: clock})
	m := apitest.NewMerchant(t, env)
	body := recurringBody(t, m, "2027-01-20")
	sr := createSeries(t, m, body)
	if _, errs := env.App.Recurring.IssueDue(context.Background()); len(errs) > 0 {
		t.Fatal(errs)
	}
	var issued models.RecurringInvoice
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices/" + sr.Id.String(), Token: m.Token}).JSON(t, &issued)
	inv, _ := m.Read(t, *issued.LastInvoiceId)
	path := apitest.PayPath(t, inv)
	const words = "charge this card for future invoices"
	if page := env.Visit(t, "GET", path, nil, nil); !strings.Contains(page.Body, words) {
		t.Fatalf("the series' invoice's pay page offers no consent: %s", page.Body)
	}
	// Consent without saving is refused beside its box; nothing charged.
	page := env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00", Consent: true})
	apitest.WantStatus(t, page, http.StatusBadRequest)
	if !strings.Contains(page.Body, `id="chargeConsent-error"`) {
		t.Fatalf("no error beside the consent: %s", page.Body)
	}
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00", Save: true, Consent: true}), http.StatusSeeOther)

	// A one-off invoice of the same customer: no offer; its card saved
	// without consent.
	oneOff := m.Body("ONE-OFF-1", "30.00")
	oneOff["customerId"], oneOff["customerEmail"] = body["customerId"], nil
	other := m.MustCreate(t, oneOff)
	if page := env.Visit(t, "GET", apitest.PayPath(t, other), nil, nil); strings.Contains(page.Body, words) {
		t.Fatal("a one-off invoice's pay page offers the consent")
	}
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, other), apitest.Payment{Card: apitest.CardApprove, Amount: "1.00", Save: true}), http.StatusSeeOther)

	var c models.Customer
	env.Do(apitest.Request{Method: "GET", Path: "/customers/" + sr.CustomerId.String(), Token: m.Token}).JSON(t, &c)
	var consented, unconsented string
	for _, card := range c.SavedCards {
		if card.ChargeConsentAt != nil {
			consented = card.Id.String()
		} else {
			unconsented = card.Id.String()
		}
	}
	if consented == "" || unconsented == "" {
		t.Fatalf("saved cards %+v: want one with consent and one without", c.SavedCards)
	}
	// Another customer's card, and another organization's.
	otherCustomer := newCustomer(t, m, map[string]any{"email": "else-" + uuid.NewString()[:8] + "@example.com"})
	ofOther := recurringBody(t, m, "2027-01-20")
	ofOther["customerId"] = otherCustomer.Id.String()
	otherSeries := createSeries(t, m, ofOther)
	elsewhere := apitest.NewMerchant(t, env)
	foreign := elsewhere.MustCreate(t, elsewhere.Body("THEIRS-1", "30.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, foreign), apitest.Payment{Card: apitest.CardApprove, Amount: "1.00", Save: true}), http.StatusSeeOther)
	foreignRead, _ := elsewhere.Read(t, foreign.Id)
	foreignCard := (*foreignRead.SavedCards)[0].Id.String()

	refusals := []struct {
		name, card, customer, title string
	}{
		{"without consent", unconsented, "", "No consent to future charges"},
		{"of another customer", consented, otherCustomer.Id.String(), "Saved card of another customer"},
		{"of another organization", foreignCard, "", "Unknown saved card"},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			b := recurringBody(t, m, "2027-01-21")
			b["autoPay"] = map[string]any{"savedCardId": r.card}
			if r.customer != "" {
				b["customerId"] = r.customer
			} else {
				b["customerId"] = body["customerId"]
			}
			p := apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/recurring-invoices", Token: m.Token, Body: b}),
				http.StatusUnprocessableEntity, r.title)
			// A 422 names its field as the others do: by its hint.
			if !strings.Contains(p.Detail, "GET /customers/{id}") {
				t.Errorf("detail %q does not say where the saved cards are listed", p.Detail)
			}
			series := sr.Id
			if r.customer != "" {
				series = otherSeries.Id
			}
			apitest.WantProblem(t, env.Do(apitest.Request{Method: "PATCH", Path: "/recurring-invoices/" + series.String(), Token: m.Token,
				Body: map[string]any{"autoPay": map[string]any{"savedCardId": r.card}}}), http.StatusUnprocessableEntity, r.title)
		})
	}
	var list []models.RecurringInvoice
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices?limit=100", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "series written", len(list), 2)
	for _, s := range list {
		apitest.Want(t, "autoPay of "+s.Id.String(), s.AutoPay == nil, true)
	}

	resp := env.Do(apitest.Request{Method: "PATCH", Path: "/recurring-invoices/" + sr.Id.String(), Token: m.Token,
		Body: map[string]any{"autoPay": map[string]any{"savedCardId": consented}}})
	wantStatus(t, resp, http.StatusOK)
	var changed models.RecurringInvoice
	resp.JSON(t, &changed)
	apitest.Want(t, "autoPay", changed.AutoPay != nil && changed.AutoPay.SavedCardId.String() == consented, true)
	resp = env.Do(apitest.Request{Method: "PATCH", Path: "/recurring-invoices/" + sr.Id.String(), Token: m.Token,
		Body: map[string]any{"autoPay": nil}})
	wantStatus(t, resp, http.StatusOK)
	resp.JSON(t, &changed)
	apitest.Want(t, "autoPay turned off", changed.AutoPay == nil, true)
}
