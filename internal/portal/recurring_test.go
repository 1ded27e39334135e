package portal_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

var (
	seriesPath = regexp.MustCompile(`^/portal/recurring/([0-9a-f-]{36})\?done=created$`)
	startOnIn  = regexp.MustCompile(`name="startOn" value="([0-9-]{10})"`)
)

// recurringForm is a complete new series' form of m for customer, as the
// page's key and first day have it.
func recurringForm(t *testing.T, m apitest.Merchant, p portaltest.Page, customer, prefix string) map[string]string {
	t.Helper()
	start := startOnIn.FindStringSubmatch(p.Body)
	if start == nil {
		t.Fatalf("no first day in the form:\n%s", p.Body)
	}
	return map[string]string{"idempotencyKey": formKey(t, p), "merchantAccountId": m.MIDs[0].Id.String(), "customerId": customer,
		"invoiceNumberPrefix": prefix, "lines[0].description": "Retainer", "lines[0].quantity": "1", "lines[0].unitCost": "100.00",
		"lines[0].taxRate": "", "amount": "", "memo": "Monthly retainer", "poNumber": "", "interval": "month", "intervalCount": "1",
		"startOn": start[1], "end": "after", "endAfter": "12", "endOn": "", "dueDays": "14", "send": "yes", "reminders": "",
		"savedCardId": "", "action": "create"}
}

