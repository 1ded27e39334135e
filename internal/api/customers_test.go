package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

// newCustomer makes a customer through the API and fails the test unless it is made.
func newCustomer(t *testing.T, m apitest.Merchant, body map[string]any) models.Customer {
	t.Helper()
	r := m.Env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: m.Token, Body: body})
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("create customer: %d %s", r.StatusCode, r.Body)
	}
	var c models.Customer
	r.JSON(t, &c)
	return c
}

func readCustomer(t *testing.T, m apitest.Merchant, id uuid.UUID) models.Customer {
	t.Helper()
	r := m.Env.Do(apitest.Request{Method: "GET", Path: "/customers/" + id.String(), Token: m.Token})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("get customer: %d %s", r.StatusCode, r.Body)
	}
	var c models.Customer
	r.JSON(t, &c)
	return c
}

// A customer is made with every field and read back as sent; the same
// Idempotency-Key and body answers it again, another body with the key is
// refused; its email in other capitals is a 409 naming it.
func TestCustomerCreateAndReadBack(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	body := map[string]any{"email": "Dana@WhitfieldCatering.com", "name": "Dana Whitfield", "company": "Whitfield Catering LLC",
		"phone": "+15125550148", "notes": "Invoices go to accounts payable.", "taxExempt": true,
		"address": map[string]any{"line1": "1200 Cedar St", "line2": "Suite 4", "city": "Round Rock", "state": "TX", "postalCode": "78664"}}
	key := http.Header{"Idempotency-Key": {"customer-1"}}
	r := env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: m.Token, Body: body, Header: key})
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", r.StatusCode, r.Body)
	}
	var c models.Customer
	r.JSON(t, &c)
	apitest.Want(t, "email", c.Email, "Dana@WhitfieldCatering.com")
	apitest.WantText(t, "name", c.Name, "Dana Whitfield")
	apitest.WantText(t, "company", c.Company, "Whitfield Catering LLC")
	apitest.WantText(t, "phone", c.Phone, "+15125550148")
	apitest.WantText(t, "notes", c.Notes, "Invoices go to accounts payable.")
	apitest.Want(t, "taxExempt", c.TaxExempt, true)
	apitest.Want(t, "address set", c.Address != nil, true)
	apitest.WantText(t, "address.line2", c.Address.Line2, "Suite 4")
	apitest.WantText(t, "address.country", c.Address.Country, "US")
	apitest.Want(t, "openBalance", c.OpenBalance.Text('f'), "0.00")
	apitest.Want(t, "invoiceCount", c.InvoiceCount, int32(0))
	apitest.Want(t, "savedCards", len(c.SavedCards), 0)
	apitest.Want(t, "prefers", c.Prefers == nil, true)

	again := env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: m.Token, Body: body, Header: key})
	apitest.Want(t, "replay status", again.StatusCode, http.StatusOK)
	apitest.Want(t, "Idempotent-Replayed", again.Header.Get("Idempotent-Replayed"), "true")
	var replayed models.Customer
	again.JSON(t, &replayed)
	apitest.Want(t, "replayed id", replayed.Id, c.Id)
	other := map[string]any{"email": "luis@example.com"}
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: m.Token, Body: other, Header: key}),
		http.StatusUnprocessableEntity, "Idempotency key reused")

	taken := env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: m.Token, Body: map[string]any{"email": "dana@whitfieldcatering.COM"}})
	p := apitest.WantProblem(t, taken, http.StatusConflict, "Customer email taken")
	if p.ExistingId == nil || *p.ExistingId != c.Id {
		t.Errorf("existingId %v, want %s", p.ExistingId, c.Id)
	}
	got := readCustomer(t, m, c.Id)
	apitest.Want(t, "read back email", got.Email, c.Email)
	apitest.Want(t, "read back createdAt", got.CreatedAt.Equal(c.CreatedAt), true)
}

