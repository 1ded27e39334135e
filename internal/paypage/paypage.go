// Package paypage serves the hosted pay page behind each invoice's link: the
// invoice, a card form, and the receipt. Pages are rendered on the server
// with html/template (which escapes everything the merchant or customer
// typed) and work without JavaScript; their templates and stylesheet are
// embedded in the binary.
package paypage

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/recurring"
	"github.com/payreq/payreq/internal/requestlog"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

//go:embed templates/*.html
var templateFS embed.FS

// stylesheet is the shared stylesheet's address under /pay/.
var stylesheet = "/pay/assets/" + web.StylesheetName

var pages = map[string]*template.Template{
	"pay":     parse("pay.html", "invoice.html"),
	"receipt": parse("receipt.html", "invoice.html"),
	"message": parse("message.html"),
}

func parse(files ...string) *template.Template {
	patterns := []string{"templates/footer.html"}
	for _, f := range files {
		patterns = append(patterns, "templates/"+f)
	}
	return web.Parse(templateFS, patterns...)
}

// maxForm bounds the pay form's body.
const maxForm = 16 << 10

// Deps is what the pages need.
type Deps struct {
	Log      *slog.Logger
	Invoices *invoice.Store
	Payments *payment.Store
	// Directory serves the businesses' logos.
	Directory *directory.Store
	// Recurring tells the invoices issued by a recurring series, whose
	// page offers the consent to future charges.
	Recurring *recurring.Store
	// PDFs keeps the invoice documents drawn.
	PDFs *invoicepdf.Documents
	// FormKey signs the form token (CSRF) of each pay link.
	FormKey []byte
	Now     func() time.Time
	// ClientAddress is the customer's address, behind trusted proxies too.
	ClientAddress echo.IPExtractor
	// RequestTimeout bounds reading a page, so that a database that is down
	// or stuck gets the customer an answer in bounded time. Paying bounds
	// its own time (payment.PayTimeout).
	RequestTimeout time.Duration
}

type handler struct{ Deps }

// New builds the pay page front: every address under /pay/, answered as
// HTML, with the page headers on every answer.
func New(d Deps) *echo.Echo {
	h := &handler{d}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = d.ClientAddress
	e.HTTPErrorHandler = h.handleError
	// Pages and the stylesheet go gzip-compressed to clients that accept
	// it (with Vary: Accept-Encoding); below 1 KiB it would not pay.
	compress := middleware.GzipWithConfig(middleware.GzipConfig{Level: gzip.DefaultCompression, MinLength: 1024})
	e.Use(requestlog.Middleware(d.Log), requestlog.Recover, compress, web.Headers)
	// HEAD comes as GET (see internal/server).
	deadline := web.Deadline(d.RequestTimeout)
	e.GET("/pay/:token", h.show, deadline)
	e.GET("/pay/:token/invoice.pdf", h.invoicePDF, deadline)
	e.GET("/pay/:token/receipt/:paymentId", h.receipt, deadline)
	e.GET("/pay/assets/:file", h.asset)
	e.GET(directory.LogoPrefix+":file", h.logo, deadline)
	e.GET(accentPrefix+":file", h.accent)
	e.POST("/pay/:token", h.pay)
	e.Any("/pay/*", h.otherwise)
	return e
}

// handleError answers an error no page took care of (a panic, or echo's
// own refusal) with the generic failure page.
func (h *handler) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	_ = h.failure(c, err)
}

// otherwise answers what no route took: another method on a page (405),
// or an address with no page (404), as HTML.
func (h *handler) otherwise(c echo.Context) error {
	parts := strings.Split(strings.TrimPrefix(c.Request().URL.Path, "/pay/"), "/")
	allow := ""
	switch {
	case len(parts) == 1 && tokenPattern.MatchString(parts[0]):
		allow = "GET, HEAD, POST"
	case len(parts) == 3 && parts[1] == "receipt" && tokenPattern.MatchString(parts[0]),
		len(parts) == 2 && parts[1] == "invoice.pdf" && tokenPattern.MatchString(parts[0]):
		allow = "GET, HEAD"
	}
	if allow == "" {
		return h.notFound(c)
	}
	c.Response().Header().Set("Allow", allow)
	return h.render(c, http.StatusMethodNotAllowed, "message", page{Title: "Method not allowed", Heading: "Method not allowed",
		Paragraphs: []string{"This page can be opened, and its form sent, from a web browser only."}})
}

