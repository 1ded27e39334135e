package signup

import (
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/web"
)

// page is what every template renders; each page fills what it shows.
type page struct {
	Title      string
	Stylesheet string
	// Reseller is the name at the top of its pages.
	Reseller string

	// The form.
	Open        bool // false: the reseller takes no applications
	Action      string
	CSRF        string
	Key         string
	Business    []fieldView
	EntityType  string
	EntityTypes [][2]string
	Address     []fieldView
	Owners      []ownerView
	Bank        []fieldView
	Consent     bool
	Signature   fieldView
	Errors      web.Errors
	// Cleared: secret fields were emptied, which the page says.
	Cleared bool

	// The thank-you page.
	Reference string

	// Message pages (not found, refused, failures).
	Heading    string
	Paragraphs []string
	Failed     bool
}

// Errored: the page shows an error (its title says so first).
func (p page) Errored() bool { return len(p.Errors) > 0 || p.Failed }

// fieldView is a text field as the page shows it.
type fieldView struct {
	input
	Value   string
	Cleared bool
	Errors  web.Errors
}

// ownerView is one owner section.
type ownerView struct {
	Number int // from 1
	Fields []fieldView
	// Expanded: a section after the first is shown open when it holds
	// anything (a value, an error).
	Expanded bool
}

// formPage is the form of p's reseller showing f.
func (h *handler) formPage(c echo.Context, p reseller.SignUpPage, f form) page {
	v := page{
		Title: "Apply to " + p.Name, Reseller: p.Name, Open: p.Open(), Action: "/apply/" + p.Slug,
		EntityType: f.get(entityTypeField), EntityTypes: reseller.EntityTypes, Consent: f.Consent,
	}
	if !v.Open {
		return v
	}
	v.CSRF = web.CSRFToken(c)
	v.Key = uuid.NewString()
	fields := func(in []input) []fieldView {
		out := make([]fieldView, len(in))
		for i, x := range in {
			out[i] = fieldView{input: x, Value: f.get(x.Name), Cleared: f.Cleared[x.Name]}
			v.Cleared = v.Cleared || out[i].Cleared
		}
		return out
	}
	v.Business, v.Address, v.Bank = fields(businessInputs), fields(addressInputs), fields(bankInputs)
	v.Signature = fields([]input{signatureInput})[0]
	for i := range ownerSections {
		o := ownerView{Number: i + 1, Fields: fields(ownerInputs(i))}
		o.Expanded = i == 0 || f.ownerFilled(i)
		v.Owners = append(v.Owners, o)
	}
	return v
}

// setErrors shows errs: in the summary, and beside each field.
func (p *page) setErrors(errs web.Errors) {
	p.Errors = errs
	for _, list := range [][]fieldView{p.Business, p.Address, p.Bank} {
		for i := range list {
			list[i].Errors = errs
		}
	}
	p.Signature.Errors = errs
	for k := range p.Owners {
		o := &p.Owners[k]
		for i := range o.Fields {
			o.Fields[i].Errors = errs
			o.Expanded = o.Expanded || errs.Of(o.Fields[i].Name) != "" || o.Fields[i].Cleared
		}
	}
}
