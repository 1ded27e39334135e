package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/invoice"
)

// The invoice editor without JavaScript, and the invoice page's actions:
// the next number suggested, a customer chosen, "Add a line" and "Update
// totals" showing the form again with nothing lost or made, a draft saved,
// edited at its version (a stale version refused, nothing changed),
// finalized, duplicated, a draft deleted after its confirmation; refusals
// beside their fields in the page's words; an invoice with payments not
// editable; another organization's invoices 404; each change audited.
func TestInvoiceEditor(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	org := uuid.MustParse(m.Org)
	m.MustCreate(t, m.Body("ED-0007", "5.00"))
	var cust struct{ Id string }
	r := env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: m.Token, Header: http.Header{"Idempotency-Key": {"cust-1"}},
		Body: map[string]any{"email": "ada@example.com", "name": "Ada Park", "company": "Park Tiles"}})
	apitest.Want(t, "customer", r.StatusCode, http.StatusCreated)
	r.JSON(t, &cust)
	rate, _, _ := apd.NewFromString("8.25")
	if _, err := env.App.Invoices.AddTaxRate(t.Context(), invoice.Actor{OrganizationID: org, Name: "test"}, "Sales tax", *rate); err != nil {
		t.Fatal(err)
	}

	p := c.Get("/portal/invoices/new").Want(t, http.StatusOK).Has(t, `value="ED-0008"`, "Ada Park · Park Tiles · ada@example.com", "Sales tax 8.25%", "Add a line", "Update totals")
	values := form("idempotencyKey", formKey(t, p), "merchantAccountId", m.MIDs[0].Id.String(), "customerId", cust.Id,
		"invoiceNumber", "ED-0008", "lines[0].description", "Tiles", "lines[0].quantity", "2", "lines[0].unitCost", "10.00",
		"lines[0].taxRate", "8.25", "delivery", "email", "send", "now")
	with := func(pairs ...string) url.Values { return overlay(values, pairs...) }
	c.Post("/portal/invoices", p.CSRF(t), with("action", "add")).Want(t, http.StatusOK).Has(t, "Line 2", `id="lines[1].description"`, `value="Tiles"`, `value="ED-0008"`)
	c.Post("/portal/invoices", p.CSRF(t), with("action", "totals")).Want(t, http.StatusOK).Has(t, "$20.00", "$1.65", "$21.65")
	c.Post("/portal/invoices", p.CSRF(t), with("action", "totals", "lines[0].quantity", "two")).Want(t, http.StatusBadRequest).ErrorBeside(t, "lines[0].quantity", "Enter a number")
	if got := apiList(t, env, m.Token, "invoiceNumber=ED-0008"); len(got) != 0 {
		t.Fatalf("adding a line or updating totals made %d invoices", len(got))
	}
	for _, bad := range []struct {
		name           string
		values         url.Values
		status         int
		field, message string
	}{
		{"a tax rate over 100", with("lines[0].taxRate", "101"), http.StatusBadRequest, "lines[0].taxRate", "from 0 to 100"},
		{"an unknown customer", with("customerId", uuid.NewString()), http.StatusUnprocessableEntity, "customerId", "not a customer of your organization"},
		{"another customer's email", with("customerEmail", "bo@example.com"), http.StatusUnprocessableEntity, "customerEmail", "not the email of the customer chosen above"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			got := c.Post("/portal/invoices", p.CSRF(t), bad.values).Want(t, bad.status).ErrorBeside(t, bad.field, bad.message).Has(t, `value="Tiles"`)
			if strings.Contains(got.Body, "unitCost must") || strings.Contains(got.Body, "taxRate null") || strings.Contains(got.Body, "customerEmail is") {
				t.Errorf("the refusal speaks the API's words:\n%s", got.Body)
			}
		})
	}

	// Saved as a draft: the customer's email, the lines' total.
	saved := c.Post("/portal/invoices", p.CSRF(t), with("action", "draft"))
	id := regexpID.FindStringSubmatch(saved.Location)
	if saved.Status != http.StatusSeeOther || id == nil || !strings.HasSuffix(saved.Location, "?done=drafted") {
		t.Fatalf("saved: %d to %q:\n%s", saved.Status, saved.Location, saved.Body)
	}
	draftID := uuid.MustParse(id[1])
	inv, _ := m.Read(t, draftID)
	apitest.Want(t, "status", string(inv.Status), "draft")
	apitest.Want(t, "amount", inv.Amount.Text('f'), "21.65")
	apitest.WantText(t, "customerEmail", inv.CustomerEmail, "ada@example.com")
	page := c.Get(saved.Location).Want(t, http.StatusOK).Has(t, "The draft was saved", "Finalize and send", "/edit", "/duplicate", "Delete the draft")
	if strings.Contains(page.Body, "View as your customer") {
		t.Error("a draft offers its pay page")
	}

	// Edited at its version; the same version again is stale.
	edit := c.Get("/portal/invoices/"+draftID.String()+"/edit").Want(t, http.StatusOK).Has(t, `name="version" value="1"`, `value="Tiles"`, "Save draft")
	change := with("version", "1", "lines[0].quantity", "3", "action", "draft")
	change.Del("idempotencyKey")
	c.Post("/portal/invoices/"+draftID.String()+"/edit", edit.CSRF(t), change).WantRedirect(t, "/portal/invoices/"+draftID.String()+"?done=changed")
	inv, _ = m.Read(t, draftID)
	apitest.Want(t, "amount after the edit", inv.Amount.Text('f'), "32.48")
	c.Post("/portal/invoices/"+draftID.String()+"/edit", edit.CSRF(t), with("version", "1", "lines[0].quantity", "4", "action", "draft")).
		Want(t, http.StatusPreconditionFailed).Has(t, "Someone changed this invoice", `value="4"`)
	if inv, _ = m.Read(t, draftID); inv.Amount.Text('f') != "32.48" {
		t.Errorf("a stale edit changed the amount to %s", inv.Amount.Text('f'))
	}

	// Finalized: open, sent, its pay page offered.
	c.Post("/portal/invoices/"+draftID.String()+"/finalize", edit.CSRF(t), nil).WantRedirect(t, "/portal/invoices/"+draftID.String()+"?done=finalized")
	inv, _ = m.Read(t, draftID)
	if inv.Status != "open" || inv.SentAt == nil {
		t.Errorf("finalized: %s, sent %v", inv.Status, inv.SentAt)
	}
	c.Get("/portal/invoices/"+draftID.String()+"?done=finalized").Has(t, "The invoice is finalized", "View as your customer", "/edit")
	c.Post("/portal/invoices/"+draftID.String()+"/finalize", edit.CSRF(t), nil).Want(t, http.StatusUnprocessableEntity)

	// An open invoice edited, then duplicated.
	edit = c.Get("/portal/invoices/"+draftID.String()+"/edit").Want(t, http.StatusOK).Has(t, `name="version" value="`+strconv.Itoa(int(inv.Version))+`"`, "Save changes")
	if strings.Contains(edit.Body, "Save draft") {
		t.Error("an open invoice's editor saves drafts")
	}
	c.Post("/portal/invoices/"+draftID.String()+"/edit", edit.CSRF(t), with("version", strconv.Itoa(int(inv.Version)), "memo", "Thanks!", "action", "finalize")).
		WantRedirect(t, "/portal/invoices/"+draftID.String()+"?done=changed")
	dup := c.Get("/portal/invoices/"+draftID.String()+"/duplicate").Want(t, http.StatusOK).
		Has(t, "New invoice", `value="ED-0009"`, `value="Tiles"`, `value="2"`, `<option value="`+cust.Id+`" selected>`, `<option value="8.25" selected>`, "Thanks!")
	if formKey(t, dup) == formKey(t, p) {
		t.Error("the duplicate's form reuses a key")
	}

	// A draft deleted after its confirmation; an open invoice is not.
	other := m.MustCreate(t, asDraft(m.Body("ED-DRAFT", "9.00")))
	c.Get("/portal/invoices/"+other.Id.String()+"/delete").Want(t, http.StatusOK).Has(t, "Delete draft ED-DRAFT?", "Delete the draft")
	c.Post("/portal/invoices/"+other.Id.String()+"/delete", p.CSRF(t), nil).WantRedirect(t, "/portal/invoices?done=deleted")
	c.Get("/portal/invoices?done=deleted").Has(t, "The draft was deleted.")
	apitest.Want(t, "deleted draft", env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + other.Id.String(), Token: m.Token}).StatusCode, http.StatusNotFound)
	c.Post("/portal/invoices/"+draftID.String()+"/delete", p.CSRF(t), nil).Want(t, http.StatusUnprocessableEntity)

	// An invoice with a payment is not editable.
	paid := m.MustCreate(t, m.Body("ED-PAID", "40.00"))
	apitest.Want(t, "record", env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + paid.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "1.00", "method": "cash"}}).StatusCode, http.StatusCreated)
	if strings.Contains(c.Get("/portal/invoices/"+paid.Id.String()).Body, paid.Id.String()+"/edit") {
		t.Error("an invoice with a payment offers Edit")
	}
	c.Get("/portal/invoices/"+paid.Id.String()+"/edit").Want(t, http.StatusUnprocessableEntity).Has(t, "An invoice with payments cannot be changed")

	// Another organization's invoice is not found.
	theirs := apitest.NewMerchant(t, env)
	draft := theirs.MustCreate(t, asDraft(theirs.Body("THEIRS", "9.00")))
	base := "/portal/invoices/" + draft.Id.String()
	for _, path := range []string{base + "/edit", base + "/duplicate", base + "/delete"} {
		c.Get(path).Want(t, http.StatusNotFound)
	}
	for _, path := range []string{base + "/edit", base + "/finalize", base + "/delete"} {
		c.Post(path, p.CSRF(t), with("version", "1")).Want(t, http.StatusNotFound)
	}
	if after, _ := theirs.Read(t, draft.Id); after.Status != "draft" {
		t.Errorf("another organization's draft is %s", after.Status)
	}

	for action, want := range map[string]int{"invoice changed": 2, "invoice finalized": 1, "draft deleted": 1} {
		if got := auditOf(t, env, org, action); len(got) != want {
			t.Errorf("audit entries %q: %q, want %d", action, got, want)
		}
	}
}

var regexpID = regexp.MustCompile(`^/portal/invoices/([0-9a-f-]{36})\?done=`)

// asDraft is a create request b for a draft.
func asDraft(b map[string]any) map[string]any {
	b["draft"] = true
	b["send"] = nil
	return b
}
