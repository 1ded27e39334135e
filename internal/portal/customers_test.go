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

// newCustomer makes a customer of m through the API.
func newCustomer(t *testing.T, m apitest.Merchant, body map[string]any) models.Customer {
	t.Helper()
	r := m.Env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: m.Token, Body: body})
	apitest.Want(t, "customer", r.StatusCode, http.StatusCreated)
	var c models.Customer
	r.JSON(t, &c)
	return c
}

var customerLinks = regexp.MustCompile(`<a href="/portal/customers/([0-9a-f-]{36})">`)

// The list: empty, it says so and offers "New customer"; full, newest
// first, a page at a time; the search finds any part of a name, company
// or email in any case, and refuses one character beside its field.
func TestCustomersListSearchesAndPages(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	c.Get("/portal/customers").Want(t, http.StatusOK).Has(t, "No customers yet", `href="/portal/customers/new"`, "New customer")

	dana := newCustomer(t, m, map[string]any{"email": "dana@example.com", "name": "Dana Whitfield", "company": "Ridge Roasters"})
	lee := newCustomer(t, m, map[string]any{"email": "lee@beans.example", "name": "Lee Okafor"})
	sam := newCustomer(t, m, map[string]any{"email": "sam@example.org", "company": "Sam's Café"})
	m.MustCreate(t, m.Body("C-1", "40.00")) // to dana@example.com: her open balance

	all := c.Get("/portal/customers").Want(t, http.StatusOK).Has(t, "Dana Whitfield", "Ridge Roasters", "Lee Okafor", "Sam&#39;s Café", "$40.00")
	if got := customerLinks.FindAllStringSubmatch(all.Body, -1); len(got) != 3 || got[0][1] != sam.Id.String() || got[2][1] != dana.Id.String() {
		t.Errorf("rows %v, want sam, lee, dana", got)
	}
	for q, want := range map[string]uuid.UUID{"ROAST": dana.Id, "beans.ex": lee.Id, "café": sam.Id, "okaf": lee.Id} {
		p := c.Get("/portal/customers?q="+q).Want(t, http.StatusOK).Has(t, "Customers that match")
		if got := customerLinks.FindAllStringSubmatch(p.Body, -1); len(got) != 1 || got[0][1] != want.String() {
			t.Errorf("q=%s found %v, want %s", q, got, want)
		}
	}
	c.Get("/portal/customers?q=zzzz").Want(t, http.StatusOK).Has(t, "No customers match")
	c.Get("/portal/customers?q=a").Want(t, http.StatusBadRequest).ErrorBeside(t, "q", "Enter 2 to 100 characters")

	first := c.Get("/portal/customers?limit=2").Want(t, http.StatusOK)
	next := nextLink.FindStringSubmatch(first.Body)
	if next == nil {
		t.Fatalf("no next page:\n%s", first.Body)
	}
	second := c.Get(strings.ReplaceAll(next[1], "&amp;", "&")).Want(t, http.StatusOK)
	if got := customerLinks.FindAllStringSubmatch(second.Body, -1); len(got) != 1 || got[0][1] != dana.Id.String() {
		t.Errorf("second page %v, want dana", got)
	}
	c.Get("/portal/customers?cursor=nonsense").Want(t, http.StatusBadRequest).Has(t, "out of date")
	csv := c.Get("/portal/customers?format=csv&q=ridge").Want(t, http.StatusOK)
	if !strings.HasPrefix(csv.Body, "id,email,name,company,phone,taxExempt,openBalance,invoiceCount,createdAt") ||
		!strings.Contains(csv.Body, "dana@example.com,Dana Whitfield,Ridge Roasters,,false,40.00,1,") || strings.Contains(csv.Body, "lee@") {
		t.Errorf("csv:\n%s", csv.Body)
	}

	// A member without payments.create sees no "New customer".
	viewer, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView)
	if p := viewer.Get("/portal/customers").Want(t, http.StatusOK); strings.Contains(p.Body, "/portal/customers/new") {
		t.Error("a viewer is offered New customer")
	}
}