var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)

// lookup reads the invoice of a pay link; ok is false for an unknown link.
func (h *handler) lookup(ctx context.Context, token string) (inv invoice.Invoice, ok bool, err error) {
	if !tokenPattern.MatchString(token) {
		return invoice.Invoice{}, false, nil
	}
	inv, err = h.Invoices.ByPayToken(ctx, token)
	if errors.Is(err, invoice.ErrNotFound) {
		return invoice.Invoice{}, false, nil
	}
	return inv, err == nil, err
}

// invoiceOf is the invoice of the request's pay link. When there is none,
// or it cannot be read, it has answered already: done, and err is what
// the handler returns.
func (h *handler) invoiceOf(c echo.Context) (inv invoice.Invoice, done bool, err error) {
	inv, ok, err := h.lookup(c.Request().Context(), c.Param("token"))
	if err != nil {
		return inv, true, h.failure(c, err)
	}
	if !ok {
		return inv, true, h.notFound(c)
	}
	return inv, false, nil
}

// show is GET /pay/:token: the invoice, and the form while it is payable.
func (h *handler) show(c echo.Context) error {
	token := c.Param("token")
	inv, done, err := h.invoiceOf(c)
	if done {
		return err
	}
	ctx := c.Request().Context()
	p := h.payPage(ctx, inv, token)
	left, err := h.Payments.LeftToPay(ctx, h.Payments.DB, &inv)
	if err != nil {
		return h.failure(c, err)
	}
	p.Form = form{Amount: left.Amount.Text('f')}
	if under := left.UnderWay(); under != "" && p.ShowForm {
		// The form offers only what is left; the charge checks it again.
		p.Left = invoice.Money(left.Amount)
		p.Alert = &alert{Kind: "info", Paragraphs: []string{"Just now " + under + ", so " + p.Left + " is left to pay here."}}
		if left.Amount.Sign() == 0 {
			p.ShowForm = false
			p.Alert.Paragraphs = []string{"Just now " + under + ", so nothing is left to pay here.",
				"Reload this page in a few minutes to see whether anything is left to pay."}
		}
	}
	return h.render(c, http.StatusOK, "pay", p)
}