// Every rule of a customer's fields is a 400 keyed by the field as sent.
func TestCustomerValidation(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"no email", map[string]any{"name": "Dana"}, "email"},
		{"not an email", map[string]any{"email": "dana"}, "email"},
		{"name too long", map[string]any{"email": "a@example.com", "name": strings.Repeat("n", 201)}, "name"},
		{"notes too long", map[string]any{"email": "a@example.com", "notes": strings.Repeat("n", 2001)}, "notes"},
		{"address without city", map[string]any{"email": "a@example.com", "address": map[string]any{"line1": "1 Main St"}}, "address.city"},
		{"country of no country", map[string]any{"email": "a@example.com", "address": map[string]any{"line1": "1 Main St", "city": "X", "country": "ZZ"}}, "address.country"},
		{"country in small letters", map[string]any{"email": "a@example.com", "address": map[string]any{"line1": "1 Main St", "city": "X", "country": "us"}}, "address.country"},
		{"unknown member", map[string]any{"email": "a@example.com", "vip": true}, "vip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := env.Do(apitest.Request{Method: "POST", Path: "/customers", Token: m.Token, Body: tc.body})
			p := apitest.WantProblem(t, r, http.StatusBadRequest, "Invalid request")
			if p.Errors == nil || len((*p.Errors)[tc.field]) == 0 {
				t.Errorf("errors %v, want one for %s", p.Errors, tc.field)
			}
		})
	}
}

// The list is newest first and paged; q finds a substring of name,
// company or email in any case (2 to 100 characters, else 400), email
// the exact email in any case.
func TestCustomerListAndSearch(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	dana := newCustomer(t, m, map[string]any{"email": "dana@whitfield.example", "name": "Dana Whitfield"})
	bright := newCustomer(t, m, map[string]any{"email": "ap@brightside.example", "company": "Brightside Plumbing"})
	luis := newCustomer(t, m, map[string]any{"email": "Luis@Example.com", "name": "Luis Ortega"})

	list := func(query string) ([]models.Customer, *apitest.Response) {
		r := env.Do(apitest.Request{Method: "GET", Path: "/customers?" + query, Token: m.Token})
		if r.StatusCode != http.StatusOK {
			t.Fatalf("list %s: %d %s", query, r.StatusCode, r.Body)
		}
		var cs []models.Customer
		r.JSON(t, &cs)
		return cs, r
	}
	ids := func(cs []models.Customer) []uuid.UUID {
		out := make([]uuid.UUID, len(cs))
		for i, c := range cs {
			out[i] = c.Id
		}
		return out
	}
	wantIDs := func(what string, got []models.Customer, want ...uuid.UUID) {
		t.Helper()
		g := ids(got)
		if len(g) != len(want) {
			t.Errorf("%s: %v, want %v", what, g, want)
			return
		}
		for i := range g {
			if g[i] != want[i] {
				t.Errorf("%s: %v, want %v", what, g, want)
				return
			}
		}
	}
	first, r := list("limit=2")
	wantIDs("first page", first, luis.Id, bright.Id)
	link := r.Header.Get("Link")
	if !strings.Contains(link, `rel="next"`) {
		t.Fatalf("no next page: %q", link)
	}
	next := link[strings.Index(link, "/customers?")+len("/customers?") : strings.Index(link, ">")]
	second, r := list(next)
	wantIDs("second page", second, dana.Id)
	apitest.Want(t, "Link on the last page", r.Header.Get("Link"), "")

	found, _ := list("q=WHIT")
	wantIDs("q=WHIT", found, dana.Id)
	found, _ = list("q=plumb")
	wantIDs("q=plumb (company)", found, bright.Id)
	found, _ = list("q=EXAMPLE")
	wantIDs("q=EXAMPLE (emails, any case)", found, luis.Id, bright.Id, dana.Id)
	found, _ = list("q=%25%25")
	wantIDs("q=%% matches itself", found)
	found, _ = list("email=luis@EXAMPLE.com")
	wantIDs("email in other capitals", found, luis.Id)
	found, _ = list("email=luis@example")
	wantIDs("part of an email", found)

	for _, q := range []string{"q=a", "q=" + strings.Repeat("a", 101)} {
		p := apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/customers?" + q, Token: m.Token}),
			http.StatusBadRequest, "Invalid request")
		if p.Errors == nil || len((*p.Errors)["query.q"]) == 0 {
			t.Errorf("%s: errors %v, want query.q", q[:min(len(q), 10)], p.Errors)
		}
	}
}

