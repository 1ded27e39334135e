// Package portal is the front of HTML pages under /portal/ where people
// sign in and run their organization: API keys, members, the audit log,
// their own password and second factor; a reseller's portfolio and
// applications; and the merchant's day (invoices, reminders, locations,
// card payments and refunds, deposits, webhooks and events). Pages are
// rendered on the server with the shared layout of internal/web and work
// without JavaScript (two small scripts add to some: assets.go). Every rule
// is a domain package's (people, auth, invoice, payment, webhook, event,
// reseller, directory): the portal decodes a form, calls one function,
// renders.
//
// Extending it: an area is a file of handlers registered in routes with
// h.member (a signed-in member of an organization) and a guard
// (requires("payments.view"), managers, owners); its link goes in areas,
// shown to those its guard lets in. A handler reads the member with
// visitOf(c) and answers with h.render, h.refused (a *rule.Error as a
// message beside its field) or h.notFound. Another organization's id is a
// 404, as an unknown one is.
package portal

import (
	"bytes"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/recurring"
	"github.com/payreq/payreq/internal/requestlog"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/terminal"
	"github.com/payreq/payreq/internal/web"
	"github.com/payreq/payreq/internal/webhook"
)

//go:embed templates/*.html
var templateFS embed.FS

// Deps is what the portal needs.
type Deps struct {
	Log    *slog.Logger
	People *people.Store
	Auth   *auth.Store
	// Resellers is the reseller's side: portfolio, applications.
	Resellers *reseller.Store
	// The merchant's day: invoices, payments, events, locations.
	Directory *directory.Store
	Invoices  *invoice.Store
	Customers *customer.Store
	Recurring *recurring.Store
	Payments  *payment.Store
	Events    *event.Store
	Webhooks  *webhook.Store
	Terminals *terminal.Store
	// PDFs keeps the invoice documents drawn.
	PDFs *invoicepdf.Documents
	Now  func() time.Time
	// PublicURL is the deployment's base URL: its scheme chooses the
	// session cookie's name and Secure.
	PublicURL string
	// CSRF checks that a form comes from the portal (shared with the
	// sign-up page).
	CSRF *web.CSRF
	// ClientAddress is the client's address, behind trusted proxies too.
	ClientAddress echo.IPExtractor
	// RequestTimeout bounds each request.
	RequestTimeout time.Duration
}

type handler struct {
	Deps
	secure        bool // https: a __Host- cookie, Secure
	sessionCookie string
	deviceCookie  string
	stylesheet    string
}

// Paths the portal's own redirects use.
const (
	homePath   = "/portal/"
	signInPath = "/portal/sign-in"
)

// maxForm bounds every form's body.
const maxForm = 64 << 10

// New builds the portal: every address under /portal/.
func New(d Deps) *echo.Echo {
	u, _ := url.Parse(d.PublicURL)
	h := &handler{Deps: d, secure: u != nil && u.Scheme == "https", stylesheet: "/portal/assets/" + web.StylesheetName}
	h.sessionCookie, h.deviceCookie = web.SessionCookie(h.secure), "payreq_device"
	if h.secure {
		h.deviceCookie = "__Host-payreq_device"
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = d.ClientAddress
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if !c.Response().Committed {
			_ = h.failure(c, err)
		}
	}
	// The fastest level: a list page compresses to about a fifth either
	// way (BestSpeed's output is some 10-15 % larger than the default
	// level's), while the default level's deflate and its per-response
	// reset of the compressor's tables cost more CPU than rendering the
	// page (issue 30: a page's CPU within twice its API call's).
	compress := middleware.GzipWithConfig(middleware.GzipConfig{Level: gzip.BestSpeed, MinLength: 1024})
	e.Use(requestlog.Middleware(d.Log), requestlog.Recover, compress, web.Headers, h.deadline, h.readForm, d.CSRF.Protect)
	h.routes(e)
	return e
}