func values(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

// Recurring invoices in the portal: the list empty offers "New recurring
// invoice"; bad values come back beside their fields, nothing made; the
// form sent twice makes one series, which the list and its page show,
// with the invoice it issued; edit;
// pause, resume and end (confirmed first), each sent twice safely; a
// viewer sees no actions; another organization's series is not found.
func TestRecurringPortal(t *testing.T) {
	t.Parallel()
	env, _ := newOwnEnv(t) // it issues every series due

	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	c.Get("/portal/recurring").Want(t, http.StatusOK).Has(t, "No recurring invoices yet", `href="/portal/recurring/new"`)
	dana := newCustomer(t, m, map[string]any{"email": "dana-" + uuid.NewString()[:8] + "@example.com", "name": "Dana Whitfield"})

	p := c.Get("/portal/recurring/new").Want(t, http.StatusOK).Has(t, "New recurring invoice", "Dana Whitfield", "Automatic payment")
	good := recurringForm(t, m, p, dana.Id.String(), "RET")
	bad := recurringForm(t, m, p, dana.Id.String(), "")
	bad["intervalCount"], bad["endAfter"], bad["lines[0].quantity"] = "13", "x", "lots"
	c.Post("/portal/recurring", p.CSRF(t), form(values(bad)...)).Want(t, http.StatusBadRequest).
		ErrorBeside(t, "endAfter", "Enter how many invoices").ErrorBeside(t, "lines[0].quantity", "Enter a number")
	bad = recurringForm(t, m, p, dana.Id.String(), "")
	bad["intervalCount"] = "13"
	c.Post("/portal/recurring", p.CSRF(t), form(values(bad)...)).Want(t, http.StatusBadRequest).
		ErrorBeside(t, "intervalCount", "must be 1 to 12").ErrorBeside(t, "invoiceNumberPrefix", "must be 1 to 40").Has(t, `>Monthly retainer</textarea>`)
	var list []models.RecurringInvoice
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "series after refusals", len(list), 0)

	made := c.Post("/portal/recurring", p.CSRF(t), form(values(good)...)).Want(t, http.StatusSeeOther)
	loc := made.Header.Get("Location")
	id := seriesPath.FindStringSubmatch(loc)
	if id == nil {
		t.Fatalf("made: %q", loc)
	}
	again := c.Post("/portal/recurring", p.CSRF(t), form(values(good)...)).Want(t, http.StatusSeeOther)
	apitest.Want(t, "sent twice", again.Header.Get("Location"), loc)
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "series made", len(list), 1)
	apitest.Want(t, "amount", list[0].Amount.Decimal.Text('f'), "100.00")

	page := "/portal/recurring/" + id[1]
	c.Get(loc).Want(t, http.StatusOK).Has(t, "The recurring invoice was made.", "Every month", "After 12 invoices", "$100.00",
		"Dana Whitfield", "Retainer", "None yet", "Pause", page+"/end", "End the recurring invoice")
	c.Get("/portal/recurring").Want(t, http.StatusOK).Has(t, "Every month", "Dana Whitfield", "status-open", "Active")
	if csv := c.Get("/portal/recurring?format=csv").Want(t, http.StatusOK); !strings.HasPrefix(csv.Body, "id,status,customerId,invoiceNumberPrefix,amount,") ||
		!strings.Contains(csv.Body, ",active,"+dana.Id.String()+",RET,100.00,month,1,") {
		t.Errorf("csv:\n%s", csv.Body)
	}
	c.Get("/portal/recurring?status=paused").Want(t, http.StatusOK).Has(t, "No recurring invoices match")
	c.Get("/portal/recurring?status=nope").Want(t, http.StatusBadRequest).ErrorBeside(t, "status", "Choose one of the values offered")

	if _, errs := env.App.Recurring.IssueDue(t.Context()); len(errs) > 0 {
		t.Fatal(errs)
	}
	sp := c.Get(page).Want(t, http.StatusOK).Has(t, "RET-0001", "<dt>Issued</dt><dd>1</dd>", "status-open")

	// A card saved without consent is not offered, nor chosen; one saved
	// with it is, and pays the series.
	var sr models.RecurringInvoice
	env.Do(apitest.Request{Method: "GET", Path: "/recurring-invoices/" + id[1], Token: m.Token}).JSON(t, &sr)
	issued, _ := m.Read(t, *sr.LastInvoiceId)
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, issued), apitest.Payment{Card: apitest.CardApprove, Amount: "1.00", Save: true}), http.StatusSeeOther)
	unconsented := (*mustRead(t, m, issued.Id).SavedCards)[0].Id.String()
	c.Get(page+"/edit").Want(t, http.StatusOK).Has(t, "no card saved with their consent", "1 saved without it")
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, issued), apitest.Payment{Card: apitest.CardApprove, Amount: "1.00", Save: true, Consent: true}), http.StatusSeeOther)
	var consented string
	for _, card := range *mustRead(t, m, issued.Id).SavedCards {
		if card.Id.String() != unconsented {
			consented = card.Id.String()
		}
	}
	ep := c.Get(page+"/edit").Want(t, http.StatusOK).Has(t, `value="`+consented+`"`)
	if strings.Contains(ep.Body, `value="`+unconsented+`"`) {
		t.Error("a card without consent is offered")
	}
	autoPay := map[string]string{"lines[0].description": "Retainer", "lines[0].quantity": "1", "lines[0].unitCost": "100.00", "lines[0].taxRate": "",
		"amount": "", "memo": "Monthly retainer", "poNumber": "", "dueDays": "14", "end": "after", "endAfter": "12", "endOn": "",
		"savedCardId": unconsented, "action": "save"}
	c.Post(page+"/edit", ep.CSRF(t), form(values(autoPay)...)).Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "savedCardId", "did not consent")
	autoPay["savedCardId"] = consented
	c.Post(page+"/edit", ep.CSRF(t), form(values(autoPay)...)).WantRedirect(t, page+"?done=changed")
	c.Get(page).Want(t, http.StatusOK).Has(t, "Charged to", "ending in")
	for range 2 {
		c.Post(page+"/status", sp.CSRF(t), form("status", "paused")).WantRedirect(t, page+"?done=paused")
	}
	c.Get(page).Want(t, http.StatusOK).Has(t, "Paused", "Resume")
	c.Post(page+"/status", sp.CSRF(t), form("status", "active")).WantRedirect(t, page+"?done=active")
	c.Post(page+"/status", sp.CSRF(t), form("status", "ended")).Want(t, http.StatusBadRequest)

	viewer, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView)
	if v := viewer.Get(page).Want(t, http.StatusOK); strings.Contains(v.Body, "/status") || strings.Contains(v.Body, page+"/end") {
		t.Error("a viewer is offered the actions")
	}
	viewer.Post(page+"/end", sp.CSRF(t), form()).Want(t, http.StatusForbidden)
	viewer.Get("/portal/recurring/new").Want(t, http.StatusForbidden)

	other, oc := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	_ = other
	oc.Get(page).Want(t, http.StatusNotFound)
	op := oc.Get("/portal/recurring").Want(t, http.StatusOK)
	oc.Post(page+"/end", op.CSRF(t), form()).Want(t, http.StatusNotFound)
	oc.Post(page+"/status", op.CSRF(t), form("status", "paused")).Want(t, http.StatusNotFound)
	c.Get("/portal/recurring/not-an-id").Want(t, http.StatusNotFound)

	// Edit: refusals beside their fields, nothing changed; then the
	// change, sent twice.
	ep = c.Get(page+"/edit").Want(t, http.StatusOK).Has(t, `value="Retainer"`, `id="end-after" name="end" value="after" checked`, `value="12"`)
	edit := map[string]string{"lines[0].description": "Retainer", "lines[0].quantity": "2", "lines[0].unitCost": "100.00", "lines[0].taxRate": "",
		"amount": "", "memo": "Two retainers", "poNumber": "PO-9", "dueDays": "400", "end": "never", "endAfter": "", "endOn": "",
		"savedCardId": uuid.NewString(), "action": "save"}
	c.Post(page+"/edit", ep.CSRF(t), form(values(edit)...)).Want(t, http.StatusBadRequest).ErrorBeside(t, "dueDays", "must be 0 to 365")
	edit["dueDays"] = "7"
	c.Post(page+"/edit", ep.CSRF(t), form(values(edit)...)).Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "savedCardId", "not a saved card of your organization")
	c.Get(page).Want(t, http.StatusOK).Has(t, "$100.00", "After 12 invoices")
	edit["savedCardId"] = ""
	for range 2 {
		c.Post(page+"/edit", ep.CSRF(t), form(values(edit)...)).WantRedirect(t, page+"?done=changed")
	}
	c.Get(page+"?done=changed").Want(t, http.StatusOK).Has(t, "The changes apply", "$200.00", "Two retainers", "PO-9", "7 days after", "<dd>Never</dd>")
	oc.Post(page+"/edit", op.CSRF(t), form(values(edit)...)).Want(t, http.StatusNotFound)
	viewer.Get(page+"/edit").Want(t, http.StatusForbidden)

	c.Get(page+"/end").Want(t, http.StatusOK).Has(t, "End recurring invoice RET?", "cannot be undone")
	for range 2 {
		c.Post(page+"/end", sp.CSRF(t), form()).WantRedirect(t, page+"?done=ended")
	}
	if e := c.Get(page).Want(t, http.StatusOK).Has(t, "Ended", "None: it issues no more invoices"); strings.Contains(e.Body, "/status") {
		t.Error("an ended series is offered Pause or Resume")
	}
}