// A merge patch changes what it gives, clears what it sets to null and
// leaves the rest; an email another customer has is a 409 naming it, and
// email and taxExempt cannot be null.
func TestCustomerPatch(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	c := newCustomer(t, m, map[string]any{"email": "dana@example.com", "name": "Dana", "phone": "+15125550148",
		"address": map[string]any{"line1": "1 Main St", "city": "Austin"}})
	luis := newCustomer(t, m, map[string]any{"email": "luis@example.com"})
	patch := func(id uuid.UUID, body map[string]any) *apitest.Response {
		return env.Do(apitest.Request{Method: "PATCH", Path: "/customers/" + id.String(), Token: m.Token, Body: body})
	}
	r := patch(c.Id, map[string]any{"phone": nil, "company": "Whitfield Catering", "taxExempt": true, "address": nil})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("patch: %d %s", r.StatusCode, r.Body)
	}
	var got models.Customer
	r.JSON(t, &got)
	apitest.Want(t, "phone cleared", got.Phone == nil, true)
	apitest.Want(t, "address cleared", got.Address == nil, true)
	apitest.WantText(t, "company", got.Company, "Whitfield Catering")
	apitest.WantText(t, "name kept", got.Name, "Dana")
	apitest.Want(t, "email kept", got.Email, "dana@example.com")
	apitest.Want(t, "taxExempt", got.TaxExempt, true)
	apitest.Want(t, "updatedAt moved", got.UpdatedAt.After(c.UpdatedAt) || got.UpdatedAt.Equal(c.UpdatedAt), true)

	p := apitest.WantProblem(t, patch(luis.Id, map[string]any{"email": "DANA@example.com"}), http.StatusConflict, "Customer email taken")
	if p.ExistingId == nil || *p.ExistingId != c.Id {
		t.Errorf("existingId %v, want %s", p.ExistingId, c.Id)
	}
	for _, field := range []string{"email", "taxExempt"} {
		p := apitest.WantProblem(t, patch(c.Id, map[string]any{field: nil}), http.StatusBadRequest, "Invalid request")
		if p.Errors == nil || len((*p.Errors)[field]) == 0 {
			t.Errorf("%s: null: errors %v", field, p.Errors)
		}
	}
	p = apitest.WantProblem(t, patch(c.Id, map[string]any{"address": map[string]any{"line1": "1 Main St", "city": "Paris", "country": "EU"}}),
		http.StatusBadRequest, "Invalid request")
	if p.Errors == nil || len((*p.Errors)["address.country"]) == 0 {
		t.Errorf("country EU: errors %v", p.Errors)
	}
	apitest.WantProblem(t, patch(uuid.New(), map[string]any{"name": "X"}), http.StatusNotFound, "Not found")
	after := readCustomer(t, m, luis.Id)
	apitest.Want(t, "the refused patch changed nothing", after.Email, "luis@example.com")
}

// PATCH /customers/{id} takes a merge patch as application/merge-patch+json
// and as application/json alike (null clears, a key left out stays), and
// refuses any other type (415), nothing changed.
func TestCustomerPatchMediaTypes(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	c := newCustomer(t, m, map[string]any{"email": "dana@example.com", "name": "Dana", "phone": "+15125550148", "notes": "first"})
	patch := func(contentType string, body any) *apitest.Response {
		return env.Do(apitest.Request{Method: "PATCH", Path: "/customers/" + c.Id.String(), Token: m.Token, Body: body,
			Header: http.Header{"Content-Type": {contentType}}})
	}
	for _, tc := range []struct{ contentType, notes string }{
		{"application/merge-patch+json", "merge patch"},
		{"application/json", "plain JSON"},
	} {
		r := patch(tc.contentType, map[string]any{"notes": tc.notes, "phone": nil})
		if r.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.contentType, r.StatusCode, r.Body)
		}
		var got models.Customer
		r.JSON(t, &got)
		apitest.WantText(t, tc.contentType+": notes", got.Notes, tc.notes)
		apitest.Want(t, tc.contentType+": phone cleared", got.Phone == nil, true)
		apitest.WantText(t, tc.contentType+": name kept", got.Name, "Dana")
	}
	apitest.WantProblem(t, patch("application/merge-patch+json", map[string]any{"taxExempt": nil}), http.StatusBadRequest, "Invalid request")
	apitest.Want(t, "XML refused", patch("application/xml", "<notes/>").StatusCode, http.StatusUnsupportedMediaType)
	apitest.WantText(t, "the refused patches changed nothing", readCustomer(t, m, c.Id).Notes, "plain JSON")
}