// routes registers every page. Public pages first, then those of a
// signed-in member, each with its guard.
func (h *handler) routes(e *echo.Echo) {
	e.GET("/portal/assets/:file", h.asset)
	e.GET(signInPath, h.signInPage)
	e.POST(signInPath, h.signIn)
	e.GET("/portal/sign-in/two-factor", h.secondFactorPage)
	e.POST("/portal/sign-in/two-factor", h.secondFactor)
	e.POST("/portal/sign-out", h.signOut)
	e.GET("/portal/password-reset", h.resetRequestPage)
	e.POST("/portal/password-reset", h.resetRequest)
	e.GET("/portal/password-reset/:token", h.resetPage)
	e.POST("/portal/password-reset/:token", h.reset)
	e.GET("/portal/invitations/:token", h.invitationPage)
	e.POST("/portal/invitations/:token", h.acceptInvitation)

	// Signed in, before an organization is chosen.
	e.GET("/portal/organizations", h.person(h.organizations))
	e.POST("/portal/organizations/:id/switch", h.person(h.switchOrganization))
	// Before an organization too: a member who must set up a second
	// factor confirms on the way to it.
	e.GET(confirmPath, h.person(h.confirmPage))
	e.POST(confirmPath, h.person(h.confirm))

	// A member of an organization.
	e.GET("/portal", h.member(h.home, anyone))
	e.GET(homePath, h.member(h.home, anyone))
	e.GET("/portal/account", h.member(h.account, anyone))
	e.POST("/portal/account/password", h.member(h.changePassword, anyone))
	e.GET(notificationsPath, h.member(h.notifications, anyone))
	e.POST(notificationsPath, h.member(h.setNotifications, anyone))
	e.POST(receiptsPath, h.member(h.setReceipts, managers))
	// Asking "confirm it's you" (issue 36): the second factor and new keys.
	e.GET("/portal/account/two-factor", h.member(h.confirmed(h.twoFactorPage), anyone))
	e.POST("/portal/account/two-factor", h.member(h.confirmed(h.confirmTwoFactor), anyone))
	e.GET("/portal/keys", h.member(h.keys, managers))
	e.POST("/portal/keys", h.member(h.confirmed(h.createKey), managers))
	e.GET("/portal/keys/:keyId/revoke", h.member(h.revokePage, managers))
	e.POST("/portal/keys/:keyId/revoke", h.member(h.revokeKey, managers))
	e.GET("/portal/members", h.member(h.members, managers))
	e.POST("/portal/members", h.member(h.invite, managers))
	e.POST("/portal/members/two-factor", h.member(h.twoFactorRule, owners))
	e.GET("/portal/members/:membershipId", h.member(h.memberPage, managers))
	e.POST("/portal/members/:membershipId", h.member(h.changeMember, managers))
	e.POST("/portal/members/:membershipId/remove", h.member(h.removeMember, managers))
	e.GET("/portal/audit", h.member(h.audit, managers))
	e.GET("/portal/portfolio", h.member(h.portfolio, requires(auth.PortfolioView)))
	e.GET("/portal/applications", h.member(h.applications, requires(auth.ApplicationsView)))
	e.GET("/portal/applications/:id", h.member(h.application, requires(auth.ApplicationsView)))
	// The merchant's day (issue 29): invoices, reminders, locations.
	view, create := requires(auth.PaymentsView), requires(auth.PaymentsCreate)
	e.GET(invoicesPath, h.member(h.invoices, view))
	e.POST(invoicesPath, h.member(h.createInvoice, create))
	e.GET(invoicesPath+"/new", h.member(h.newInvoice, create))
	e.GET(invoicesPath+"/:id", h.member(h.invoice, view))
	e.GET(invoicesPath+"/:id/pdf", h.member(h.invoicePDF, view))
	e.GET(invoicesPath+"/:id/duplicate", h.member(h.duplicateInvoice, create))
	e.GET(invoicesPath+"/:id/edit", h.member(h.editInvoicePage, create))
	e.POST(invoicesPath+"/:id/edit", h.member(h.editInvoice, create))
	e.POST(invoicesPath+"/:id/finalize", h.member(h.finalizeInvoice, create))
	e.GET(invoicesPath+"/:id/delete", h.member(h.deletePage, create))
	e.POST(invoicesPath+"/:id/delete", h.member(h.deleteDraft, create))
	e.POST(invoicesPath+"/:id/send", h.member(h.sendInvoice, create))
	e.GET(invoicesPath+"/:id/cancel", h.member(h.cancelPage, create))
	e.POST(invoicesPath+"/:id/cancel", h.member(h.cancelInvoice, create))
	e.GET(invoicesPath+"/:id/payments", h.member(h.paymentPage, create))
	e.POST(invoicesPath+"/:id/payments", h.member(h.recordPayment, create))
	e.POST(invoicesPath+"/:id/payments/:paymentId/remove", h.member(h.removePayment, create))
	e.GET(remindersPath, h.member(h.reminders, view))
	e.POST(remindersPath, h.member(h.setReminders, create))
	e.GET("/portal/locations", h.member(h.locations, either(auth.LocationsView, auth.AccountsView)))
	// Branding and business settings (issue 39).
	e.GET(businessPath, h.member(h.business, settingsManagers))
	e.POST(businessPath, h.member(h.setBusiness, settingsManagers))
	e.GET(locationsPath+"/:id", h.member(h.location, settingsManagers))
	e.POST(locationsPath+"/:id", h.member(h.setLocation, settingsManagers))
	// Customers and the tax rates (issue 39).
	e.GET(customersPath, h.member(h.customers, view))
	e.POST(customersPath, h.member(h.createCustomer, create))
	e.GET(customersPath+"/new", h.member(h.newCustomer, create))
	e.GET(customersPath+"/:id", h.member(h.customerPage, view))
	e.GET(customersPath+"/:id/edit", h.member(h.editCustomerPage, create))
	e.POST(customersPath+"/:id/edit", h.member(h.editCustomer, create))
	e.GET(customersPath+"/:id/delete", h.member(h.deleteCustomerPage, create))
	e.POST(customersPath+"/:id/delete", h.member(h.deleteCustomer, create))
	e.GET(customersPath+"/:id/cards/:cardId/remove", h.member(h.removeCardPage, create))
	e.POST(customersPath+"/:id/cards/:cardId/remove", h.member(h.removeCard, create))
	e.GET(taxRatesPath, h.member(h.taxRates, settingsManagers))
	e.POST(taxRatesPath, h.member(h.addTaxRate, settingsManagers))
	e.GET(taxRatesPath+"/:id", h.member(h.taxRatePage, settingsManagers))
	e.POST(taxRatesPath+"/:id", h.member(h.changeTaxRate, settingsManagers))
	e.POST(taxRatesPath+"/:id/remove", h.member(h.removeTaxRate, settingsManagers))
	// Recurring invoices (issues 39 and 41).
	e.GET(recurringPath, h.member(h.recurringList, view))
	e.POST(recurringPath, h.member(h.createRecurring, create))
	e.GET(recurringPath+"/new", h.member(h.newRecurring, create))
	e.GET(invoicesPath+"/:id/recurring", h.member(h.makeRecurring, create))
	e.GET(recurringPath+"/:id", h.member(h.seriesPage, view))
	e.POST(recurringPath+"/:id/status", h.member(h.seriesStatus, create))
	e.GET(recurringPath+"/:id/edit", h.member(h.editSeriesPage, create))
	e.POST(recurringPath+"/:id/edit", h.member(h.editSeries, create))
	e.GET(recurringPath+"/:id/end", h.member(h.endSeriesPage, create))
	e.POST(recurringPath+"/:id/end", h.member(h.endSeries, create))
	// Card terminals and collecting at them (issue 40).
	e.GET(terminalsPath, h.member(h.terminals, requires(auth.AccountsView)))
	e.POST(terminalsPath, h.member(h.addTerminal, managers))
	e.GET(terminalsPath+"/:id", h.member(h.terminalPage, managers))
	e.POST(terminalsPath+"/:id", h.member(h.renameTerminal, managers))
	e.POST(terminalsPath+"/:id/remove", h.member(h.removeTerminal, managers))
	e.GET(invoicesPath+"/:id/terminal", h.member(h.collectPage, create))
	e.POST(invoicesPath+"/:id/terminal", h.member(h.collect, create))
	e.GET(terminalPaymentsPath+"/:id", h.member(h.terminalPayment, either(auth.PaymentsView, auth.PaymentsCreate)))
	e.POST(terminalPaymentsPath+"/:id/cancel", h.member(h.cancelTerminalPayment, create))
	// Card payments, deposits, webhooks and events (issue 29).
	e.GET("/portal/card-payments", h.member(h.cardPayments, requires(auth.PaymentsView)))
	e.GET("/portal/card-payments/:id", h.member(h.cardPayment, requires(auth.PaymentsView)))
	e.POST("/portal/card-payments/:id/refund", h.member(h.refund, refunders))
	e.GET("/portal/deposits", h.member(h.deposits, requires(auth.PaymentsView)))
	e.GET("/portal/deposits/:id", h.member(h.deposit, requires(auth.PaymentsView)))
	e.GET("/portal/webhooks", h.member(h.webhooks, requires(auth.WebhooksManage)))
	e.POST("/portal/webhooks", h.member(h.createWebhook, requires(auth.WebhooksManage)))
	e.GET("/portal/webhooks/:id", h.member(h.webhookEndpoint, requires(auth.WebhooksManage)))
	e.POST("/portal/webhooks/:id/status", h.member(h.webhookStatus, requires(auth.WebhooksManage)))
	e.POST("/portal/webhooks/:id/rotate-secret", h.member(h.rotateWebhookSecret, requires(auth.WebhooksManage)))
	e.POST("/portal/webhooks/:id/ping", h.member(h.pingWebhook, requires(auth.WebhooksManage)))
	e.GET("/portal/webhooks/:id/delete", h.member(h.deleteWebhookPage, requires(auth.WebhooksManage)))
	e.POST("/portal/webhooks/:id/delete", h.member(h.deleteWebhook, requires(auth.WebhooksManage)))
	e.GET("/portal/events", h.member(h.events, requires(auth.EventsView)))
	e.GET("/portal/events/:id", h.member(h.eventPage, requires(auth.EventsView)))
	e.GET("/portal/events/:id/json", h.member(h.eventJSON, requires(auth.EventsView)))
	e.POST("/portal/events/:id/redeliver", h.member(h.redeliver, requires(auth.WebhooksManage)))
	e.Any("/portal/*", h.otherwise)
}

