// Package customer keeps an organization's customers: who its invoices
// are to, each with an email unique within the organization (compared
// without regard to case, kept as sent), the details invoices take from
// it, whether it pays tax, and the way it asked on the pay page to get its
// invoices.
//
// It owns the table customers. What other packages keep of a customer is
// theirs, read through the interfaces a Store is given: its invoices'
// totals (package invoice, Invoices) and its saved cards (package payment,
// Cards). Invoice creation finds or makes the invoice's customer inside
// its own transaction (ForInvoice, Ensure); the pay page records the
// customer's choice (SetPrefers).
package customer

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"golang.org/x/text/language"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/mailaddr"
	"github.com/payreq/payreq/internal/rule"
)

// Address is a customer's postal address.
type Address struct {
	Line1      string  `json:"line1"`
	Line2      *string `json:"line2"`
	City       string  `json:"city"`
	State      *string `json:"state"`
	PostalCode *string `json:"postalCode"`
	// Country is an ISO 3166-1 alpha-2 code; DefaultCountry when not given.
	Country string `json:"country"`
}

// DefaultCountry is an address's country when none is given.
const DefaultCountry = "US"

// Customer is a stored customer.
type Customer struct {
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Email          string
	Name           *string
	Company        *string
	Phone          *string
	Address        *Address
	TaxExempt      bool
	Notes          *string
	// Prefers is the customer's own choice from the pay page (email or
	// text), nil when none was stated.
	Prefers   *string
	CreatedAt time.Time
	UpdatedAt time.Time

	// What others keep of the customer, filled by the Store's reads.
	OpenBalance  apd.Decimal
	InvoiceCount int
	SavedCards   []models.SavedCard
}

// Fields are a customer as a client gives it.
type Fields struct {
	Email     string
	Name      *string
	Company   *string
	Phone     *string
	Address   *Address
	TaxExempt bool
	Notes     *string
}

// Change is one member of a patch: left as it is unless Set; set to
// Value, where nil clears it.
type Change[T any] struct {
	Set   bool
	Value *T
}

// Patch is a merge patch of a customer: what is not set stays.
type Patch struct {
	Email     *string
	Name      Change[string]
	Company   Change[string]
	Phone     Change[string]
	Address   Change[Address]
	TaxExempt *bool
	Notes     Change[string]
}

// apply is f with the patch applied.
func (p Patch) apply(f Fields) Fields {
	set := func(to **string, c Change[string]) {
		if c.Set {
			*to = c.Value
		}
	}
	if p.Email != nil {
		f.Email = *p.Email
	}
	set(&f.Name, p.Name)
	set(&f.Company, p.Company)
	set(&f.Phone, p.Phone)
	set(&f.Notes, p.Notes)
	if p.Address.Set {
		f.Address = p.Address.Value
	}
	if p.TaxExempt != nil {
		f.TaxExempt = *p.TaxExempt
	}
	return f
}

// fields are the customer's own fields, as a patch changes them.
func (c Customer) fields() Fields {
	return Fields{Email: c.Email, Name: c.Name, Company: c.Company, Phone: c.Phone, Address: c.Address,
		TaxExempt: c.TaxExempt, Notes: c.Notes}
}

// Validate checks every rule of a customer's fields: an Invalid
// *rule.Error names every value refused, keyed as the API names it
// ("address.country"). A missing address country becomes DefaultCountry.
func Validate(f *Fields) error {
	v := map[string][]string{}
	add := func(field, msg string) { v[field] = append(v[field], msg) }
	length := func(field string, s *string, min, max int) {
		switch {
		case s == nil:
		case !utf8.ValidString(*s):
			add(field, "must be valid UTF-8 text")
		case utf8.RuneCountInString(*s) < min || utf8.RuneCountInString(*s) > max:
			add(field, fmt.Sprintf("must be %d to %d characters", min, max))
		}
	}
	switch {
	case strings.TrimSpace(f.Email) == "":
		add("email", "is required")
	case len(f.Email) > 254 || !mailaddr.Valid(f.Email):
		add("email", "must be a valid email address of at most 254 characters")
	}
	length("name", f.Name, 0, 200)
	length("company", f.Company, 0, 200)
	length("phone", f.Phone, 0, 32)
	length("notes", f.Notes, 0, 2000)
	if a := f.Address; a != nil {
		length("address.line1", &a.Line1, 1, 200)
		length("address.line2", a.Line2, 0, 200)
		length("address.city", &a.City, 1, 100)
		length("address.state", a.State, 0, 100)
		length("address.postalCode", a.PostalCode, 0, 20)
		if a.Country == "" {
			a.Country = DefaultCountry
		} else if !isCountry(a.Country) {
			add("address.country", "must be the ISO 3166-1 alpha-2 code of a country, in capitals (US, CA, GB)")
		}
	}
	if len(v) > 0 {
		return rule.InvalidFields(v)
	}
	return nil
}

// isCountry says whether code is an ISO 3166-1 alpha-2 code of a country.
func isCountry(code string) bool {
	if len(code) != 2 || strings.ToUpper(code) != code {
		return false
	}
	r, err := language.ParseRegion(code)
	return err == nil && r.IsCountry() && r.String() == code
}

// ErrNotFound: no such customer in the caller's organization.
var ErrNotFound = rule.New(rule.NotFound, "", "Customer not found", "No customer with this id exists in your organization.")

// emailTaken is the refusal of an email another customer of the
// organization has.
func emailTaken(email string, existing uuid.UUID) *rule.Error {
	e := rule.Newf(rule.Taken, "email", "Customer email taken",
		"Another customer of your organization has the email %s; existingId is that customer.", email)
	if existing != uuid.Nil {
		e.Existing = existing.String()
	}
	return e
}

// Model is the customer as the API answers it and its events carry it.
func (c Customer) Model() models.Customer {
	out := models.Customer{Id: c.ID, Email: c.Email, Name: c.Name, Company: c.Company, Phone: c.Phone,
		TaxExempt: c.TaxExempt, Notes: c.Notes, Prefers: (*models.Delivery)(c.Prefers),
		OpenBalance: jsonnum.Decimal{Decimal: cents(c.OpenBalance)}, InvoiceCount: int32(c.InvoiceCount),
		SavedCards: c.SavedCards, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if out.SavedCards == nil {
		out.SavedCards = []models.SavedCard{}
	}
	if a := c.Address; a != nil {
		country := a.Country
		out.Address = &models.CustomerAddress{Line1: a.Line1, Line2: a.Line2, City: a.City, State: a.State,
			PostalCode: a.PostalCode, Country: &country}
	}
	return out
}

// cents is d with two decimal places, as money is shown.
func cents(d apd.Decimal) apd.Decimal {
	var out apd.Decimal
	_, _ = apd.BaseContext.WithPrecision(34).Quantize(&out, &d, -2)
	return out
}