// pay is POST /pay/:token: payment.PayByLink, with the page's reading of
// the form (payForm), then the page of what it came to.
func (h *handler) pay(c echo.Context) error {
	token := c.Param("token")
	if !tokenPattern.MatchString(token) {
		return h.notFound(c)
	}
	f := &payForm{h: h, c: c, token: token}
	paid, err := h.Payments.PayByLink(c.Request().Context(), token, framing.Network(c.RealIP()), f)
	if err == nil {
		return h.answer(c, token, f.form, paid)
	}
	refused := rule.As(err)
	var unread *formError
	switch {
	case paid.Invoice.ID == uuid.Nil && errors.Is(err, invoice.ErrNotFound):
		return h.notFound(c)
	case errors.As(err, &unread):
		return h.message(c, unread.status, unread.heading, unread.text)
	case refused != nil && refused.Kind == rule.Limited:
		return h.tooManyAttempts(c, refused.RetryAfter, refused.Message)
	case paid.Invoice.ID == uuid.Nil:
		return h.failure(c, err)
	}

	// Anything else shows the invoice as it is now, with what happened.
	p := h.payPage(c.Request().Context(), paid.Invoice, token)
	p.Form = f.form.redisplay()
	switch {
	case errors.Is(err, payment.ErrVoidFailed), errors.Is(err, processor.ErrUnsettled):
		// Checked first: these errors wrap the processor's too, and the
		// reason the charge could not be recorded. The charge may stand for
		// now; the service voids it on its own.
		return h.unanswered(c, p, http.StatusServiceUnavailable, err,
			"We could not confirm this payment with the card processor, so it was not recorded.",
			"If your card was charged, the charge will be cancelled automatically within a few minutes. Please try again later.")
	case errors.Is(err, payment.ErrChanged):
		// What the form was filled in against is gone: the page as it is now.
		balance := paid.Invoice.Balance()
		p.Form.Amount = balance.Text('f')
		p.Alert = &alert{Kind: "info", Paragraphs: []string{"This invoice was changed after the page was shown, so nothing was charged.",
			"Check the invoice below, then pay again."}}
		return h.render(c, refused.Kind.Status(), "pay", p)
	case errors.Is(err, payment.ErrNotPayable):
		if p.Alert == nil { // a suspended biller's page says so already
			p.Alert = &alert{Kind: "info", Paragraphs: []string{"This invoice can no longer be paid, so nothing was charged."}}
		}
		return h.render(c, refused.Kind.Status(), "pay", p)
	case refused != nil && refused.Field == "amount" && refused.Kind == rule.Conflict:
		p.Alert = &alert{Kind: "info", Paragraphs: []string{refused.Message,
			"Reload this page in a minute to see whether anything is left to pay."}}
		return h.render(c, refused.Kind.Status(), "pay", p)
	case refused != nil && (refused.Kind == rule.Invalid || refused.Kind == rule.Unprocessable && refused.Field == "amount"):
		p.Errors = web.FromRule(refused, fieldOrder)
		if refused.Suggest != "" {
			p.Form.Amount = refused.Suggest
		}
		return h.render(c, refused.Kind.Status(), "pay", p)
	case errors.Is(err, processor.ErrProcessorError):
		// The processor answered, with an error: a bad gateway, not an outage.
		return h.unanswered(c, p, http.StatusBadGateway, err,
			"The card processor could not take this payment, so nothing was charged.", "Please try again in a few minutes.")
	case web.OutageOf(err) == web.Processor, errors.Is(err, payment.ErrVoided):
		return h.unanswered(c, p, http.StatusServiceUnavailable, err,
			"We could not reach the card processor, so nothing was charged.", "Please try again in a few minutes.")
	}
	return h.failure(c, err)
}

// payForm is the POST of the pay form as the page reads it, for
// payment.PayByLink.
type payForm struct {
	h       *handler
	c       echo.Context
	token   string
	form    form // once Attempt read it
	version int  // once Attempt read it
}

// formError is a form the page cannot take: the page to answer.
type formError struct {
	status        int
	heading, text string
}

func (e *formError) Error() string { return "paypage: " + e.heading }

// Attempt reads the form and its form token.
func (f *payForm) Attempt() (uuid.UUID, error) {
	r := f.c.Request()
	if status, heading := web.ParseForm(f.c, maxForm); status != 0 {
		return uuid.Nil, &formError{status, heading, "Nothing was charged. Go back to the invoice and try again."}
	}
	attempt, version, valid := f.h.readFormToken(f.token, r.PostForm.Get("csrfToken"))
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" || !valid {
		return uuid.Nil, &formError{http.StatusForbidden, "This form was not sent from the invoice page",
			"Nothing was charged. Open the invoice again from the link you received, and pay from there."}
	}
	f.form, f.version = readForm(r.PostForm), version
	return attempt, nil
}

// Version is the invoice's version the form was shown with, from its
// form token.
func (f *payForm) Version() int { return f.version }

// Request is the payment the form asks for, or its fields refused. The
// consent to future charges is taken where the page offers it, in the
// words it shows.
func (f *payForm) Request(inv invoice.Invoice) (payment.Request, error) {
	if !f.h.offersConsent(f.c.Request().Context(), inv) {
		f.form.ChargeConsent = false
	}
	req, errs := f.form.validate(inv.Balance(), f.h.Now())
	if errs != nil {
		fields := map[string][]string{}
		for field, msg := range errs {
			fields[field] = []string{msg}
		}
		return payment.Request{}, rule.InvalidFields(fields)
	}
	if f.form.ChargeConsent {
		req.ChargeConsent = payment.ChargeConsentWords(biller(inv))
	}
	return req, nil
}