// An area is a link of the navigation, shown to the members its guard
// lets in, under its group's heading.
type area struct {
	Path, Label string
	guard       guard
	group       string
}

// The navigation's groups, in order: the business first, then its
// settings, then what developers use.
const (
	business   = ""
	settings   = "Settings"
	developers = "Developers"
)

var navGroups = []string{business, settings, developers}

var areas = []area{
	{homePath, "Home", anyone, business},
	{invoicesPath, "Invoices", requires(auth.PaymentsView), business},
	{customersPath, "Customers", requires(auth.PaymentsView), business},
	{"/portal/recurring", "Recurring", requires(auth.PaymentsView), business},
	{"/portal/card-payments", "Payments", requires(auth.PaymentsView), business},
	{"/portal/deposits", "Deposits", requires(auth.PaymentsView), business},
	{"/portal/portfolio", "Portfolio", requires(auth.PortfolioView), business},
	{"/portal/applications", "Applications", requires(auth.ApplicationsView), business},
	{businessPath, "Business", settingsManagers, settings},
	{taxRatesPath, "Tax rates", settingsManagers, settings},
	{remindersPath, "Reminders", requires(auth.PaymentsView), settings},
	{terminalsPath, "Terminals", requires(auth.AccountsView), settings},
	{"/portal/locations", "Locations", either(auth.LocationsView, auth.AccountsView), settings},
	{"/portal/members", "Members", managers, settings},
	{"/portal/audit", "Audit log", managers, settings},
	{"/portal/account", "Your account", anyone, settings},
	{"/portal/keys", "API keys", managers, developers},
	{"/portal/webhooks", "Webhooks", requires(auth.WebhooksManage), developers},
	{"/portal/events", "Events", requires(auth.EventsView), developers},
}

