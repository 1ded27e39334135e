package apitest

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
)

// The full numbers of ApplicationForm: none may be stored in clear, logged
// or shown again.
const (
	FormTaxID    = "874512369"
	FormSSN1     = "618273645"
	FormSSN2     = "627384956"
	FormAccount  = "5500113377"
	FormRouting  = "111000025"
	FormSignedBy = "Maria Alvarez"
)

// FormSecrets are ApplicationForm's full numbers.
var FormSecrets = []string{FormTaxID, FormSSN1, FormSSN2, FormAccount}

// ApplicationForm is a valid sign-up form of two owners (sections 1 and
// 3: the second left empty), its consent given and signed; a test changes
// what it tests. It holds no csrf or key: Applicant.Send adds the page's.
func ApplicationForm() url.Values {
	return url.Values{
		"business.legalName": {"Cedar Street Auto Repair LLC"}, "business.dbaName": {"Cedar Street Auto"},
		"business.entityType": {"llc"}, "business.taxId": {FormTaxID}, "business.phone": {"+15125550177"},
		"business.email": {"owner@cedarstreetauto.example.com"}, "business.website": {""},
		"business.address.line1": {"1200 Cedar St"}, "business.address.line2": {""},
		"business.address.city": {"Round Rock"}, "business.address.state": {"TX"}, "business.address.postalCode": {"78664"},
		"owners.0.name": {FormSignedBy}, "owners.0.title": {"Managing member"}, "owners.0.ownershipPercent": {"60"},
		"owners.0.ssn":  {FormSSN1},
		"owners.2.name": {"Tom Becker"}, "owners.2.title": {"Member"}, "owners.2.ownershipPercent": {"40"},
		"owners.2.ssn":       {FormSSN2},
		"bank.routingNumber": {FormRouting}, "bank.accountNumber": {FormAccount},
		"consent": {"on"}, "signature": {FormSignedBy},
	}
}

// Applicant is a browser on a sign-up page: cookies of its own, and its
// own client address, so that the limit of submissions per address of one
// test does not starve another.
type Applicant struct {
	Env    *Env
	Client *http.Client
	// Header is sent with every request (X-Forwarded-For, Sec-Fetch-Site).
	Header http.Header
}

// NewApplicant is an applicant with cookies, from an address of its own.
func (e *Env) NewApplicant() *Applicant {
	c := ClientFrom(SourceAddress())
	c.Jar, _ = cookiejar.New(nil)
	return &Applicant{Env: e, Client: c, Header: http.Header{}}
}

// Visit sends a request as the applicant; pages are not in openapi.yaml.
func (a *Applicant) Visit(t testing.TB, method, path string, form url.Values) Page {
	t.Helper()
	return visit(t, a.Client, method, a.Env.URL+path, form, a.Header)
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="(csrf|key)" value="([^"]*)">`)

// Hidden is the value of the page's hidden field name (csrf, key).
func Hidden(t testing.TB, p Page, name string) string {
	t.Helper()
	for _, m := range hiddenField.FindAllStringSubmatch(p.Body, -1) {
		if m[1] == name {
			return m[2]
		}
	}
	t.Fatalf("no %s field on the page (%d): %s", name, p.StatusCode, p.Body)
	return ""
}

// Send opens the sign-up page of slug (for its csrf token and one-time
// key) and posts form with them.
func (a *Applicant) Send(t testing.TB, slug string, form url.Values) Page {
	t.Helper()
	page := a.Visit(t, "GET", "/apply/"+slug, nil)
	v := url.Values{}
	for k, vs := range form {
		v[k] = vs
	}
	v.Set("csrf", Hidden(t, page, "csrf"))
	v.Set("key", Hidden(t, page, "key"))
	return a.Visit(t, "POST", "/apply/"+slug, v)
}