// offersConsent: the invoice was issued by a recurring series, so its page
// offers the consent to future charges. When that cannot be read the page
// goes without the offer (logged): paying does not depend on it.
func (h *handler) offersConsent(ctx context.Context, inv invoice.Invoice) bool {
	if h.Recurring == nil {
		return false
	}
	issued, err := h.Recurring.IssuedBySeries(ctx, inv.ID)
	if err != nil {
		h.Log.Warn("paypage: consent to future charges not offered", "invoice_id", inv.ID.String(), "error", err.Error())
	}
	return issued
}

// unanswered is the form again, at status with Retry-After, saying why the
// card processor gave no answer to keep (paragraphs); it returns payErr,
// for the request log to log: the page is already sent.
func (h *handler) unanswered(c echo.Context, p page, status int, payErr error, paragraphs ...string) error {
	p.Alert = &alert{Kind: "error", Paragraphs: paragraphs}
	web.RetryLater(c)
	if err := h.render(c, status, "pay", p); err != nil {
		return err
	}
	return payErr
}

// answer is the page of a form the processor answered: the receipt of an
// approval, or the form again with the decline. A form sent again gets the
// same answer.
func (h *handler) answer(c echo.Context, token string, f form, paid payment.PaidByLink) error {
	if paid.Outcome.Approved {
		return c.Redirect(http.StatusSeeOther, "/pay/"+token+"/receipt/"+paid.Outcome.Payment.ID.String())
	}
	p := h.payPage(c.Request().Context(), paid.Invoice, token)
	p.Form = f.redisplay()
	p.Alert = &alert{Kind: "error", Paragraphs: []string{
		"The payment did not go through: " + paid.Outcome.DeclineReason, "Nothing was charged. Check the card details, or use another card."}}
	return h.render(c, http.StatusPaymentRequired, "pay", p)
}

// tooManyAttempts is the answer past a limit of pay attempts.
func (h *handler) tooManyAttempts(c echo.Context, wait time.Duration, why string) error {
	secs := int(math.Ceil(wait.Seconds()))
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	minutes := (secs + 59) / 60
	return h.message(c, http.StatusTooManyRequests, "Too many attempts", why+" Nothing more was charged.",
		"Please try again in "+plural(minutes, "minute")+".")
}

// invoicePDF is GET /pay/:token/invoice.pdf: the invoice as a PDF
// document, the same the API answers.
func (h *handler) invoicePDF(c echo.Context) error {
	inv, done, err := h.invoiceOf(c)
	if done {
		return err
	}
	if done, err := h.pdfAllowed(c, inv); done {
		return err
	}
	doc, err := h.PDFs.Invoice(c.Request().Context(), inv, h.Invoices.Link(&inv))
	if err != nil {
		return h.failure(c, err)
	}
	return h.pdf(c, "invoice-"+inv.InvoiceNumber, doc)
}

// pdfAllowed counts a document asked of the invoice's link from the
// client's network (an IPv6 address's /64); past payment.PDFLimit in
// payment.PDFWindow it answers 429 and done is true. Anyone holding a pay
// link may ask, so drawing is never theirs to starve.
func (h *handler) pdfAllowed(c echo.Context, inv invoice.Invoice) (done bool, err error) {
	wait, err := h.Payments.PDFRequest(c.Request().Context(), inv.ID, framing.Network(c.RealIP()))
	switch {
	case err != nil:
		return true, h.failure(c, err)
	case wait > 0:
		secs := int(math.Ceil(wait.Seconds()))
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		return true, h.message(c, http.StatusTooManyRequests, "Too many downloads",
			"This invoice's documents were asked for too often from your network in the last minute.",
			"Please try again in "+plural(secs, "second")+".")
	}
	return false, nil
}