// navGroup is a heading of the navigation and its links ("" for the
// business's own, shown first without a heading).
type navGroup struct {
	Label string
	Items []navItem
}

// navItem is an area as the page's navigation shows it: Current, the
// page's own (compared in Go: the template's eq was a call by reflection
// per link of every page).
type navItem struct {
	Path, Label string
	Current     bool
}

// navigation is what membership m may open, by group, empty groups left
// out.
func navigation(m people.Membership, current string) []navGroup {
	var out []navGroup
	for _, g := range navGroups {
		group := navGroup{Label: g}
		for _, a := range areas {
			if a.group == g && a.guard(m) == nil {
				group.Items = append(group.Items, navItem{Path: a.Path, Label: a.Label, Current: a.Path == current})
			}
		}
		if len(group.Items) > 0 {
			out = append(out, group)
		}
	}
	return out
}

// A guard says whether a membership may use a page: nil, or the refusal.
type guard func(people.Membership) *rule.Error

func anyone(people.Membership) *rule.Error { return nil }

// requires lets in the members holding permission, as a key needs it in
// the API.
func requires(permission string) guard {
	return func(m people.Membership) *rule.Error {
		if m.Can(permission) {
			return nil
		}
		return &rule.Error{Kind: rule.Forbidden, Title: "Permission required", Permission: permission,
			Message: "This page needs the permission " + permission + ", which you do not hold in " + m.OrganizationName + "."}
	}
}

