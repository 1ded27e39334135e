package portal

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/rule"
)

// The business settings and each location's details (issue 39): what
// customers see of the business on the pay page, the PDFs and the emails,
// as directory.SetBranding and SetLocationDetails keep them. Owners and
// Admins change them; the form comes back with each message beside its
// field and what was typed kept (a file chosen cannot be kept: the
// browser asks for it again).

const (
	businessPath  = "/portal/settings/business"
	locationsPath = "/portal/locations"
	// maxUpload bounds the business settings' form, a logo of up to
	// directory.MaxLogoBytes among it: a larger logo is refused beside
	// its field, a far larger form as too large.
	maxUpload = 4 << 20
)

// settingsManagers lets in the organization's Owners and Admins.
func settingsManagers(m people.Membership) *rule.Error {
	if m.Manages() {
		return nil
	}
	return &rule.Error{Kind: rule.Forbidden, Title: "Permission required",
		Message: "Only the organization's Owners and Admins change its business settings and locations."}
}

// directoryActor is the member of the request as the directory records it.
func directoryActor(c echo.Context) directory.Actor {
	return directory.Actor{OrganizationID: visitOf(c).Membership.OrganizationID, Audit: actor(c).Audit()}
}

type businessData struct {
	Branding       directory.Branding
	MaxFooter      int
	MaxPaymentDays int
	MinContrast    string
	MaxLogoSide    int
	LogoWidth      int
	MaxNameLength  int
}

var businessFields = []string{"displayName", "logo", "accentColor", "supportEmail", "supportPhone", "paymentTermsDays", "invoiceFooter"}

func businessForm(b directory.Branding, form url.Values) *formPage {
	if form == nil {
		form = url.Values{"displayName": {b.DisplayName}, "accentColor": {b.AccentColor}, "supportEmail": {b.SupportEmail},
			"supportPhone": {b.SupportPhone}, "invoiceFooter": {b.InvoiceFooter}}
		if b.PaymentTermsDays != nil {
			form.Set("paymentTermsDays", strconv.Itoa(*b.PaymentTermsDays))
		}
	}
	return &formPage{name: "business", fields: businessFields, page: page{Title: "Business settings", Form: form,
		Data: businessData{Branding: b, MaxFooter: directory.MaxFooter, MaxPaymentDays: directory.MaxPaymentDays,
			MinContrast: strconv.FormatFloat(directory.MinContrast, 'f', 1, 64), MaxLogoSide: directory.MaxLogoSide,
			LogoWidth: directory.LogoWidth, MaxNameLength: directory.MaxNameLength}}}
}

// business is GET /portal/settings/business.
func (h *handler) business(c echo.Context) error {
	b, err := directory.BrandingOf(c.Request().Context(), h.Directory.DB, visitOf(c).Membership.OrganizationID)
	if err != nil {
		return h.failure(c, err)
	}
	f := businessForm(b, nil)
	return h.renderDone(c, f.name, f.page, map[string]string{"saved": "The business settings were saved."})
}

// setBusiness is POST /portal/settings/business, a multipart form (the
// logo is a file): displayName, logo, removeLogo (on, or absent),
// accentColor, supportEmail, supportPhone, paymentTermsDays,
// invoiceFooter.
func (h *handler) setBusiness(c echo.Context) error {
	ctx := c.Request().Context()
	f := c.Request().PostForm
	in := directory.BrandingChange{DisplayName: f.Get("displayName"), AccentColor: f.Get("accentColor"),
		SupportEmail: f.Get("supportEmail"), SupportPhone: f.Get("supportPhone"),
		PaymentTermsDays: f.Get("paymentTermsDays"), InvoiceFooter: f.Get("invoiceFooter"), RemoveLogo: f.Get("removeLogo") == "on"}
	logo, err := uploaded(c, "logo")
	if err != nil {
		return h.failure(c, err)
	}
	in.Logo = logo
	_, err = h.Directory.SetBranding(ctx, directoryActor(c), in)
	if err != nil {
		current, rerr := directory.BrandingOf(ctx, h.Directory.DB, visitOf(c).Membership.OrganizationID)
		if rerr != nil {
			return h.failure(c, rerr)
		}
		return h.answer(c, err, businessForm(current, f))
	}
	return c.Redirect(http.StatusSeeOther, businessPath+"?done=saved")
}

// uploaded is the file the form sent as field, nil when none was chosen
// (a browser sends an empty part then).
func uploaded(c echo.Context, field string) ([]byte, error) {
	r := c.Request()
	if r.MultipartForm == nil {
		return nil, nil
	}
	file, _, err := r.FormFile(field)
	if errors.Is(err, http.ErrMissingFile) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	b, err := io.ReadAll(file)
	if err != nil || len(b) == 0 {
		return nil, err
	}
	return b, nil
}

type locationData struct {
	Location      directory.Location
	MaxNameLength int
}

var locationFields = []string{"receiptName", "addressLine1", "addressLine2", "city", "state", "postalCode", "phone", "email"}

func locationForm(l directory.Location, form url.Values) *formPage {
	if form == nil {
		form = url.Values{"receiptName": {optional.Value(l.ReceiptName)}, "addressLine1": {l.AddressLine1},
			"addressLine2": {optional.Value(l.AddressLine2)}, "city": {l.City}, "state": {l.State}, "postalCode": {l.PostalCode},
			"phone": {optional.Value(l.Phone)}, "email": {optional.Value(l.Email)}}
	}
	return &formPage{name: "location", fields: locationFields, page: page{Title: l.Name, Form: form,
		Data: locationData{Location: l, MaxNameLength: directory.MaxNameLength}}}
}

// location is GET /portal/locations/{id}.
func (h *handler) location(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	l, err := h.Directory.Location(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
	if errors.Is(err, directory.ErrNotFound) {
		return h.notFound(c)
	}
	if err != nil {
		return h.failure(c, err)
	}
	f := locationForm(l, nil)
	return h.renderDone(c, f.name, f.page, map[string]string{"saved": "The location was saved."})
}

// setLocation is POST /portal/locations/{id}: receiptName, addressLine1,
// addressLine2, city, state, postalCode, phone, email.
func (h *handler) setLocation(c echo.Context) error {
	ctx := c.Request().Context()
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	f := c.Request().PostForm
	in := directory.LocationChange{ReceiptName: f.Get("receiptName"), AddressLine1: f.Get("addressLine1"),
		AddressLine2: f.Get("addressLine2"), City: f.Get("city"), State: f.Get("state"), PostalCode: f.Get("postalCode"),
		Phone: f.Get("phone"), Email: f.Get("email")}
	_, err := h.Directory.SetLocationDetails(ctx, directoryActor(c), id, in)
	if errors.Is(err, directory.ErrNotFound) {
		return h.notFound(c)
	}
	if err != nil {
		l, rerr := h.Directory.Location(ctx, visitOf(c).Membership.OrganizationID, id)
		if errors.Is(rerr, directory.ErrNotFound) {
			return h.notFound(c)
		}
		if rerr != nil {
			return h.failure(c, rerr)
		}
		return h.answer(c, err, locationForm(l, f))
	}
	return c.Redirect(http.StatusSeeOther, locationsPath+"/"+id.String()+"?done=saved")
}