// Making a customer: refused values come back beside their fields in the
// page's words, what was typed kept; an email another customer has links
// to that customer; the form sent twice makes one customer.
func TestCustomerCreateRefusesAndMakesOnce(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	existing := newCustomer(t, m, map[string]any{"email": "taken@example.com"})
	p := c.Get("/portal/customers/new").Want(t, http.StatusOK).Has(t, "New customer", `name="country" value="US"`)
	key := formKey(t, p)

	bad := form("idempotencyKey", key, "email", "not an email", "name", "Dana", "city", "Austin", "country", "usa", "phone", strings.Repeat("5", 40))
	c.Post("/portal/customers", p.CSRF(t), bad).Want(t, http.StatusBadRequest).
		ErrorBeside(t, "email", "Enter the customer&#39;s email address").ErrorBeside(t, "line1", "Enter the street address").
		ErrorBeside(t, "country", "two-letter code").ErrorBeside(t, "phone", "at most 32").Has(t, `value="Dana"`, `value="Austin"`)

	taken := form("idempotencyKey", uuid.NewString(), "email", "TAKEN@example.com")
	c.Post("/portal/customers", p.CSRF(t), taken).Want(t, http.StatusConflict).
		ErrorBeside(t, "email", "Another customer has this email").Has(t, `href="/portal/customers/`+existing.Id.String()+`"`)

	good := form("idempotencyKey", key, "email", "dana@example.com", "name", "Dana Whitfield", "company", "Ridge Roasters",
		"phone", "+1 512 555 0100", "line1", "1 Main St", "city", "Austin", "state", "TX", "postalCode", "78701", "country", "US",
		"taxExempt", "on", "notes", "Pays by check")
	made := c.Post("/portal/customers", p.CSRF(t), good).Want(t, http.StatusSeeOther)
	loc := made.Header.Get("Location")
	again := c.Post("/portal/customers", p.CSRF(t), good).Want(t, http.StatusSeeOther)
	if again.Header.Get("Location") != loc || !strings.HasSuffix(loc, "?done=created") {
		t.Errorf("sent twice: %q then %q", loc, again.Header.Get("Location"))
	}
	c.Get(loc).Want(t, http.StatusOK).Has(t, "The customer was made.", "Dana Whitfield", "Ridge Roasters", "512 555 0100",
		"1 Main St", "Austin, TX 78701", "Tax-exempt", "Pays by check", "No saved cards", "No invoices yet")
	r := env.Do(apitest.Request{Method: "GET", Path: "/customers?email=dana@example.com", Token: m.Token})
	var list []models.Customer
	r.JSON(t, &list)
	if len(list) != 1 || !list[0].TaxExempt || list[0].Address == nil || list[0].Address.City != "Austin" {
		t.Errorf("made: %s", r.Body)
	}
	owner, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	owner.Get("/portal/audit").Want(t, http.StatusOK).Has(t, "customer created", "dana@example.com")
}