func managers(m people.Membership) *rule.Error {
	if m.Manages() {
		return nil
	}
	return &rule.Error{Kind: rule.Forbidden, Title: "Permission required",
		Message: "Only the organization's Owners and Admins manage API keys and members."}
}

func owners(m people.Membership) *rule.Error {
	if m.Role == people.Owner {
		return nil
	}
	return &rule.Error{Kind: rule.Forbidden, Title: "Permission required", Message: "Only the organization's Owners do this."}
}

// visit is the signed-in person of a request.
type visit struct {
	people.Session
	token string
}

const visitKey = "portal.visit"

func visitOf(c echo.Context) *visit {
	v, _ := c.Get(visitKey).(*visit)
	return v
}

// actor is the member of the request as the domain records it.
func actor(c echo.Context) people.Actor {
	v := visitOf(c)
	return people.Actor{Membership: v.Membership, Address: c.RealIP()}
}

// session reads the request's session; nil when there is none.
func (h *handler) session(c echo.Context) (*visit, error) {
	ck, err := c.Cookie(h.sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	s, err := h.People.Session(c.Request().Context(), ck.Value)
	if errors.Is(err, people.ErrNoSession) {
		h.clearSession(c)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &visit{Session: s, token: ck.Value}, nil
}

// person lets in a signed-in person (second factor given), whether or not
// an organization is chosen.
func (h *handler) person(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		v, err := h.session(c)
		if err != nil {
			return h.failure(c, err)
		}
		if v == nil {
			return c.Redirect(http.StatusSeeOther, signInPath)
		}
		if v.AwaitingSecondFactor {
			return c.Redirect(http.StatusSeeOther, "/portal/sign-in/two-factor")
		}
		c.Set(visitKey, v)
		return next(c)
	}
}

// member lets in a signed-in member of the chosen organization whom g
// lets in; a member of an organization that requires a second factor sets
// one up before anything else.
func (h *handler) member(next echo.HandlerFunc, g guard) echo.HandlerFunc {
	return h.person(func(c echo.Context) error {
		v := visitOf(c)
		if v.Membership == nil {
			return c.Redirect(http.StatusSeeOther, "/portal/organizations")
		}
		if v.Membership.TwoFactorRequired && !v.Person.TwoFactor && c.Path() != "/portal/account/two-factor" {
			if c.Request().Method == http.MethodGet {
				return c.Redirect(http.StatusSeeOther, "/portal/account/two-factor")
			}
			return h.refused(c, &rule.Error{Kind: rule.Forbidden, Title: "Second factor required",
				Message: v.Membership.OrganizationName + " requires a second factor: set one up first."}, nil)
		}
		if refusal := g(*v.Membership); refusal != nil {
			return h.refused(c, refusal, nil)
		}
		return next(c)
	})
}

// deadline gives a request at most RequestTimeout. (A streamed export
// gives each of its pages as much: streamCSV.)
func (h *handler) deadline(next echo.HandlerFunc) echo.HandlerFunc {
	limited := web.Deadline(h.RequestTimeout)(next)
	return func(c echo.Context) error {
		c.Set(unboundedKey, c.Request().Context())
		return limited(c)
	}
}

// readForm reads a POST's form, at most maxForm bytes, before the CSRF
// check looks for its token; the business settings' form, which carries
// a logo, is multipart and up to maxUpload.
func (h *handler) readForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Method != http.MethodPost {
			return next(c)
		}
		status, heading := 0, ""
		if c.Path() == businessPath {
			status, heading = web.ParseUpload(c, maxUpload)
		} else {
			status, heading = web.ParseForm(c, maxForm)
		}
		if status != 0 {
			return h.message(c, status, heading, "Nothing was changed. Go back and send it again.")
		}
		return next(c)
	}
}

