package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

var keyIn = regexp.MustCompile(`name="idempotencyKey" value="([^"]+)"`)

// formKey is the idempotency key of the page's form.
func formKey(t *testing.T, p portaltest.Page) string {
	t.Helper()
	m := keyIn.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no idempotency key in the form:\n%s", p.Body)
	}
	return m[1]
}

var invoicePath = regexp.MustCompile(`^/portal/invoices/([0-9a-f-]{36})\?done=created$`)

// A form that makes an invoice: refused values come back beside their
// fields (the domain's rules, lines that do not add up among them) with
// every value kept and nothing made; a valid one makes the invoice as the
// API would (lines, the member's name as its maker, sent now), writes the
// audit log, and sent twice makes it once.
func TestCreateInvoiceInThePortal(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	newForm := c.Get("/portal/invoices/new").Want(t, http.StatusOK).Has(t, m.MIDs[0].Mid, "Line 1", scriptTag)
	if strings.Contains(newForm.Body, "Line 2") {
		t.Error("more than one row of lines before any was added")
	}
	// The page's script is a file of the portal's, allowed by its address alone.
	src := regexp.MustCompile(`<script src="([^"]+)"`).FindStringSubmatch(newForm.Body)[1]
	if csp := newForm.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none';") || !strings.HasSuffix(csp, "; script-src "+env.URL+src) {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	js := c.Get(src).Want(t, http.StatusOK).Has(t, "data-add-line", "data-total")
	if ct := js.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("the script is served as %q", ct)
	}
	if csp := c.Get("/portal/invoices").Header.Get("Content-Security-Policy"); strings.Contains(csp, "script-src") {
		t.Errorf("a page without a script allows scripts: %q", csp)
	}
	valid := form("merchantAccountId", m.MIDs[1].Id.String(), "invoiceNumber", "PORTAL-1", "customerName", "Ada Park",
		"customerEmail", "ada@example.com", "amount", "$1,230.00", "dueDate", "2031-03-01", "memo", "Thanks!",
		"lines[0].description", "Tiles", "lines[0].quantity", "100", "lines[0].unitCost", "12.50",
		"lines[1].description", "", "lines[1].quantity", "", "lines[1].unitCost", "",
		"lines[2].description", "Discount", "lines[2].quantity", "1", "lines[2].unitCost", "-20",
		"delivery", "email", "send", "now", "reminders", "on")
	with := func(pairs ...string) url.Values {
		return overlay(valid, append(pairs, "idempotencyKey", formKey(t, newForm))...)
	}
	for _, bad := range []struct {
		name           string
		values         url.Values
		status         int
		field, message string
	}{
		{"an amount typed beside lines", with("amount", "1230.01"), http.StatusBadRequest, "amount", "The lines make the total, $1,230.00"},
		{"a quantity of no number", with("lines[2].quantity", "one"), http.StatusBadRequest, "lines[2].quantity", "Enter a number"},
		// The blank row is left out, so the domain's lines[1] is the form's row 2.
		{"a quantity of 0", with("lines[2].quantity", "0"), http.StatusBadRequest, "lines[2].quantity", "greater than 0"},
		{"an amount of no number", with(append(noLines, "amount", "lots")...), http.StatusBadRequest, "amount", "dollars and cents"},
		{"three decimals", with(append(noLines, "amount", "1230.001")...), http.StatusBadRequest, "amount", "2 decimal places"},
		{"no amount and no lines", with(append(noLines, "amount", "")...), http.StatusBadRequest, "amount", "or add a line"},
		{"no email", with("customerEmail", ""), http.StatusBadRequest, "customerEmail", "required"},
		{"text without a phone", with("delivery", "text"), http.StatusBadRequest, "customerPhone", "required when delivery is text"},
		{"later without a time", with("send", "schedule"), http.StatusBadRequest, "sendAt", "Enter the day and time"},
		{"later in the past", with("send", "schedule", "sendAt", "2020-01-01T09:00"), http.StatusBadRequest, "sendAt", "in the future"},
		{"no MID", with("merchantAccountId", ""), http.StatusBadRequest, "merchantAccountId", "Choose the merchant account"},
		{"another organization's MID", with("merchantAccountId", uuid.NewString()), http.StatusUnprocessableEntity, "merchantAccountId", "not a MID of your organization"},
		{"a bad due date", with("dueDate", "2031-02-30"), http.StatusBadRequest, "dueDate", "YYYY-MM-DD"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			p := c.Post("/portal/invoices", newForm.CSRF(t), bad.values).Want(t, bad.status).ErrorBeside(t, bad.field, bad.message)
			p.Has(t, `value="Ada Park"`, `value="`+bad.values.Get("lines[0].description")+`"`, `value="`+bad.values.Get("idempotencyKey")+`"`)
			if !strings.HasPrefix(titleOf(p), "Error: ") {
				t.Errorf("title %q", titleOf(p))
			}
		})
	}
	if got := apiList(t, env, m.Token, "invoiceNumber=PORTAL-1"); len(got) != 0 {
		t.Fatalf("refused forms made %d invoices", len(got))
	}

	values := with()
	first := c.Post("/portal/invoices", newForm.CSRF(t), values)
	id := invoicePath.FindStringSubmatch(first.Location)
	if first.Status != http.StatusSeeOther || id == nil {
		t.Fatalf("made: %d to %q:\n%s", first.Status, first.Location, first.Body)
	}
	c.Post("/portal/invoices", newForm.CSRF(t), values).WantRedirect(t, first.Location)
	if got := apiList(t, env, m.Token, "invoiceNumber=PORTAL-1"); len(got) != 1 {
		t.Fatalf("the form sent twice made %d invoices", len(got))
	}
	inv, raw := m.Read(t, uuid.MustParse(id[1]))
	apitest.Want(t, "amount", inv.Amount.Text('f'), "1230.00")
	apitest.Want(t, "merchantAccountId", inv.MerchantAccountId, m.MIDs[1].Id)
	apitest.Want(t, "lines", len(*inv.LineItems), 2)
	apitest.Want(t, "lines[1].unitCost", (*inv.LineItems)[1].UnitCost.Text('f'), "-20")
	apitest.Want(t, "dueDate", inv.DueDate.Format(time.DateOnly), "2031-03-01")
	apitest.WantText(t, "sentVia", (*string)(inv.SentVia), "email")
	apitest.Want(t, "reminders", inv.Reminders != nil && *inv.Reminders, true)
	if !strings.HasPrefix(inv.CreatedByName, "Member ") {
		t.Errorf("createdByName %q, want the member's name (%s)", inv.CreatedByName, raw)
	}
	c.Get(first.Location).Want(t, http.StatusOK).Has(t, "The invoice was made.", "Tiles", "$1,230.00", "Discount", "-$20.00")
	audit := auditOf(t, env, uuid.MustParse(m.Org), "invoice created")
	if len(audit) != 1 || !strings.Contains(audit[0], "PORTAL-1") {
		t.Errorf("audit entries of the creation: %q", audit)
	}

	// Sent later, at a time of the MID's location (Los Angeles); not sent;
	// reminders as the organization says.
	la, _ := time.LoadLocation("America/Los_Angeles")
	at := env.Clock.Now().In(la).Add(48 * time.Hour).Truncate(time.Minute)
	p := c.Get("/portal/invoices/new")
	later := c.Post("/portal/invoices", p.CSRF(t), form("idempotencyKey", formKey(t, p), "merchantAccountId", m.MIDs[0].Id.String(),
		"invoiceNumber", "PORTAL-2", "customerEmail", "ada@example.com", "amount", "15", "delivery", "email",
		"send", "schedule", "sendAt", at.Format("2006-01-02T15:04"), "reminders", ""))
	inv2, _ := m.Read(t, uuid.MustParse(invoicePath.FindStringSubmatch(later.Location)[1]))
	if inv2.ScheduledSendAt == nil || !inv2.ScheduledSendAt.Equal(at) || inv2.SentAt != nil || inv2.Reminders != nil {
		t.Errorf("scheduled %v (want %v), sent %v, reminders %v", inv2.ScheduledSendAt, at, inv2.SentAt, inv2.Reminders)
	}
	p = c.Get("/portal/invoices/new")
	kept := c.Post("/portal/invoices", p.CSRF(t), form("idempotencyKey", formKey(t, p), "merchantAccountId", m.MIDs[0].Id.String(),
		"invoiceNumber", "PORTAL-3", "customerEmail", "ada@example.com", "amount", "15", "delivery", "email", "send", "no"))
	inv3, _ := m.Read(t, uuid.MustParse(invoicePath.FindStringSubmatch(kept.Location)[1]))
	if inv3.SentAt != nil || inv3.ScheduledSendAt != nil {
		t.Errorf("an invoice not to send was sent %v or scheduled %v", inv3.SentAt, inv3.ScheduledSendAt)
	}
	// The key of a form that made an invoice, with other values: nothing
	// made, and the form comes back with a new key.
	again := c.Post("/portal/invoices", p.CSRF(t), form("idempotencyKey", formKey(t, p), "merchantAccountId", m.MIDs[0].Id.String(),
		"invoiceNumber", "PORTAL-4", "customerEmail", "ada@example.com", "amount", "16", "delivery", "email", "send", "no")).
		Want(t, http.StatusUnprocessableEntity).Has(t, "already made an invoice")
	if formKey(t, again) == formKey(t, p) {
		t.Error("the form came back with the key it was refused with")
	}
	// The number is unique: 422 beside it.
	p = c.Get("/portal/invoices/new")
	c.Post("/portal/invoices", p.CSRF(t), form("idempotencyKey", formKey(t, p), "merchantAccountId", m.MIDs[0].Id.String(),
		"invoiceNumber", "PORTAL-3", "customerEmail", "ada@example.com", "amount", "15", "delivery", "email", "send", "no")).
		Want(t, http.StatusUnprocessableEntity).ErrorBeside(t, "invoiceNumber", "already has an invoice numbered")
	// More rows than the form shows, as its script adds them.
	p = c.Get("/portal/invoices/new")
	many := form("idempotencyKey", formKey(t, p), "merchantAccountId", m.MIDs[0].Id.String(), "invoiceNumber", "PORTAL-5",
		"customerEmail", "ada@example.com", "amount", "8", "delivery", "email", "send", "no")
	for i := range 8 {
		many.Set(lineName(i, "description"), "Item")
		many.Set(lineName(i, "quantity"), "1")
		many.Set(lineName(i, "unitCost"), "1")
	}
	many.Set(lineName(7, "quantity"), "-1")
	c.Post("/portal/invoices", p.CSRF(t), many).Want(t, http.StatusBadRequest).ErrorBeside(t, lineName(7, "quantity"), "greater than 0").Has(t, "Line 8")
}

// overlay is a copy of base with pairs (name, value, …) set over it.
func overlay(base url.Values, pairs ...string) url.Values {
	v := url.Values{}
	for k, vs := range base {
		v[k] = vs
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		v.Set(pairs[i], pairs[i+1])
	}
	return v
}

// noLines empties the rows of lines of TestCreateInvoiceInThePortal's form.
var noLines = []string{"lines[0].description", "", "lines[0].quantity", "", "lines[0].unitCost", "",
	"lines[2].description", "", "lines[2].quantity", "", "lines[2].unitCost", ""}

func lineName(i int, field string) string {
	return "lines[" + string(rune('0'+i)) + "]." + field
}

const scriptTag = `<script src="/portal/assets/`

// auditOf is the organization's audit entries of action: their details.
func auditOf(t *testing.T, env *apitest.Env, org uuid.UUID, action string) []string {
	t.Helper()
	entries, _, err := env.App.People.AuditPage(t.Context(), org, nil, 500)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Action == action {
			out = append(out, e.Detail)
		}
	}
	return out
}