// A customer's page: its details, open balance, invoices linking to them
// (a page at a time) and saved cards; editing sets every field as sent;
// a card is removed after a confirmation, here and at the processor; a
// customer with invoices cannot be deleted (the domain's words), one
// without can, its deletion confirmed first.
func TestCustomerPageEditsRemovesCardsAndDeletes(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate, auth.EventsView)
	inv := m.MustCreate(t, m.Body("CP-1", "25.00"))
	m.MustCreate(t, m.Body("CP-2", "15.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "25.00", Save: true}), http.StatusSeeOther)
	inv, _ = m.Read(t, inv.Id)
	path := "/portal/customers/" + inv.CustomerId.String()

	p := c.Get(path).Want(t, http.StatusOK).Has(t, "Dana Whitfield", "dana@example.com", "$15.00", `href="/portal/invoices/`+inv.Id.String()+`"`,
		"CP-1", "CP-2", "ending in", "expires", `href="`+path+`/edit"`, `href="`+path+`/delete"`)
	card := regexp.MustCompile(`href="` + regexp.QuoteMeta(path) + `/cards/([0-9a-f-]{36})/remove"`).FindStringSubmatch(p.Body)
	if card == nil {
		t.Fatalf("no saved card to remove:\n%s", p.Body)
	}
	paged := c.Get(path+"?limit=1").Want(t, http.StatusOK)
	if nextLink.FindStringSubmatch(paged.Body) == nil {
		t.Errorf("no next page of invoices:\n%s", paged.Body)
	}

	// Edit: refused beside its field, then saved; a cleared field is cleared.
	edit := c.Get(path+"/edit").Want(t, http.StatusOK).Has(t, `value="dana@example.com"`, `value="Dana Whitfield"`)
	c.Post(path+"/edit", edit.CSRF(t), form("email", "dana@example.com", "notes", strings.Repeat("n", 2001))).Want(t, http.StatusBadRequest).
		ErrorBeside(t, "notes", "at most 2,000")
	c.Post(path+"/edit", edit.CSRF(t), form("email", "dana@ridge.example", "company", "Ridge Roasters", "name", "")).
		WantRedirect(t, path+"?done=saved")
	saved := c.Get(path+"?done=saved").Want(t, http.StatusOK).Has(t, "The customer was saved.", `<h1 id="h">Ridge Roasters</h1>`, "dana@ridge.example")
	if strings.Contains(saved.Body, "<dt>Name</dt>") {
		t.Error("the cleared name is still shown")
	}

	// Remove the card: a confirmation naming it, then gone; audited.
	remove := path + "/cards/" + card[1] + "/remove"
	confirm := c.Get(remove).Want(t, http.StatusOK).Has(t, "Remove the saved card", "ending in", "at the card processor")
	c.Post(remove, confirm.CSRF(t), nil).WantRedirect(t, path+"?done=cardRemoved")
	c.Get(path+"?done=cardRemoved").Want(t, http.StatusOK).Has(t, "The saved card was removed.", "No saved cards")
	c.Post(remove, confirm.CSRF(t), nil).Want(t, http.StatusNotFound)

	// Delete: refused with invoices, in the domain's words.
	del := c.Get(path+"/delete").Want(t, http.StatusOK).Has(t, "Delete the customer", "cannot be undone")
	c.Post(path+"/delete", del.CSRF(t), nil).Want(t, http.StatusUnprocessableEntity).Has(t, "only a customer without invoices can be deleted")
	c.Get(path).Want(t, http.StatusOK)

	lone := newCustomer(t, m, map[string]any{"email": "lone@example.com"})
	c.Post("/portal/customers/"+lone.Id.String()+"/delete", del.CSRF(t), nil).WantRedirect(t, "/portal/customers?done=deleted")
	c.Get("/portal/customers?done=deleted").Want(t, http.StatusOK).Has(t, "The customer was deleted.")
	c.Get("/portal/customers/"+lone.Id.String()).Want(t, http.StatusNotFound)

	owner, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Owner", auth.PermissionsFor(auth.KindMerchant)...)
	owner.Get("/portal/audit").Want(t, http.StatusOK).Has(t, "customer changed", "saved card removed", "customer deleted", "lone@example.com")
}

// Another organization's customers and cards, and unknown ids, are 404 on
// every customer page and action; nothing of theirs changes or shows.
func TestCustomersOfAnotherOrganization(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	theirs := apitest.NewMerchant(t, env)
	inv := theirs.MustCreate(t, theirs.Body("THEIRS-C", "20.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "20.00", Save: true}), http.StatusSeeOther)
	lone := newCustomer(t, theirs, map[string]any{"email": "their-lone@example.com", "name": "Their Lone Customer"})
	inv, _ = theirs.Read(t, inv.Id)
	r := env.Do(apitest.Request{Method: "GET", Path: "/customers/" + inv.CustomerId.String(), Token: theirs.Token})
	var them models.Customer
	r.JSON(t, &them)
	if len(them.SavedCards) != 1 {
		t.Fatalf("their card: %s", r.Body)
	}
	card := them.SavedCards[0].Id.String()

	me, c := merchant(t, env, auth.PermissionsFor(auth.KindMerchant)...)
	mine := newCustomer(t, me, map[string]any{"email": "mine@example.com"})
	home := c.Get("/portal/")
	for _, id := range []string{them.Id.String(), lone.Id.String(), uuid.NewString(), "not-a-uuid"} {
		for _, e := range []struct{ method, path string }{
			{"GET", "/portal/customers/{c}"}, {"GET", "/portal/customers/{c}/edit"}, {"POST", "/portal/customers/{c}/edit"},
			{"GET", "/portal/customers/{c}/delete"}, {"POST", "/portal/customers/{c}/delete"},
			{"GET", "/portal/customers/{c}/cards/{card}/remove"}, {"POST", "/portal/customers/{c}/cards/{card}/remove"},
		} {
			path := strings.NewReplacer("{c}", id, "{card}", card).Replace(e.path)
			var got portaltest.Page
			if e.method == "GET" {
				got = c.Get(path)
			} else {
				got = c.Post(path, home.CSRF(t), form("email", "stolen@example.com"))
			}
			got.Want(t, http.StatusNotFound)
			if strings.Contains(got.Body, "their-lone@") || strings.Contains(got.Body, "Their Lone") {
				t.Errorf("%s %s shows theirs", e.method, path)
			}
		}
	}
	// Their card under my customer is not mine either.
	c.Post("/portal/customers/"+mine.Id.String()+"/cards/"+card+"/remove", home.CSRF(t), nil).Want(t, http.StatusNotFound)
	for _, path := range []string{"/portal/customers", "/portal/customers?q=their", "/portal/customers?format=csv"} {
		if got := c.Get(path).Want(t, http.StatusOK); strings.Contains(got.Body, "their-lone@") || strings.Contains(got.Body, "dana@example.com") {
			t.Errorf("%s shows theirs", path)
		}
	}
	r = env.Do(apitest.Request{Method: "GET", Path: "/customers/" + them.Id.String(), Token: theirs.Token})
	var after models.Customer
	r.JSON(t, &after)
	if len(after.SavedCards) != 1 || after.Email != them.Email {
		t.Errorf("their customer changed: %s", r.Body)
	}
	apitest.Want(t, "their lone customer", env.Do(apitest.Request{Method: "GET", Path: "/customers/" + lone.Id.String(), Token: theirs.Token}).StatusCode, http.StatusOK)
}
