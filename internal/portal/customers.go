package portal

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// Customers (issue 39): /portal/customers lists and searches them
// (customer.Store.List, as GET /customers), /portal/customers/{id} shows
// one with its open balance, invoices and saved cards; members with
// payments.create make, change and delete them (Create, Update, Delete)
// and remove their saved cards (payment.Store.DeleteSavedCard), each
// audited by the domain in the change's transaction.

const customersPath = "/portal/customers"

// customerLine is a customer as the list's row shows it, its text made
// before the template runs (as invoiceLine).
type customerLine struct {
	ID, Email, Name, Company, OpenBalance string
	Invoices                              int
	Created                               template.HTML
}

func customerLineOf(cu customer.Customer, zone *time.Location) customerLine {
	return customerLine{ID: cu.ID.String(), Email: cu.Email, Name: text(cu.Name), Company: text(cu.Company),
		OpenBalance: invoice.Money(cu.OpenBalance), Invoices: cu.InvoiceCount, Created: moment(cu.CreatedAt, zone)}
}

func text(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type customersData struct {
	listData[customerLine]
	CanCreate bool
}

// customers is GET /portal/customers: newest first, a page at a time,
// q searching any part of the name, company or email; ?format=csv
// exports them all.
func (h *handler) customers(c echo.Context) error {
	m := visitOf(c).Membership
	q, err := h.listQuery(c)
	if err != nil {
		return h.failure(c, err)
	}
	f := customer.Filter{Q: q.Text("q", customer.MaxQ)}
	data := customersData{CanCreate: m.Can(auth.PaymentsCreate)}
	if !q.Failed() {
		list := func(ctx context.Context, limit int, cursor string) ([]customer.Customer, string, error) {
			list, next, err := h.Customers.List(ctx, m.OrganizationID, f, limit, cursor)
			if e := rule.As(err); e != nil && e.Kind == rule.Invalid && !errors.Is(err, keyset.ErrInvalid) {
				q.Errors.Add("q", "Enter "+strconv.Itoa(customer.MinQ)+" to "+strconv.Itoa(customer.MaxQ)+" characters to search.")
				return nil, "", nil
			}
			return list, next, err
		}
		if q.CSV {
			return streamCSV(h, c, csvExport[customer.Customer]{Name: "customers", Zone: q.Zone, Columns: customerColumns(q.Zone), Page: list})
		}
		row := func(cu customer.Customer) customerLine { return customerLineOf(cu, q.Zone) }
		if err := fillList(c.Request().Context(), q, &data.listData, customersPath, list, row); err != nil {
			return h.failure(c, err)
		}
	}
	if q.Failed() {
		return h.renderList(c, q, "customers", "Customers", data)
	}
	return h.renderDone(c, "customers", q.Page("Customers", data), map[string]string{"deleted": "The customer was deleted."})
}

// customerColumns are the customers' CSV: the API's names for its fields.
func customerColumns(zone *time.Location) []csvColumn[customer.Customer] {
	return []csvColumn[customer.Customer]{
		{"id", func(cu customer.Customer) string { return cu.ID.String() }},
		{"email", func(cu customer.Customer) string { return cu.Email }},
		{"name", func(cu customer.Customer) string { return text(cu.Name) }},
		{"company", func(cu customer.Customer) string { return text(cu.Company) }},
		{"phone", func(cu customer.Customer) string { return text(cu.Phone) }},
		{"taxExempt", func(cu customer.Customer) string { return strconv.FormatBool(cu.TaxExempt) }},
		{"openBalance", func(cu customer.Customer) string { return cu.OpenBalance.Text('f') }},
		{"invoiceCount", func(cu customer.Customer) string { return strconv.Itoa(cu.InvoiceCount) }},
		{"createdAt", func(cu customer.Customer) string { return csvTime(&cu.CreatedAt, zone) }},
	}
}

// customerFields are the form's fields in order: the address's members
// by their own names (the domain keys them address.line1, …).
var customerFields = []string{"email", "name", "company", "phone", "line1", "line2", "city", "state", "postalCode", "country", "taxExempt", "notes"}

// customerWords are the form's messages in the page's words, by field.
var customerWords = map[string]string{
	"email":      "Enter the customer's email address, such as dana@example.com, of at most 254 characters.",
	"name":       "Enter a name of at most 200 characters.",
	"company":    "Enter a company of at most 200 characters.",
	"phone":      "Enter a phone number of at most 32 characters.",
	"line1":      "Enter the street address (1 to 200 characters), or leave the whole address empty.",
	"line2":      "Enter at most 200 characters.",
	"city":       "Enter the city (1 to 100 characters), or leave the whole address empty.",
	"state":      "Enter at most 100 characters.",
	"postalCode": "Enter a postal code of at most 20 characters.",
	"country":    "Enter the country's two-letter code in capitals, such as US, CA or GB.",
	"notes":      "Enter notes of at most 2,000 characters.",
}

// inPageWords is r with its fields named as the form names them (an
// address's members by their own names) and their messages in the page's
// words, by field; a refusal of no field stays as it is.
func inPageWords(r *rule.Error, words map[string]string) *rule.Error {
	if len(r.Fields) == 0 {
		return r
	}
	out := *r
	out.Fields = map[string][]string{}
	for field, msgs := range r.Fields {
		field = strings.TrimPrefix(field, "address.")
		if w, ok := words[field]; ok {
			msgs = []string{w}
		}
		out.Fields[field] = msgs
	}
	return &out
}

// customerFormValues are a customer's fields as its form shows them.
func customerFormValues(cu customer.Customer) url.Values {
	v := url.Values{"email": {cu.Email}, "name": {text(cu.Name)}, "company": {text(cu.Company)}, "phone": {text(cu.Phone)},
		"notes": {text(cu.Notes)}}
	if a := cu.Address; a != nil {
		v.Set("line1", a.Line1)
		v.Set("line2", text(a.Line2))
		v.Set("city", a.City)
		v.Set("state", text(a.State))
		v.Set("postalCode", text(a.PostalCode))
		v.Set("country", a.Country)
	}
	if cu.TaxExempt {
		v.Set("taxExempt", "on")
	}
	return v
}

// customerOfForm reads the form: empty text is no value, an address none
// of whose fields is filled is no address.
func customerOfForm(f url.Values) customer.Fields {
	get := func(name string) *string {
		s := strings.TrimSpace(f.Get(name))
		if s == "" {
			return nil
		}
		return &s
	}
	out := customer.Fields{Email: strings.TrimSpace(f.Get("email")), Name: get("name"), Company: get("company"), Phone: get("phone"),
		Notes: get("notes"), TaxExempt: f.Get("taxExempt") == "on"}
	a := customer.Address{Line1: strings.TrimSpace(f.Get("line1")), Line2: get("line2"), City: strings.TrimSpace(f.Get("city")),
		State: get("state"), PostalCode: get("postalCode"), Country: strings.TrimSpace(f.Get("country"))}
	if a.Line1 != "" || a.Line2 != nil || a.City != "" || a.State != nil || a.PostalCode != nil || a.Country != "" {
		out.Address = &a
	}
	return out
}

type customerFormData struct {
	// ID is the customer changed; "" for a new one.
	ID      string
	Heading string
	// Existing is the customer whose email was sent, after that refusal.
	Existing string
}

func customerForm(id, heading string, form url.Values) *formPage {
	return &formPage{name: "customer-form", fields: customerFields,
		page: page{Title: heading, Form: form, Data: customerFormData{ID: id, Heading: heading}}}
}

func customerActor(c echo.Context) customer.Actor {
	return customer.Actor{OrganizationID: visitOf(c).Membership.OrganizationID, Audit: actor(c).Audit()}
}

// newCustomer is GET /portal/customers/new.
func (h *handler) newCustomer(c echo.Context) error {
	f := customerForm("", "New customer", url.Values{idempotencyField: {newFormKey()}, "country": {customer.DefaultCountry}})
	return h.render(c, http.StatusOK, f.name, f.page)
}

// createCustomer is POST /portal/customers: the form's fields and its
// one-time key (the form sent twice makes one customer).
func (h *handler) createCustomer(c echo.Context) error {
	f := c.Request().PostForm
	form := customerForm("", "New customer", f)
	key := f.Get(idempotencyField)
	cu, _, err := h.Customers.Create(c.Request().Context(), customerActor(c), customerOfForm(f), &key)
	if err != nil {
		return h.customerRefused(c, keyRefusal(err, form, idempotencyField, "made a customer"), form)
	}
	return c.Redirect(http.StatusSeeOther, customersPath+"/"+cu.ID.String()+"?done=created")
}

// customerRefused answers a refusal of the customer's form: an email
// another customer has links to that customer.
func (h *handler) customerRefused(c echo.Context, err error, form *formPage) error {
	r := rule.As(err)
	if r == nil {
		return h.failure(c, err)
	}
	if r.Kind == rule.Taken {
		form.page.Errors.Add("email", "Another customer has this email address.")
		if id, ok := parseID(r.Existing); ok {
			d := form.page.Data.(customerFormData)
			d.Existing = id.String()
			form.page.Data = d
		}
		return h.render(c, http.StatusConflict, form.name, form.page)
	}
	return h.refused(c, inPageWords(r, customerWords), form)
}

// customerOf reads the customer of the path's id; an id that is not a
// uuid, unknown or another organization's is customer.ErrNotFound.
func (h *handler) customerOf(c echo.Context) (customer.Customer, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return customer.Customer{}, customer.ErrNotFound
	}
	return h.Customers.Get(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
}

// savedCardLine is a saved card as the customer's page shows it.
type savedCardLine struct {
	ID, Label, Expiry string
	Saved             template.HTML
	SavedBy           string
}

// expiry is a card's MMYY expiry as people read it: 12/28.
func expiry(mmyy *string) string {
	if mmyy == nil || len(*mmyy) != 4 {
		return text(mmyy)
	}
	return (*mmyy)[:2] + "/" + (*mmyy)[2:]
}

type customerData struct {
	listData[invoiceLine]
	ID, Email, Name, Company, Phone, Notes, Prefers string
	Address                                         []string
	TaxExempt                                       bool
	OpenBalance                                     string
	InvoiceCount                                    int
	Cards                                           []savedCardLine
	Created                                         template.HTML
	CanChange                                       bool
}

// Heading is how the page names the customer: its name, else its company,
// else its email.
func (d customerData) Heading() string {
	switch {
	case d.Name != "":
		return d.Name
	case d.Company != "":
		return d.Company
	}
	return d.Email
}

var customerNotices = map[string]string{
	"created":     "The customer was made.",
	"saved":       "The customer was saved.",
	"cardRemoved": "The saved card was removed.",
}

// customerPage is GET /portal/customers/{id}: the customer's details,
// open balance, saved cards and invoices (newest first, paged).
func (h *handler) customerPage(c echo.Context) error {
	cu, err := h.customerOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	m := visitOf(c).Membership
	q, err := h.listQuery(c)
	if err != nil {
		return h.failure(c, err)
	}
	d := customerData{ID: cu.ID.String(), Email: cu.Email, Name: text(cu.Name), Company: text(cu.Company), Phone: text(cu.Phone),
		Notes: text(cu.Notes), TaxExempt: cu.TaxExempt, OpenBalance: invoice.Money(cu.OpenBalance), InvoiceCount: cu.InvoiceCount,
		Created: moment(cu.CreatedAt, q.Zone), CanChange: m.Can(auth.PaymentsCreate)}
	if cu.Prefers != nil {
		d.Prefers = channelLabel(*cu.Prefers)
	}
	if a := cu.Address; a != nil {
		d.Address = addressLines(*a)
	}
	for _, sc := range cu.SavedCards {
		d.Cards = append(d.Cards, savedCardLine{ID: sc.Id.String(), Label: payment.CardLabel(sc.CardBrand, sc.LastFour), Expiry: expiry(sc.Expiry),
			Saved: moment(sc.SavedAt, q.Zone), SavedBy: sc.SavedByName})
	}
	if !q.Failed() {
		zones, err := h.zones(c)
		if err != nil {
			return h.failure(c, err)
		}
		list := func(ctx context.Context, limit int, cursor string) ([]invoice.Invoice, string, error) {
			return h.Invoices.List(ctx, m.OrganizationID, invoice.Filter{CustomerID: &cu.ID}, limit, cursor)
		}
		now := h.Now()
		row := func(inv invoice.Invoice) invoiceLine { return lineOf(rowOf(inv, zones[inv.MerchantAccountID], now)) }
		if err := fillList(c.Request().Context(), q, &d.listData, customersPath+"/"+d.ID, list, row); err != nil {
			return h.failure(c, err)
		}
	}
	p := page{Title: d.Heading(), Errors: q.Errors, Data: d}
	if q.Failed() {
		return h.render(c, http.StatusBadRequest, "customer", p)
	}
	return h.renderDone(c, "customer", p, customerNotices)
}

// addressLines are an address as its lines are written.
func addressLines(a customer.Address) []string {
	out := []string{a.Line1}
	if a.Line2 != nil {
		out = append(out, *a.Line2)
	}
	city := a.City
	if a.State != nil {
		city += ", " + *a.State
	}
	if a.PostalCode != nil {
		city += " " + *a.PostalCode
	}
	return append(out, city, a.Country)
}

// editCustomerPage is GET /portal/customers/{id}/edit.
func (h *handler) editCustomerPage(c echo.Context) error {
	cu, err := h.customerOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := customerForm(cu.ID.String(), "Edit "+cu.Email, customerFormValues(cu))
	return h.render(c, http.StatusOK, f.name, f.page)
}

// editCustomer is POST /portal/customers/{id}/edit: every field of the
// form set as sent (an empty one cleared).
func (h *handler) editCustomer(c echo.Context) error {
	cu, err := h.customerOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	v := customerOfForm(f)
	p := customer.Patch{Email: &v.Email, TaxExempt: &v.TaxExempt,
		Name: customer.Change[string]{Set: true, Value: v.Name}, Company: customer.Change[string]{Set: true, Value: v.Company},
		Phone: customer.Change[string]{Set: true, Value: v.Phone}, Notes: customer.Change[string]{Set: true, Value: v.Notes},
		Address: customer.Change[customer.Address]{Set: true, Value: v.Address}}
	if _, err := h.Customers.Update(c.Request().Context(), customerActor(c), cu.ID, p); err != nil {
		if rule.Is(err, rule.NotFound) {
			return h.notFound(c)
		}
		return h.customerRefused(c, err, customerForm(cu.ID.String(), "Edit "+cu.Email, f))
	}
	return c.Redirect(http.StatusSeeOther, customersPath+"/"+cu.ID.String()+"?done=saved")
}

// confirmData is a confirmation page: what is about to be done, and the
// form doing it.
type confirmData struct {
	Heading, Text, Action, Button, Back string
}

// deleteCustomerPage is GET /portal/customers/{id}/delete: the
// confirmation (a customer with invoices is refused when it is sent, in
// the domain's words).
func (h *handler) deleteCustomerPage(c echo.Context) error {
	cu, err := h.customerOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return h.render(c, http.StatusOK, "customer-confirm", deleteConfirm(cu))
}

func deleteConfirm(cu customer.Customer) page {
	path := customersPath + "/" + cu.ID.String()
	what := "The customer " + cu.Email + " is deleted"
	if n := len(cu.SavedCards); n > 0 {
		what += ", and its " + strconv.Itoa(n) + " saved cards removed at the card processor"
	}
	return page{Title: "Delete the customer " + cu.Email, Data: confirmData{Heading: "Delete the customer " + cu.Email + "?",
		Text: what + ". This cannot be undone.", Action: path + "/delete", Button: "Delete the customer", Back: path}}
}

// deleteCustomer is POST /portal/customers/{id}/delete.
func (h *handler) deleteCustomer(c echo.Context) error {
	cu, err := h.customerOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	err = h.Customers.Delete(c.Request().Context(), customerActor(c), cu.ID)
	switch r := rule.As(err); {
	case err == nil:
		return c.Redirect(http.StatusSeeOther, customersPath+"?done=deleted")
	case r != nil && r.Kind == rule.NotFound:
		return h.notFound(c)
	case r != nil:
		p := deleteConfirm(cu)
		p.Alert = r.Message
		return h.render(c, r.Kind.Status(), "customer-confirm", p)
	case web.OutageOf(err) == web.Processor:
		p := deleteConfirm(cu)
		p.Alert = "The card processor did not confirm the removal of the customer's saved cards, so the customer is kept. Try again later."
		return h.render(c, http.StatusBadGateway, "customer-confirm", p)
	}
	return h.failure(c, err)
}

// customerCard is the customer of the path and its saved card of the
// path's cardId; a card that is not the customer's is ErrCardNotFound.
func (h *handler) customerCard(c echo.Context) (customer.Customer, savedCardLine, error) {
	cu, err := h.customerOf(c)
	if err != nil {
		return cu, savedCardLine{}, err
	}
	id, ok := parseID(c.Param("cardId"))
	for _, sc := range cu.SavedCards {
		if ok && sc.Id == id {
			return cu, savedCardLine{ID: id.String(), Label: payment.CardLabel(sc.CardBrand, sc.LastFour), Expiry: expiry(sc.Expiry)}, nil
		}
	}
	return cu, savedCardLine{}, payment.ErrCardNotFound
}

func removeCardConfirm(cu customer.Customer, card savedCardLine) page {
	path := customersPath + "/" + cu.ID.String()
	return page{Title: "Remove the saved card " + card.Label, Data: confirmData{Heading: "Remove the saved card " + card.Label + "?",
		Text: "The card " + card.Label + ", expiring " + card.Expiry + ", is removed for " + cu.Email +
			" here and at the card processor: it can no longer be charged without the customer entering it again.",
		Action: path + "/cards/" + card.ID + "/remove", Button: "Remove the card", Back: path}}
}

// removeCardPage is GET /portal/customers/{id}/cards/{cardId}/remove:
// the confirmation.
func (h *handler) removeCardPage(c echo.Context) error {
	cu, card, err := h.customerCard(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return h.render(c, http.StatusOK, "customer-confirm", removeCardConfirm(cu, card))
}

// removeCard is POST /portal/customers/{id}/cards/{cardId}/remove.
func (h *handler) removeCard(c echo.Context) error {
	cu, card, err := h.customerCard(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	id := uuid.MustParse(card.ID)
	err = h.Payments.DeleteSavedCard(c.Request().Context(), cu.OrganizationID, id, actor(c).Audit())
	switch {
	case err == nil:
		return c.Redirect(http.StatusSeeOther, customersPath+"/"+cu.ID.String()+"?done=cardRemoved")
	case web.OutageOf(err) == web.Processor:
		p := removeCardConfirm(cu, card)
		p.Alert = "The card processor did not confirm the removal, so the card is kept. Try again later."
		return h.render(c, http.StatusBadGateway, "customer-confirm", p)
	}
	return h.answer(c, err, nil)
}