// pdf sends a PDF document as a download named name.
func (h *handler) pdf(c echo.Context, name string, doc []byte) error {
	c.Response().Header().Set("Content-Disposition", invoicepdf.Disposition(name))
	return c.Blob(http.StatusOK, invoicepdf.ContentType, doc)
}

// receipt is GET /pay/:token/receipt/:paymentId, and with .pdf after the
// id the receipt as a PDF document.
func (h *handler) receipt(c echo.Context) error {
	token := c.Param("token")
	param, asPDF := strings.CutSuffix(c.Param("paymentId"), ".pdf")
	id, err := uuid.Parse(param)
	if err != nil {
		return h.notFound(c)
	}
	inv, done, err := h.invoiceOf(c)
	if done {
		return err
	}
	for _, p := range inv.Payments {
		if p.ID == id && p.Method == invoice.MethodCard {
			balance := inv.BalanceAfter(p)
			if asPDF {
				if done, err := h.pdfAllowed(c, inv); done {
					return err
				}
				doc, err := h.PDFs.Receipt(c.Request().Context(), inv, p, balance)
				if err != nil {
					return h.failure(c, err)
				}
				return h.pdf(c, "receipt-"+inv.InvoiceNumber, doc)
			}
			return h.render(c, http.StatusOK, "receipt", page{AccentCSS: accentCSS(inv),
				Title:   "Receipt for invoice " + inv.InvoiceNumber + " from " + biller(inv),
				Invoice: viewOf(inv), Receipt: receiptOf(p, balance, inv.Biller.Zone()), Back: "/pay/" + token,
				PDF: "/pay/" + token + "/receipt/" + id.String() + ".pdf",
			})
		}
	}
	return h.notFound(c)
}

// asset serves the stylesheet under its hashed name.
func (h *handler) asset(c echo.Context) error {
	if ok, err := web.ServeStylesheet(c, c.Param("file")); ok {
		return err
	}
	return h.notFound(c)
}

// accentPrefix is where a business's accent colour's stylesheet is
// served: accentPrefix + rrggbb + ".css".
const accentPrefix = "/pay/accent/"

var accentFile = regexp.MustCompile(`^([0-9a-f]{6})\.css$`)

// immutable is the Cache-Control of what an address names for good (a
// logo by its hash, a colour by its digits).
const immutable = "public, max-age=31536000, immutable"

// logo is GET /pay/logos/{sha256}.png: a business's logo, as its Owners
// and Admins set it, under the hash of its bytes.
func (h *handler) logo(c echo.Context) error {
	hash, ok := strings.CutSuffix(c.Param("file"), ".png")
	if !ok {
		return h.notFound(c)
	}
	png, err := h.Directory.LogoPNG(c.Request().Context(), hash)
	if errors.Is(err, directory.ErrNoLogo) {
		return h.notFound(c)
	}
	if err != nil {
		return h.failure(c, err)
	}
	c.Response().Header().Set("Cache-Control", immutable)
	return c.Blob(http.StatusOK, "image/png", png)
}

// accent is GET /pay/accent/{rrggbb}.css: the pay button and links in a
// business's accent colour (the pages' policy takes no inline style).
// The colour is checked when it is set (directory.AccentColor); any
// #rrggbb is drawn here, so the address alone says what it holds.
func (h *handler) accent(c echo.Context) error {
	m := accentFile.FindStringSubmatch(c.Param("file"))
	if m == nil {
		return h.notFound(c)
	}
	color := "#" + m[1]
	c.Response().Header().Set("Cache-Control", immutable)
	return c.Blob(http.StatusOK, "text/css; charset=utf-8", []byte(
		"button[type=\"submit\"]:not(.secondary):not(.danger), button[type=\"submit\"]:not(.secondary):not(.danger):hover { background: "+color+"; }\n"+
			"button[type=\"submit\"]:not(.secondary):not(.danger):hover { filter: brightness(0.85); }\n"+
			"a { color: "+color+"; }\n.brand { border-top: 0.35rem solid "+color+"; }\n"))
}

