// Package signup serves each reseller's public sign-up page,
// {PAYREQ_PUBLIC_URL}/apply/{slug}: the merchant application form (the
// business, one to four owners, the bank account, an e-sign consent), and
// the thank-you page after it. It decodes the form, hands it to
// reseller.Store.Submit (the rules of `payreq applications add` too), and
// renders what that answers; it holds no rule of its own. Pages are
// server-rendered on internal/web's layout and work without JavaScript.
//
// The tax id, the SSNs and the account number live only in the request's
// memory here: never sent back to the browser, never logged.
package signup

import (
	"bytes"
	"compress/gzip"
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/requestlog"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

//go:embed templates/*.html
var templateFS embed.FS

var pages = map[string]*template.Template{
	"apply":   web.Parse(templateFS, "templates/footer.html", "templates/apply.html"),
	"thanks":  web.Parse(templateFS, "templates/footer.html", "templates/thanks.html"),
	"message": web.Parse(templateFS, "templates/footer.html", "templates/message.html"),
}

// stylesheet is the shared stylesheet's address under /apply/.
var stylesheet = "/apply/assets/" + web.StylesheetName

// maxForm bounds the form's body: some thirty fields of at most a few
// hundred characters, percent-encoded.
const maxForm = 128 << 10

// Deps is what the pages need.
type Deps struct {
	Log       *slog.Logger
	Resellers *reseller.Store
	// CSRF checks that a form comes from the page (shared with the portal).
	CSRF *web.CSRF
	// ClientAddress is the applicant's address, behind trusted proxies too.
	ClientAddress echo.IPExtractor
	// RequestTimeout bounds every request, so that a database that is down
	// or stuck gets the applicant an answer in bounded time.
	RequestTimeout time.Duration
}

type handler struct{ Deps }

// New builds the sign-up front: every address under /apply/, answered as
// HTML with internal/web's security headers.
func New(d Deps) *echo.Echo {
	h := &handler{Deps: d}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = d.ClientAddress
	e.HTTPErrorHandler = h.handleError
	compress := middleware.GzipWithConfig(middleware.GzipConfig{Level: gzip.DefaultCompression, MinLength: 1024})
	e.Use(requestlog.Middleware(d.Log), requestlog.Recover, compress, web.Headers, web.Deadline(d.RequestTimeout))

	// HEAD comes as GET (see internal/server). A POST is read (at most
	// maxForm bytes), checked, and only then counted: a forged post from
	// a page the applicant visits is refused without using up the
	// applicant's network's submissions.
	e.GET("/apply/:slug", h.show, d.CSRF.Protect)
	e.POST("/apply/:slug", h.submit, h.known, h.readForm, d.CSRF.Protect, h.limit)
	e.GET("/apply/:slug/thanks/:reference", h.thanks)
	e.GET("/apply/assets/:file", h.asset)
	e.Any("/apply/*", h.otherwise)
	return e
}

// limit counts every POST that passed the CSRF and origin checks against
// the address's submissions (an IPv6 address's /64).
func (h *handler) limit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := h.Resellers.SubmissionFrom(c.Request().Context(), framing.Network(c.RealIP())); err != nil {
			return err
		}
		return next(c)
	}
}

// known answers a POST to a page no reseller has with 404, before its
// body is read.
func (h *handler) known(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := h.signUpPage(c); err != nil {
			return err
		}
		return next(c)
	}
}

// readForm reads the form's body, at most maxForm bytes.
func (h *handler) readForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if status, heading := web.ParseForm(c, maxForm); status != 0 {
			return h.message(c, status, heading, "Nothing was sent. Go back to the form and send it again.")
		}
		return next(c)
	}
}

// signUpPage is the reseller of the request's slug, read once.
func (h *handler) signUpPage(c echo.Context) (reseller.SignUpPage, error) {
	if p, ok := c.Get("signup.page").(reseller.SignUpPage); ok {
		return p, nil
	}
	p, err := h.Resellers.SignUpPageOf(c.Request().Context(), c.Param("slug"))
	if err != nil {
		return reseller.SignUpPage{}, err
	}
	c.Set("signup.page", p)
	return p, nil
}

// show is GET /apply/:slug: the form, or, for a suspended reseller, that
// it takes no applications.
func (h *handler) show(c echo.Context) error {
	p, err := h.signUpPage(c)
	if err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "apply", h.formPage(c, p, form{Values: url.Values{}}))
}

