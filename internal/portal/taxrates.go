package portal

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/cockroachdb/apd/v3"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/rule"
)

// The organization's named tax rates (issue 39), which the invoice
// editor offers for its lines: /portal/settings/tax-rates lists them and
// adds one, /portal/settings/tax-rates/{id} renames or changes one and
// removes it (invoice.Store.AddTaxRate, ChangeTaxRate, RemoveTaxRate,
// audited there). Owners and Admins only. A line keeps its own rate, so
// no invoice changes with them.

const taxRatesPath = "/portal/settings/tax-rates"

var taxRateFields = []string{"name", "rate"}

// taxRateWords are the refusals in the page's words, by field.
var taxRateWords = map[string]string{
	"name": "Enter a name of 1 to 100 characters, such as Sales tax.",
	"rate": "Enter the rate as a percent from 0 to 100 with at most 4 decimal places, such as 8.25.",
}

// taxRateOfForm reads the form's rate: what is no number is refused
// beside it here, every rule of it is the domain's.
func taxRateOfForm(f url.Values, form *formPage) (apd.Decimal, bool) {
	var rate apd.Decimal
	s := strings.TrimSuffix(strings.TrimSpace(f.Get("rate")), "%")
	if _, _, err := rate.SetString(strings.TrimSpace(s)); err != nil || rate.Form != apd.Finite {
		form.page.Errors.Add("rate", taxRateWords["rate"])
		return rate, false
	}
	return rate, true
}

// taxRateRefused answers a refusal of a tax rate's form in the page's words.
func (h *handler) taxRateRefused(c echo.Context, err error, form *formPage) error {
	if r := rule.As(err); r != nil {
		return h.refused(c, inPageWords(r, taxRateWords), form)
	}
	return h.failure(c, err)
}

type taxRateLine struct {
	ID, Name, Rate string
}

type taxRatesData struct {
	Rates []taxRateLine
}

func (h *handler) taxRatesForm(c echo.Context, form url.Values) (*formPage, error) {
	rates, err := h.Invoices.TaxRates(c.Request().Context(), visitOf(c).Membership.OrganizationID)
	if err != nil {
		return nil, err
	}
	d := taxRatesData{Rates: make([]taxRateLine, len(rates))}
	for i, r := range rates {
		d.Rates[i] = taxRateLine{ID: r.ID.String(), Name: r.Name, Rate: invoice.Percent(r.Rate)}
	}
	if form == nil {
		form = url.Values{}
	}
	return &formPage{name: "tax-rates", fields: taxRateFields, page: page{Title: "Tax rates", Form: form, Data: d}}, nil
}

var taxRateNotices = map[string]string{"added": "The tax rate was added.", "removed": "The tax rate was removed."}

// taxRates is GET /portal/settings/tax-rates.
func (h *handler) taxRates(c echo.Context) error {
	form, err := h.taxRatesForm(c, nil)
	if err != nil {
		return h.failure(c, err)
	}
	return h.renderDone(c, form.name, form.page, taxRateNotices)
}

// addTaxRate is POST /portal/settings/tax-rates: name and rate (a
// percent). A name once per organization: sent twice, the second is
// refused beside the name.
func (h *handler) addTaxRate(c echo.Context) error {
	f := c.Request().PostForm
	form, err := h.taxRatesForm(c, f)
	if err != nil {
		return h.failure(c, err)
	}
	rate, ok := taxRateOfForm(f, form)
	if !ok {
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	if _, err := h.Invoices.AddTaxRate(c.Request().Context(), invoiceActor(c), f.Get("name"), rate); err != nil {
		return h.taxRateRefused(c, err, form)
	}
	return c.Redirect(http.StatusSeeOther, taxRatesPath+"?done=added")
}

// taxRateOf is the tax rate of the path's id, of the member's
// organization (another's is a 404).
func (h *handler) taxRateOf(c echo.Context) (invoice.TaxRate, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return invoice.TaxRate{}, invoice.ErrTaxRateNotFound
	}
	return h.Invoices.TaxRate(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
}

func taxRateForm(r invoice.TaxRate, form url.Values) *formPage {
	if form == nil {
		rate := invoice.Plain(r.Rate)
		form = url.Values{"name": {r.Name}, "rate": {rate.Text('f')}}
	}
	return &formPage{name: "tax-rate", fields: taxRateFields,
		page: page{Title: "Tax rate " + r.Label(), Form: form, Data: taxRateLine{ID: r.ID.String(), Name: r.Name, Rate: invoice.Percent(r.Rate)}}}
}

// taxRatePage is GET /portal/settings/tax-rates/{id}.
func (h *handler) taxRatePage(c echo.Context) error {
	r, err := h.taxRateOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form := taxRateForm(r, nil)
	return h.renderDone(c, form.name, form.page, map[string]string{"saved": "The tax rate was saved."})
}

// changeTaxRate is POST /portal/settings/tax-rates/{id}: name and rate.
func (h *handler) changeTaxRate(c echo.Context) error {
	r, err := h.taxRateOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	form := taxRateForm(r, f)
	rate, ok := taxRateOfForm(f, form)
	if !ok {
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	if _, err := h.Invoices.ChangeTaxRate(c.Request().Context(), invoiceActor(c), r.ID, f.Get("name"), rate); err != nil {
		return h.taxRateRefused(c, err, form)
	}
	return c.Redirect(http.StatusSeeOther, taxRatesPath+"/"+r.ID.String()+"?done=saved")
}

// removeTaxRate is POST /portal/settings/tax-rates/{id}/remove.
func (h *handler) removeTaxRate(c echo.Context) error {
	r, err := h.taxRateOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if err := h.Invoices.RemoveTaxRate(c.Request().Context(), invoiceActor(c), r.ID); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, taxRatesPath+"?done=removed")
}