// "Make recurring" on an invoice's page opens the new form filled with
// its customer, MID, lines, memo, PO number and its number's prefix.
func TestMakeRecurringFromInvoice(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	body := m.Body("ACME-0042", "0")
	body["amount"], body["memo"], body["poNumber"] = "21.65", "Coffee beans", "PO-77"
	body["lines"] = []map[string]any{{"description": "Beans", "quantity": 2, "unitCost": "10.00", "taxRate": "8.25", "uom": nil, "commodityCode": nil, "upc": nil}}
	inv := m.MustCreate(t, body)
	c.Get("/portal/invoices/"+inv.Id.String()).Want(t, http.StatusOK).Has(t, "/portal/invoices/"+inv.Id.String()+"/recurring", "Make recurring")
	c.Get("/portal/invoices/"+inv.Id.String()+"/recurring").Want(t, http.StatusOK).
		Has(t, `name="invoiceNumberPrefix" value="ACME"`, `value="Beans"`, `value="10"`, "Coffee beans", `value="PO-77"`,
			`<option value="`+inv.CustomerId.String()+`" selected>`, `value="8.25" selected`)
	_, oc := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	oc.Get("/portal/invoices/"+inv.Id.String()+"/recurring").Want(t, http.StatusNotFound)
}

func mustRead(t *testing.T, m apitest.Merchant, id uuid.UUID) models.Invoice {
	t.Helper()
	inv, _ := m.Read(t, id)
	return inv
}
