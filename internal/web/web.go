// Package web is what payreq's HTML fronts (the pay page, the portal, the
// sign-up page) share: the page layout, the stylesheet, the security
// headers, the rendering of form errors (a message beside its field, tied
// to it with aria-describedby, and a summary above the form), and the CSRF
// check of the portal and the sign-up page (CSRF).
//
// A front parses its own templates with Parse, which adds the layout
// ("layout", with the blocks "header", "content" and "footer" for the front
// to define), the "error-summary" template and the functions below. The
// data of every page has Title, Stylesheet and an Errored method (its
// title then starts "Error: ").
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/rule"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed style.css
var styleCSS []byte

// StylesheetName is the stylesheet's file name; it carries a hash of its
// content, so browsers may keep it for good. A front serves it under its
// own prefix with ServeStylesheet.
var StylesheetName = func() string {
	sum := sha256.Sum256(styleCSS)
	return "style-" + hex.EncodeToString(sum[:6]) + ".css"
}()

// ServeStylesheet answers the stylesheet when file is its name, and
// reports false otherwise (the front answers its own 404).
func ServeStylesheet(c echo.Context, file string) (bool, error) {
	if file != StylesheetName {
		return false, nil
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	return true, c.Blob(http.StatusOK, "text/css; charset=utf-8", styleCSS)
}

// ContentSecurityPolicy allows a page's own stylesheet, images of its own
// or inline as data: URIs (the portal's QR code), and forms posting to
// the service itself; no script, no framing.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Headers puts the security headers on every answer of a front: the
// policy above, no framing, no referrer, no caching, no sniffing.
func Headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		return next(c)
	}
}

// Parse is a front's page: the shared layout and templates, then the
// front's files (patterns within fsys).
func Parse(fsys fs.FS, patterns ...string) *template.Template {
	return ParseFuncs(nil, fsys, patterns...)
}

// ParseFuncs is Parse for a front whose templates call functions of its
// own (funcs) beside Funcs.
func ParseFuncs(funcs template.FuncMap, fsys fs.FS, patterns ...string) *template.Template {
	t := template.Must(template.New("").Funcs(Funcs).Funcs(funcs).ParseFS(templateFS, "templates/*.html"))
	return template.Must(t.ParseFS(fsys, patterns...))
}

// FieldError is a message beside a form's field; Field "" is a message
// about the whole form, shown in the summary only.
type FieldError struct{ Field, Message string }

// Errors are a form's messages in the order of its fields.
type Errors []FieldError

// Of is the message of field, or "".
func (e Errors) Of(field string) string {
	for _, f := range e {
		if f.Field == field {
			return f.Message
		}
	}
	return ""
}

// Add appends a message; a field keeps its first.
func (e *Errors) Add(field, message string) {
	if field != "" && e.Of(field) != "" {
		return
	}
	*e = append(*e, FieldError{field, message})
}

// FromRule is a domain refusal as a form's messages: an Invalid one's
// Fields in the order of fields (the form's own), a refusal of one field
// beside it, and any other as a message about the whole form.
func FromRule(err *rule.Error, fields []string) Errors {
	var out Errors
	if len(err.Fields) > 0 {
		names := make([]string, 0, len(err.Fields))
		for f := range err.Fields {
			names = append(names, f)
		}
		slices.SortFunc(names, func(a, b string) int {
			ia, ib := slices.Index(fields, a), slices.Index(fields, b)
			if ia < 0 {
				ia = len(fields)
			}
			if ib < 0 {
				ib = len(fields)
			}
			if ia != ib {
				return ia - ib
			}
			return strings.Compare(a, b)
		})
		for _, f := range names {
			field := f
			if !slices.Contains(fields, f) {
				field = ""
			}
			out.Add(field, strings.Join(err.Fields[f], " "))
		}
		return out
	}
	field := err.Field
	if !slices.Contains(fields, field) {
		field = ""
	}
	out.Add(field, err.Message)
	return out
}

// Funcs are the functions every front's templates may call.
var Funcs = template.FuncMap{
	// describedBy is an input's accessibility attributes: its hints and,
	// when it has an error, the error and aria-invalid.
	"describedBy": func(errs Errors, field string, hints ...string) template.HTMLAttr {
		ids := slices.Clone(hints)
		invalid := errs.Of(field) != ""
		if invalid {
			ids = append(ids, field+"-error")
		}
		var b strings.Builder
		if len(ids) > 0 {
			b.WriteString(` aria-describedby="` + template.HTMLEscapeString(strings.Join(ids, " ")) + `"`)
		}
		if invalid {
			b.WriteString(` aria-invalid="true"`)
		}
		return template.HTMLAttr(b.String())
	},
	// fieldError is the message beside field, or nothing.
	"fieldError": func(errs Errors, field string) template.HTML {
		msg := errs.Of(field)
		if msg == "" {
			return ""
		}
		return template.HTML(`<p class="error" id="` + template.HTMLEscapeString(field) + `-error">` +
			template.HTMLEscapeString(msg) + `</p>`)
	},
	// datetime is a moment as a <time> element: ISO 8601 for machines,
	// words for people, in UTC.
	"datetime": func(v any) template.HTML {
		var t time.Time
		switch v := v.(type) {
		case time.Time:
			t = v
		case *time.Time:
			if v == nil {
				return ""
			}
			t = *v
		default:
			return ""
		}
		t = t.UTC()
		return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `">` + t.Format("2 Jan 2006, 15:04 UTC") + `</time>`)
	},
	"has": func(list []string, s string) bool { return slices.Contains(list, s) },
}
