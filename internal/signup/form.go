package signup

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// The form's field names are the application file's keys, dotted, owners
// by index (decisions.md), so that a refusal's Fields name them as they
// are.
const (
	consentField   = "consent"
	signatureField = "signature"
	keyField       = "key" // the form's one-time key (reseller.Submission.Key)
)

// ownerSections is how many owner sections the form has: as many as an
// application may name, so that it works without JavaScript.
const ownerSections = reseller.MaxOwners

// input describes one text field of the form.
type input struct {
	Name         string
	Label        string
	Hint         string
	Autocomplete string
	InputMode    string
	Max          int
	// Required on the page (the browser asks before sending); the domain
	// decides what is required, this only saves a round trip.
	Required bool
	// Secret: the tax id, an SSN, the account number, never sent back to
	// the browser.
	Secret bool
}

var (
	businessInputs = []input{
		{Name: "business.legalName", Label: "Legal name", Hint: "As registered, for example Cedar Street Auto Repair LLC",
			Autocomplete: "organization", Max: 200, Required: true},
		{Name: "business.dbaName", Label: "Trading name (DBA), if any", Hint: "The name your customers know, when it differs",
			Autocomplete: "off", Max: 200},
		// Room for the dashes people type, so that they are told, not cut.
		{Name: "business.taxId", Label: "Tax id (EIN)", Hint: "9 digits, without the dash", Autocomplete: "off",
			InputMode: "numeric", Max: 11, Required: true, Secret: true},
		{Name: "business.phone", Label: "Phone, if any", Autocomplete: "tel", InputMode: "tel", Max: 32},
		{Name: "business.email", Label: "Email", Hint: "Where we write to you about this application",
			Autocomplete: "email", InputMode: "email", Max: 254, Required: true},
		{Name: "business.website", Label: "Website, if any", Autocomplete: "url", InputMode: "url", Max: 500},
	}
	addressInputs = []input{
		{Name: "business.address.line1", Label: "Street address", Autocomplete: "address-line1", Max: 200, Required: true},
		{Name: "business.address.line2", Label: "Suite, unit or floor, if any", Autocomplete: "address-line2", Max: 200},
		{Name: "business.address.city", Label: "City", Autocomplete: "address-level2", Max: 200, Required: true},
		{Name: "business.address.state", Label: "State", Autocomplete: "address-level1", Max: 64, Required: true},
		{Name: "business.address.postalCode", Label: "ZIP code", Autocomplete: "postal-code", InputMode: "numeric", Max: 64, Required: true},
	}
	bankInputs = []input{
		{Name: "bank.routingNumber", Label: "Routing number", Hint: "9 digits, printed at the bottom left of your checks",
			Autocomplete: "off", InputMode: "numeric", Max: 9, Required: true},
		{Name: "bank.accountNumber", Label: "Account number", Hint: "4 to 17 digits", Autocomplete: "off",
			InputMode: "numeric", Max: 17, Required: true, Secret: true},
	}
	signatureInput = input{Name: signatureField, Label: "Your full name, as your signature", Autocomplete: "name", Max: 200, Required: true}
)

// ownerInputs are the fields of owner section i (from 0).
func ownerInputs(i int) []input {
	p := fmt.Sprintf("owners.%d.", i)
	first := i == 0
	return []input{
		{Name: p + "name", Label: "Full name", Autocomplete: "off", Max: 200, Required: first},
		{Name: p + "title", Label: "Title", Hint: "For example Owner, Managing member, President", Autocomplete: "off", Max: 200, Required: first},
		{Name: p + "ownershipPercent", Label: "Share of the business owned (%)", Hint: "0 to 100, for example 60 or 33.33",
			Autocomplete: "off", InputMode: "decimal", Max: 8, Required: first},
		{Name: p + "ssn", Label: "Social Security number", Hint: "9 digits, without dashes", Autocomplete: "off",
			InputMode: "numeric", Max: 11, Required: first, Secret: true},
	}
}

const entityTypeField = "business.entityType"

// fieldOrder is every field in the order of the page, for the summary of
// errors.
var fieldOrder = func() []string {
	var names []string
	add := func(in []input) {
		for _, f := range in {
			names = append(names, f.Name)
		}
	}
	add(businessInputs[:2])
	names = append(names, entityTypeField)
	add(businessInputs[2:])
	add(addressInputs)
	names = append(names, "owners")
	for i := range ownerSections {
		add(ownerInputs(i))
	}
	add(bankInputs)
	return append(names, consentField, signatureField)
}()