// A customer with invoices is not deleted (422); one without is (204),
// then it is gone (404), with its event.
func TestCustomerDelete(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	dana := newCustomer(t, m, map[string]any{"email": "dana@example.com"})
	m.MustCreate(t, m.Body("INV-1", "10.00"))
	del := func(id uuid.UUID) *apitest.Response {
		return env.Do(apitest.Request{Method: "DELETE", Path: "/customers/" + id.String(), Token: m.Token})
	}
	apitest.WantProblem(t, del(dana.Id), http.StatusUnprocessableEntity, "Customer has invoices")
	apitest.Want(t, "still there", readCustomer(t, m, dana.Id).InvoiceCount, int32(1))

	luis := newCustomer(t, m, map[string]any{"email": "luis@example.com", "name": "Luis Ortega"})
	if r := del(luis.Id); r.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.StatusCode, r.Body)
	}
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/customers/" + luis.Id.String(), Token: m.Token}),
		http.StatusNotFound, "Not found")
	apitest.WantProblem(t, del(luis.Id), http.StatusNotFound, "Not found")

	var events []struct {
		Type string
		Data models.Customer
	}
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=customer.deleted", Token: m.Token}).JSON(t, &events)
	if len(events) != 1 || events[0].Data.Id != luis.Id || apitest.Text(events[0].Data.Name) != "Luis Ortega" {
		t.Errorf("customer.deleted events: %+v", events)
	}
}