// setSession and clearSession also rebind the page's CSRF token: the
// next POST carries the new cookie, or none.
func (h *handler) setSession(c echo.Context, token string) {
	web.BindCSRF(c, token)
	c.SetCookie(&http.Cookie{Name: h.sessionCookie, Value: token, Path: "/", HttpOnly: true, Secure: h.secure,
		SameSite: http.SameSiteLaxMode})
}

// setDevice keeps a device token (people.Session.Device) in the browser
// for a year: its later sign-ins pass its person's lockout and hashing
// floods.
func (h *handler) setDevice(c echo.Context, token string) {
	c.SetCookie(&http.Cookie{Name: h.deviceCookie, Value: token, Path: "/", HttpOnly: true, Secure: h.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: 365 * 24 * 60 * 60})
}

// device is the request's device token, or "".
func (h *handler) device(c echo.Context) string {
	if ck, err := c.Cookie(h.deviceCookie); err == nil {
		return ck.Value
	}
	return ""
}

func (h *handler) clearSession(c echo.Context) {
	web.BindCSRF(c, "")
	c.SetCookie(&http.Cookie{Name: h.sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: h.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

// page is what every template renders; Data is the page's own.
type page struct {
	Title      string
	Stylesheet string
	CSRF       string
	Visit      *visit
	Nav        []navGroup
	// Zone is the time zone the page's times are read in, with its
	// abbreviation: the organization's (its locations', when they share
	// one; else UTC).
	Zone    *time.Location
	Current string
	Errors  web.Errors
	// Alert is a message above the content (a refusal of no field).
	Alert string
	// Notice is news of what was just done.
	Notice string
	Form   url.Values
	Data   any
}

// Errored: the page shows an error, and its title says so first.
func (p page) Errored() bool { return len(p.Errors) > 0 || p.Alert != "" }

var pages = map[string]*template.Template{}

func init() {
	entries, err := templateFS.ReadDir("templates")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".html")
		if name == "base" {
			continue
		}
		pages[name] = web.ParseFuncs(funcs, templateFS, "templates/base.html", "templates/"+e.Name())
	}
}

// renderDone answers a page after a redirect from a form it posted:
// ?done= names what was done, and notices say it. A notice is only ever
// one of notices: nothing the query carries reaches the page, so a link
// cannot make the portal say what it never said.
func (h *handler) renderDone(c echo.Context, name string, p page, notices map[string]string) error {
	p.Notice = notices[c.QueryParam("done")]
	return h.render(c, http.StatusOK, name, p)
}

// render answers a page: name is the template, p what it shows.
func (h *handler) render(c echo.Context, status int, name string, p page) error {
	p.Stylesheet = h.stylesheet
	p.CSRF = web.CSRFToken(c)
	if p.Form == nil {
		p.Form = url.Values{}
	}
	if v := visitOf(c); v != nil {
		p.Visit = v
		if v.Membership != nil {
			p.Nav = navigation(*v.Membership, c.Path())
			zone, err := h.zoneOf(c)
			if err != nil {
				return err
			}
			p.Zone = zone
		}
	}
	p.Current = c.Path()
	t, ok := pages[name]
	if !ok {
		return errors.New("portal: no page " + name)
	}
	buf := renderBuffers.Get().(*bytes.Buffer)
	defer putRenderBuffer(buf)
	buf.Reset()
	if err := t.ExecuteTemplate(buf, "layout", p); err != nil {
		return err
	}
	// HTMLBlob writes the page before it returns: the buffer goes back
	// to the pool after.
	return c.HTMLBlob(status, buf.Bytes())
}

// renderBuffers are the pages' buffers, kept between requests: a list
// page is some 30 KB, which a new buffer reached by growing (and copying)
// a dozen times a request.
var renderBuffers = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 64<<10)) }}