// labels name each field in the words of its label, for messages that read
// on their own in the summary above the form as beside the field.
var labels = func() map[string]string {
	m := map[string]string{
		entityTypeField: "Type of business", "owners": "The owners", consentField: "Consent", signatureField: "Your signature",
		"business.dbaName": "Trading name", "business.phone": "Phone", "business.website": "Website",
		"business.address.line2": "Suite, unit or floor",
	}
	for _, in := range [][]input{businessInputs, addressInputs, bankInputs} {
		for _, f := range in {
			if _, ok := m[f.Name]; !ok {
				m[f.Name] = f.Label
			}
		}
	}
	for i := range ownerSections {
		p := fmt.Sprintf("owners.%d.", i)
		for field, label := range map[string]string{"name": "full name", "title": "title",
			"ownershipPercent": "share of the business", "ssn": "Social Security number"} {
			m[p+field] = fmt.Sprintf("Owner %d's %s", i+1, label)
		}
	}
	return m
}()

// form is the form as posted, by field name.
type form struct {
	Values  url.Values
	Consent bool
	// Cleared names the secret fields that held a value not sent back.
	Cleared map[string]bool
}

func readForm(v url.Values) form {
	return form{Values: v, Consent: v.Get(consentField) == "on"}
}

func (f form) get(name string) string { return f.Values.Get(name) }

// ownerFilled reports whether owner section i holds anything.
func (f form) ownerFilled(i int) bool {
	for _, in := range ownerInputs(i) {
		if strings.TrimSpace(f.get(in.Name)) != "" {
			return true
		}
	}
	return false
}

// submission is what the form asks for. Owner sections left empty are no
// owners; sections[k] is the section of the application's owner k.
func (f form) submission(to reseller.SignUpPage) (s reseller.Submission, sections []int) {
	b := reseller.Business{
		LegalName: f.get("business.legalName"), DBAName: f.get("business.dbaName"), EntityType: f.get(entityTypeField),
		TaxID: f.get("business.taxId"), Phone: optional.String(f.get("business.phone")), Email: f.get("business.email"),
		Website: optional.String(f.get("business.website")),
		Address: reseller.Address{Line1: f.get("business.address.line1"), Line2: optional.String(f.get("business.address.line2")),
			City: f.get("business.address.city"), State: f.get("business.address.state"),
			PostalCode: f.get("business.address.postalCode")},
	}
	var owners []reseller.Owner
	for i := range ownerSections {
		if !f.ownerFilled(i) {
			continue
		}
		p := fmt.Sprintf("owners.%d.", i)
		owners = append(owners, reseller.Owner{Name: f.get(p + "name"), Title: f.get(p + "title"),
			OwnershipPercent: reseller.Percent(f.get(p + "ownershipPercent")), SSN: f.get(p + "ssn")})
		sections = append(sections, i)
	}
	return reseller.Submission{
		Reseller:    to.ResellerID,
		Application: reseller.NewApplication{Business: b, Owners: owners, Bank: reseller.Bank{RoutingNumber: f.get("bank.routingNumber"), AccountNumber: f.get("bank.accountNumber")}},
		Signature:   &reseller.Signature{Consent: f.Consent, Name: f.get(signatureField)},
		Key:         f.key(),
	}, sections
}

// key is the form's one-time key: a uuid, as the page renders it; anything
// else is no key (never text a client made up, stored).
func (f form) key() string {
	k, err := uuid.Parse(f.get(keyField))
	if err != nil {
		return ""
	}
	return k.String()
}

// redisplay is the form shown again after a refusal: every value kept but
// the tax id, the SSNs and the account number, which are never sent back.
func (f form) redisplay() form {
	out := form{Values: url.Values{}, Consent: f.Consent, Cleared: map[string]bool{}}
	for _, name := range fieldOrder {
		out.Values.Set(name, f.get(name))
	}
	for _, name := range secretFields() {
		if f.get(name) != "" {
			out.Cleared[name] = true
		}
		out.Values.Del(name)
	}
	return out
}

func secretFields() []string {
	var names []string
	all := slices.Concat(businessInputs, bankInputs)
	for i := range ownerSections {
		all = append(all, ownerInputs(i)...)
	}
	for _, in := range all {
		if in.Secret {
			names = append(names, in.Name)
		}
	}
	return names
}

// errorsOf is an Invalid refusal as the page shows it: each message after
// its field's label, in the order of the page, owners named by their
// section (sections maps the application's owners to them).
func errorsOf(e *rule.Error, sections []int) web.Errors {
	labelled := map[string][]string{}
	for _, field := range slices.Sorted(maps.Keys(e.Fields)) {
		name := field
		if rest, ok := strings.CutPrefix(field, "owners."); ok {
			if k, sub, ok := strings.Cut(rest, "."); ok {
				if n, err := strconv.Atoi(k); err == nil && n < len(sections) {
					name = fmt.Sprintf("owners.%d.%s", sections[n], sub)
				}
			}
		}
		label := labels[name]
		if label == "" {
			label = name
		}
		for _, msg := range e.Fields[field] {
			labelled[name] = append(labelled[name], label+" "+msg+".")
		}
	}
	return web.FromRule(&rule.Error{Kind: rule.Invalid, Fields: labelled}, fieldOrder)
}