// submit is POST /apply/:slug: the form handed to reseller.Submit; 303 to
// the thank-you page, or the form again with what is wrong.
func (h *handler) submit(c echo.Context) error {
	p, err := h.signUpPage(c)
	if err != nil {
		return err
	}
	f := readForm(c.Request().PostForm)
	sub, sections := f.submission(p)
	id, err := h.Resellers.Submit(c.Request().Context(), sub)
	if err == nil {
		return c.Redirect(http.StatusSeeOther, "/apply/"+p.Slug+"/thanks/"+id.String())
	}
	e := rule.As(err)
	switch {
	case e != nil && e.Kind == rule.Invalid:
		v := h.formPage(c, p, f.redisplay())
		v.setErrors(errorsOf(e, sections))
		return h.render(c, http.StatusBadRequest, "apply", v)
	case e != nil && e.Kind == rule.Conflict:
		p.Status = "suspended" // as Submit found it
		return h.render(c, e.Kind.Status(), "apply", h.formPage(c, p, form{}))
	case e != nil && e.Kind == rule.KeyReused:
		return h.message(c, e.Kind.Status(), "This form was sent already",
			"An application was received from this form before, with other details; nothing more was sent. To send another application, open the sign-up page again.")
	}
	return err
}

// thanks is GET /apply/:slug/thanks/:reference, the page after a
// submission: the reference, nothing of what was sent.
func (h *handler) thanks(c echo.Context) error {
	p, err := h.signUpPage(c)
	if err != nil {
		return err
	}
	id, err := uuid.Parse(c.Param("reference"))
	if err != nil {
		return h.notFound(c)
	}
	if _, err := h.Resellers.Application(c.Request().Context(), p.ResellerID, id); errors.Is(err, reseller.ErrNotFound) {
		return h.notFound(c)
	} else if err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "thanks", page{Title: "Application received by " + p.Name, Reseller: p.Name,
		Reference: id.String()})
}

// asset serves the stylesheet under its hashed name.
func (h *handler) asset(c echo.Context) error {
	if ok, err := web.ServeStylesheet(c, c.Param("file")); ok {
		return err
	}
	return h.notFound(c)
}

// otherwise answers what no route took: another method on a page (405),
// or an address with no page (404).
func (h *handler) otherwise(c echo.Context) error {
	parts := strings.Split(strings.TrimPrefix(c.Request().URL.Path, "/apply/"), "/")
	allow := ""
	switch {
	case len(parts) == 1 && parts[0] != "":
		allow = "GET, HEAD, POST"
	case len(parts) == 3 && parts[1] == "thanks":
		allow = "GET, HEAD"
	}
	if allow == "" {
		return h.notFound(c)
	}
	c.Response().Header().Set("Allow", allow)
	return h.message(c, http.StatusMethodNotAllowed, "Method not allowed",
		"This page can be opened, and its form sent, from a web browser only.")
}

// handleError answers what a handler returned: a refusal of the domain
// (any kind, at its status) or of the CSRF check as its page, anything
// else as a failure.
func (h *handler) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	e := rule.As(err)
	var he *echo.HTTPError
	switch {
	case errors.Is(err, web.ErrForgery):
		_ = h.message(c, http.StatusForbidden, "This form was not accepted",
			"Nothing was sent: the form did not come from the sign-up page, or it is too old. Open the sign-up page again from its link and send the form from there.")
	case e != nil && e.Kind == rule.NotFound:
		_ = h.notFound(c)
	case e != nil && e.Kind == rule.Limited:
		secs := max(1, int(math.Ceil(e.RetryAfter.Seconds())))
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		_ = h.message(c, http.StatusTooManyRequests, "Too many applications",
			e.Message+" Nothing was sent.", "Please try again in "+plural((secs+59)/60, "minute")+".")
	case e != nil:
		_ = h.message(c, e.Kind.Status(), e.Title, e.Message, "Nothing was sent.")
	case errors.As(err, &he) && he.Code < 500:
		_ = h.message(c, he.Code, http.StatusText(he.Code), "Nothing was sent. Go back to the sign-up page and try again.")
	default:
		_ = h.message(c, web.FailureStatus(c, err), "Something went wrong",
			"We could not complete this request, and nothing was sent. Please try again in a few minutes.")
	}
}

func (h *handler) notFound(c echo.Context) error {
	return h.message(c, http.StatusNotFound, "Page not found",
		"There is no sign-up page at this address. Check that the link is complete, exactly as you were given it.")
}

func (h *handler) message(c echo.Context, status int, heading string, paragraphs ...string) error {
	return h.render(c, status, "message", page{Title: heading, Heading: heading, Paragraphs: paragraphs, Failed: status >= 400})
}

func (h *handler) render(c echo.Context, status int, name string, p page) error {
	p.Stylesheet = stylesheet
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