// putRenderBuffer keeps buf for the next page unless an unusually large
// page grew it.
func putRenderBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= 1<<20 {
		renderBuffers.Put(buf)
	}
}

// refused answers a domain refusal: with form (the page name and what it
// shows) the form again, each message beside its field; without, a page
// saying what was refused. A Limited refusal says when to come back.
func (h *handler) refused(c echo.Context, e *rule.Error, form *formPage) error {
	status := e.Kind.Status()
	if e.Kind == rule.Limited {
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(int(e.RetryAfter.Seconds()+0.999), 1)))
	}
	if form == nil {
		return h.message(c, status, e.Title, e.Message)
	}
	p := form.page
	p.Errors = web.FromRule(e, form.fields)
	if len(p.Errors) == 1 && p.Errors[0].Field == "" {
		p.Errors, p.Alert = nil, p.Errors[0].Message
	}
	return h.render(c, status, form.name, p)
}

// formPage is a form to show again after a refusal: its template, what
// it shows and its fields in order.
type formPage struct {
	name   string
	page   page
	fields []string
}

type messageData struct{ Heading, Back string }

// message answers a page of a heading and a paragraph.
func (h *handler) message(c echo.Context, status int, heading, text string) error {
	return h.render(c, status, "message", page{Title: heading, Alert: map[bool]string{true: text}[status >= 400],
		Notice: map[bool]string{true: text}[status < 400], Data: messageData{Heading: heading}})
}

func (h *handler) notFound(c echo.Context) error {
	return h.message(c, http.StatusNotFound, "Page not found", "There is no page at this address, or it is not yours to see.")
}

// busyRetry is when, in seconds, a request refused for want of a hashing
// slot is asked to come back: a slot frees in well under a second once a
// burst passes.
const busyRetry = 5

// failure answers a failure of the service, and returns err for the log.
func (h *handler) failure(c echo.Context, err error) error {
	if errors.Is(err, web.ErrForgery) {
		return h.message(c, http.StatusForbidden, "This form was not accepted",
			"Nothing was changed: the form did not come from this page, or it is too old. Open the page again and send it from there.")
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code < 500 {
		if he.Code == http.StatusNotFound {
			return h.notFound(c)
		}
		return h.message(c, he.Code, http.StatusText(he.Code), "This request could not be taken.")
	}
	if r := rule.As(err); r != nil {
		return h.refused(c, r, nil)
	}
	if errors.Is(err, people.ErrBusy) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(busyRetry))
		_ = h.message(c, http.StatusServiceUnavailable, "The service is busy",
			fmt.Sprintf("Too many passwords are being checked at this moment. Nothing was changed: try again in %d seconds.", busyRetry))
		return err
	}
	_ = h.message(c, web.FailureStatus(c, err), "Something went wrong", "We could not complete this request. Please try again in a few minutes.")
	return err
}

// otherwise answers what no route took: 405 on a known page, else 404.
func (h *handler) otherwise(c echo.Context) error {
	return h.notFound(c)
}

// asset serves the stylesheet and the scripts (web's copy button, the
// invoice form's lines) under their hashed names.
func (h *handler) asset(c echo.Context) error {
	if ok, err := web.ServeStylesheet(c, c.Param("file")); ok {
		return err
	}
	if ok, err := web.ServeCopyScript(c, c.Param("file")); ok {
		return err
	}
	if ok, err := serveLines(c, c.Param("file")); ok {
		return err
	}
	return h.notFound(c)
}

// address is the client's address as the sign-in limits count it (an
// IPv6 address's /64).
func address(c echo.Context) string { return framing.Network(c.RealIP()) }
