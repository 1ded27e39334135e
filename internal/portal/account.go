package portal

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/people"
)

func parseID(s string) (uuid.UUID, bool) {
	id, err := uuid.Parse(s)
	return id, err == nil
}

type homeData struct {
	// Summary: for members who read payments (payments.view), else nil.
	Summary *invoice.Summary
	// PaidThisWeek: approved card sales and payments recorded outside
	// the card, since Monday in the time zone of each payment's location.
	PaidThisWeek    invoice.Tally
	DepositsPending invoice.Tally
	// CanCreate: the member makes invoices (payments.create).
	CanCreate bool
	// Activity: the latest events the member may read (events.view), in
	// words.
	Activity []activity
}

// homeActivity is how many of the latest events home shows.
const homeActivity = 10

// activity is an event as home says it: "Invoice paid · INV-1843 ·
// $30.00 · Dana Whitfield".
type activity struct {
	ID, Words string
	At        time.Time
}

// activityOf says an event in words: its type's ("card_payment.refunded":
// "Card payment refunded"), what it is about, and the customer's name.
func activityOf(e event.Event) activity {
	words := strings.NewReplacer(".", " ", "_", " ").Replace(e.Type)
	words = strings.ToUpper(words[:1]) + words[1:]
	var d struct {
		CustomerName string `json:"customerName"`
		Invoice      struct {
			CustomerName string `json:"customerName"`
		} `json:"invoice"`
	}
	_ = json.Unmarshal(e.Data, &d) // about(e) says what it can of any data
	parts := []string{words}
	for _, p := range []string{about(e), d.CustomerName, d.Invoice.CustomerName} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return activity{ID: e.ID.String(), Words: strings.Join(parts, " · "), At: e.CreatedAt}
}

// home is GET /portal/: the organization the member is in, where to go,
// and, for members who read payments, the day's figures: open and overdue
// invoices, what was paid this week, deposits on their way.
func (h *handler) home(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	d := homeData{CanCreate: m.Can(auth.PaymentsCreate)}
	if m.Can(auth.PaymentsView) {
		sum, err := h.Invoices.Summary(ctx, m.OrganizationID)
		if err != nil {
			return h.failure(c, err)
		}
		d.Summary = &sum
		sales, err := h.Payments.SalesThisWeek(ctx, m.OrganizationID)
		if err != nil {
			return h.failure(c, err)
		}
		d.PaidThisWeek = sum.RecordedThisWeek.Plus(sales)
		if d.DepositsPending.Count, d.DepositsPending.Sum, err = h.Payments.DepositsPending(ctx, m.OrganizationID); err != nil {
			return h.failure(c, err)
		}
	}
	if m.Can(auth.EventsView) {
		events, _, err := h.Events.List(ctx, m.OrganizationID, m.Permissions, event.Filter{}, homeActivity, "")
		if err != nil {
			return h.failure(c, err)
		}
		for _, e := range events {
			d.Activity = append(d.Activity, activityOf(e))
		}
	}
	return h.render(c, http.StatusOK, "home", page{Title: m.OrganizationName, Data: d})
}

func accountForm() *formPage {
	return &formPage{name: "account", page: page{Title: "Your account"}, fields: []string{"currentPassword", "password"}}
}

// account is GET /portal/account: the password form and the second factor.
func (h *handler) account(c echo.Context) error {
	p := accountForm().page
	if c.QueryParam("changed") == "password" {
		p.Notice = "Your password was changed, and your other sessions were ended."
	}
	return h.render(c, http.StatusOK, "account", p)
}

// changePassword is POST /portal/account/password.
func (h *handler) changePassword(c echo.Context) error {
	v := visitOf(c)
	f := c.Request().PostForm
	if err := h.People.ChangePassword(c.Request().Context(), v.Session, v.token, f.Get("currentPassword"), f.Get("password"), c.RealIP()); err != nil {
		return h.answer(c, err, accountForm())
	}
	return c.Redirect(http.StatusSeeOther, "/portal/account?changed=password")
}

type twoFactorData struct {
	Setup    people.TwoFactorSetup
	QR       template.URL // a PNG data: URI, which the policy allows
	Codes    []string
	Required bool
}

// twoFactorPage is GET /portal/account/two-factor: the QR code and the
// secret as text, to set up an authenticator app.
func (h *handler) twoFactorPage(c echo.Context) error {
	v := visitOf(c)
	form, err := h.twoFactorForm(c, v)
	if err != nil {
		return h.failure(c, err)
	}
	return h.render(c, http.StatusOK, form.name, form.page)
}

func (h *handler) twoFactorForm(c echo.Context, v *visit) (*formPage, error) {
	setup, err := h.People.BeginTwoFactor(c.Request().Context(), v.Person)
	if err != nil {
		return nil, err
	}
	return &formPage{name: "two-factor", page: page{Title: "Set up a second factor",
		Data: twoFactorData{Setup: setup, QR: template.URL(setup.QR), Required: v.Membership.TwoFactorRequired && !v.Person.TwoFactor}}, fields: []string{"code"}}, nil
}

// confirmTwoFactor is POST /portal/account/two-factor: a code of the app
// turns the second factor on; the answer shows the recovery codes, once.
func (h *handler) confirmTwoFactor(c echo.Context) error {
	v := visitOf(c)
	codes, err := h.People.ConfirmTwoFactor(c.Request().Context(), v.Person, c.Request().PostForm.Get("code"), c.RealIP())
	if err != nil {
		form, ferr := h.twoFactorForm(c, v)
		if ferr != nil {
			return h.failure(c, ferr)
		}
		return h.answer(c, err, form)
	}
	v.Person.TwoFactor = true
	return h.render(c, http.StatusOK, "recovery-codes", page{Title: "Your recovery codes", Data: twoFactorData{Codes: codes}})
}