// An invoice names its customer: with customerId its null customer fields
// come from the customer, another email is a 422, an unknown id a 422
// keyed customerId; without, its email finds the customer in any case or
// makes one. Every invoice carries customerId, the list filters by it,
// and the customer adds up its invoices.
func TestInvoiceCustomer(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	dana := newCustomer(t, m, map[string]any{"email": "dana@whitfield.example", "name": "Dana Whitfield", "company": "Whitfield Catering",
		"phone": "+15125550148"})

	b := m.Body("INV-1", "40.00")
	b["customerId"], b["customerEmail"], b["customerName"], b["delivery"] = dana.Id.String(), nil, nil, "text"
	inv := m.MustCreate(t, b)
	apitest.Want(t, "customerId", inv.CustomerId, dana.Id)
	apitest.WantText(t, "customerEmail from the customer", inv.CustomerEmail, "dana@whitfield.example")
	apitest.WantText(t, "customerName from the customer", inv.CustomerName, "Dana Whitfield")
	apitest.WantText(t, "customerPhone from the customer", inv.CustomerPhone, "+15125550148")

	b = m.Body("INV-2", "2.50")
	b["customerId"], b["customerEmail"], b["customerName"] = dana.Id.String(), "DANA@whitfield.example", "Accounts payable"
	second := m.MustCreate(t, b)
	apitest.WantText(t, "a name given applies to the invoice", second.CustomerName, "Accounts payable")
	apitest.WantText(t, "customer name kept", readCustomer(t, m, dana.Id).Name, "Dana Whitfield")

	b = m.Body("INV-3", "1.00")
	b["customerId"] = dana.Id.String() // customerEmail dana@example.com
	apitest.WantProblem(t, m.Create(t, b, nil), http.StatusUnprocessableEntity, "Customer email differs")
	b["customerId"], b["customerEmail"] = uuid.NewString(), nil
	unknown := apitest.WantProblem(t, m.Create(t, b, nil), http.StatusUnprocessableEntity, "Unknown customer")
	if !strings.Contains(unknown.Detail, "GET /customers") {
		t.Errorf("detail %q does not say where customers are listed", unknown.Detail)
	}
	b = m.Body("INV-3", "1.00")
	b["customerEmail"] = nil
	p := apitest.WantProblem(t, m.Create(t, b, nil), http.StatusBadRequest, "Invalid request")
	if p.Errors == nil || len((*p.Errors)["customerEmail"]) == 0 {
		t.Errorf("no customerId and no email: errors %v", p.Errors)
	}

	// By email alone: found in any case, or made.
	b = m.Body("INV-4", "7.25")
	b["customerEmail"] = "Dana@Whitfield.Example"
	apitest.Want(t, "found by email", m.MustCreate(t, b).CustomerId, dana.Id)
	b = m.Body("INV-5", "3.00")
	b["customerEmail"], b["customerCompany"] = "new@example.com", "New Co"
	made := m.MustCreate(t, b)
	if made.CustomerId == dana.Id {
		t.Fatal("a new email took another's customer")
	}
	nc := readCustomer(t, m, made.CustomerId)
	apitest.Want(t, "made customer's email", nc.Email, "new@example.com")
	apitest.WantText(t, "made customer's company", nc.Company, "New Co")
	apitest.WantText(t, "made customer's name", nc.Name, "Dana Whitfield")

	// The customer adds up its invoices; a cancelled one counts, without its balance.
	if r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + second.Id.String() + "/cancel", Token: m.Token}); r.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.StatusCode, r.Body)
	}
	got := readCustomer(t, m, dana.Id)
	apitest.Want(t, "invoiceCount", got.InvoiceCount, int32(3))
	apitest.Want(t, "openBalance", got.OpenBalance.Text('f'), "47.25")

	var mine []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests?customerId=" + dana.Id.String(), Token: m.Token}).JSON(t, &mine)
	if len(mine) != 3 {
		t.Fatalf("%d invoices of the customer, want 3", len(mine))
	}
	for _, i := range mine {
		apitest.Want(t, "listed invoice's customerId", i.CustomerId, dana.Id)
	}

	var created []struct {
		Data models.Customer
	}
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=customer.created", Token: m.Token}).JSON(t, &created)
	if len(created) != 2 {
		t.Errorf("%d customer.created events, want 2 (POST /customers, and the invoice to a new email)", len(created))
	}
	if r := env.Do(apitest.Request{Method: "PATCH", Path: "/customers/" + dana.Id.String(), Token: m.Token,
		Body: map[string]any{"notes": "VIP"}}); r.StatusCode != http.StatusOK {
		t.Fatalf("patch: %d %s", r.StatusCode, r.Body)
	}
	var updated []struct {
		Data models.Customer
	}
	env.Do(apitest.Request{Method: "GET", Path: "/events?type=customer.updated", Token: m.Token}).JSON(t, &updated)
	if len(updated) != 1 || apitest.Text(updated[0].Data.Notes) != "VIP" || updated[0].Data.InvoiceCount != 3 {
		t.Errorf("customer.updated events: %+v", updated)
	}
}

// A tax-exempt customer's invoice takes no tax: a taxed line is a 422
// keyed by its taxRate, whether the customer is named or found by email;
// untaxed lines are made.
func TestTaxExemptCustomer(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	exempt := newCustomer(t, m, map[string]any{"email": "dana@example.com", "taxExempt": true})
	taxed := apitest.Line(1, "100.00")
	taxed["taxRate"] = "8.25"
	b := m.Body("EX-1", "108.25", taxed)
	p := apitest.WantProblem(t, m.Create(t, b, nil), http.StatusUnprocessableEntity, "Customer is tax-exempt")
	if !strings.Contains(p.Detail, "taxRate") {
		t.Errorf("detail %q", p.Detail)
	}
	b["customerId"], b["customerEmail"] = exempt.Id.String(), nil
	apitest.WantProblem(t, m.Create(t, b, nil), http.StatusUnprocessableEntity, "Customer is tax-exempt")
	untaxed := apitest.Line(1, "100.00")
	untaxed["taxRate"] = "0"
	inv := m.MustCreate(t, m.Body("EX-2", "100.00", untaxed))
	apitest.Want(t, "untaxed invoice's customer", inv.CustomerId, exempt.Id)
	apitest.Want(t, "untaxed invoice's tax", inv.TaxAmount.Text('f'), "0.00")
	apitest.Want(t, "invoices of the customer", readCustomer(t, m, exempt.Id).InvoiceCount, int32(1))
}