func (h *handler) notFound(c echo.Context) error {
	return h.message(c, http.StatusNotFound, "Invoice not found",
		"There is no invoice at this address. Check that the link is complete, exactly as you received it.")
}

// failure answers a server-side failure with a page, and returns err so
// that the request log records it (the page is already sent by then); a
// refusal no page took care of, with its words, at its kind's status.
func (h *handler) failure(c echo.Context, err error) error {
	if r := rule.As(err); r != nil {
		return h.message(c, r.Kind.Status(), r.Title, r.Message)
	}
	_ = h.message(c, web.FailureStatus(c, err), "Something went wrong",
		"We could not complete this request, and nothing was charged. Please try again in a few minutes.")
	return err
}

func (h *handler) message(c echo.Context, status int, heading string, paragraphs ...string) error {
	p := page{Title: heading, Heading: heading, Paragraphs: paragraphs}
	if token := c.Param("token"); token != "" && status != http.StatusNotFound && tokenPattern.MatchString(token) {
		p.Back = "/pay/" + token
	}
	return h.render(c, status, "message", p)
}

func (h *handler) payPage(ctx context.Context, inv invoice.Invoice, token string) page {
	var notice *alert
	if inv.Biller.Suspended && inv.Status.Payable() {
		notice = &alert{Kind: "info", Paragraphs: []string{
			biller(inv) + " cannot take payments online just now, so nothing can be charged here.",
			"Please contact them about this invoice."}}
	}
	return page{
		AccentCSS: accentCSS(inv),
		Alert:     notice,
		Title:     "Invoice " + inv.InvoiceNumber + " from " + biller(inv),
		Invoice:   viewOf(inv),
		ShowForm:  inv.Status.Payable() && !inv.Biller.Suspended,
		Consent:   consentView(h.offersConsent(ctx, inv), inv),
		Action:    "/pay/" + token,
		PDF:       "/pay/" + token + "/invoice.pdf",
		FormToken: h.formToken(token, inv.Version),
	}
}

func (h *handler) render(c echo.Context, status int, name string, p page) error {
	p.Stylesheet = stylesheet
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// formToken ties a rendered form to its pay link and to the invoice's
// version it shows, and gives it a one-time attempt id: the id, the
// version after a dot unless it is 1, then an HMAC of the link's token,
// the id and the version under a server key, checked on POST. (A token
// of version 1 is as tokens were before invoices had versions.)
func (h *handler) formToken(payToken string, version int) string {
	attempt := uuid.New()
	id := base64.RawURLEncoding.EncodeToString(attempt[:])
	if version != 1 {
		id += "." + strconv.Itoa(version)
	}
	return id + "." + h.formMAC(payToken, attempt, version)
}

func (h *handler) formMAC(payToken string, attempt uuid.UUID, version int) string {
	m := hmac.New(sha256.New, h.FormKey)
	m.Write([]byte("pay form\x00" + payToken + "\x00"))
	m.Write(attempt[:])
	if version != 1 {
		m.Write([]byte("\x00" + strconv.Itoa(version)))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// readFormToken checks a posted form token and returns its attempt id and
// the invoice's version it was made for.
func (h *handler) readFormToken(payToken, got string) (uuid.UUID, int, bool) {
	parts := strings.Split(got, ".")
	version := 1
	switch len(parts) {
	case 2:
	case 3:
		v, err := strconv.Atoi(parts[1])
		if err != nil || v < 2 || parts[1] != strconv.Itoa(v) {
			return uuid.Nil, 0, false
		}
		version = v
	default:
		return uuid.Nil, 0, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(raw) != len(uuid.UUID{}) {
		return uuid.Nil, 0, false
	}
	attempt := uuid.UUID(raw)
	return attempt, version, hmac.Equal([]byte(h.formMAC(payToken, attempt, version)), []byte(parts[len(parts)-1]))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
