package portal

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/rule"
)

// answer is the page after a domain call: a refusal as a form again (or
// a page), a failure of the service, or nothing (err nil).
func (h *handler) answer(c echo.Context, err error, form *formPage) error {
	if r := rule.As(err); r != nil {
		return h.refused(c, r, form)
	}
	return h.failure(c, err)
}

// afterSignIn is where a new session goes: the second step, the choice
// of organization, or home.
func (h *handler) afterSignIn(c echo.Context, s people.Session) error {
	h.setSession(c, s.Token)
	if s.Device != "" {
		h.setDevice(c, s.Device)
	}
	switch {
	case s.AwaitingSecondFactor:
		return c.Redirect(http.StatusSeeOther, "/portal/sign-in/two-factor")
	case s.Membership == nil:
		return c.Redirect(http.StatusSeeOther, "/portal/organizations")
	}
	return c.Redirect(http.StatusSeeOther, homePath)
}

func signInForm(email string) *formPage {
	return &formPage{name: "signin", page: page{Title: "Sign in", Form: url.Values{"email": {email}}}, fields: []string{"email", "password"}}
}

// signInPage is GET /portal/sign-in.
func (h *handler) signInPage(c echo.Context) error {
	if v, err := h.session(c); err == nil && v != nil && !v.AwaitingSecondFactor {
		return c.Redirect(http.StatusSeeOther, homePath)
	}
	return h.render(c, http.StatusOK, "signin", signInForm("").page)
}

// signIn is POST /portal/sign-in: email and password. A wrong one of
// either gets one answer, 401.
func (h *handler) signIn(c echo.Context) error {
	f := c.Request().PostForm
	email := f.Get("email")
	s, err := h.People.SignIn(c.Request().Context(), email, f.Get("password"), address(c), h.device(c))
	if err == people.ErrWrongCredentials {
		form := signInForm(email)
		form.page.Alert = people.ErrWrongCredentials.Message
		return h.render(c, http.StatusUnauthorized, form.name, form.page)
	}
	if err != nil {
		return h.answer(c, err, signInForm(email))
	}
	return h.afterSignIn(c, s)
}

func secondFactorForm() *formPage {
	return &formPage{name: "second-factor", page: page{Title: "Second step of signing in"}, fields: []string{"code", "recoveryCode"}}
}

// secondFactorPage is GET /portal/sign-in/two-factor.
func (h *handler) secondFactorPage(c echo.Context) error {
	v, err := h.session(c)
	if err != nil {
		return h.failure(c, err)
	}
	if v == nil {
		return c.Redirect(http.StatusSeeOther, signInPath)
	}
	if !v.AwaitingSecondFactor {
		return c.Redirect(http.StatusSeeOther, homePath)
	}
	return h.render(c, http.StatusOK, "second-factor", secondFactorForm().page)
}

// secondFactor is POST /portal/sign-in/two-factor: code or recoveryCode.
func (h *handler) secondFactor(c echo.Context) error {
	ck, err := c.Cookie(h.sessionCookie)
	if err != nil {
		return c.Redirect(http.StatusSeeOther, signInPath)
	}
	f := c.Request().PostForm
	s, err := h.People.SecondFactor(c.Request().Context(), ck.Value, f.Get("code"), f.Get("recoveryCode"), address(c))
	if err == people.ErrNoSession {
		h.clearSession(c)
		return c.Redirect(http.StatusSeeOther, signInPath)
	}
	if r := rule.As(err); r != nil && r.Kind == rule.Invalid {
		form := secondFactorForm()
		form.page.Errors = nil
		p := form.page
		p.Errors.Add(firstField(r), r.Fields[firstField(r)][0])
		return h.render(c, http.StatusUnauthorized, form.name, p)
	}
	if err != nil {
		return h.answer(c, err, secondFactorForm())
	}
	return h.afterSignIn(c, s)
}

func firstField(r *rule.Error) string {
	for f := range r.Fields {
		return f
	}
	return ""
}

// signOut is POST /portal/sign-out: the session ends in the database.
func (h *handler) signOut(c echo.Context) error {
	if ck, err := c.Cookie(h.sessionCookie); err == nil {
		if err := h.People.SignOut(c.Request().Context(), ck.Value, c.RealIP()); err != nil {
			return h.failure(c, err)
		}
	}
	h.clearSession(c)
	return c.Redirect(http.StatusSeeOther, signInPath)
}

// resetRequestPage is GET /portal/password-reset.
func (h *handler) resetRequestPage(c echo.Context) error {
	return h.render(c, http.StatusOK, "reset-request", page{Title: "Reset your password"})
}

// resetRequest is POST /portal/password-reset: the same page whatever the
// email, so that it tells nobody which emails have an account.
func (h *handler) resetRequest(c echo.Context) error {
	email := c.Request().PostForm.Get("email")
	if err := h.People.RequestReset(c.Request().Context(), email, address(c)); err != nil {
		return h.answer(c, err, &formPage{name: "reset-request", page: page{Title: "Reset your password", Form: url.Values{"email": {email}}},
			fields: []string{"email"}})
	}
	return h.render(c, http.StatusOK, "reset-request", page{Title: "Reset your password",
		Notice: "If an account has this email, a link to choose a new password is on its way to it. The link works once, for 30 minutes."})
}

func resetForm() *formPage {
	return &formPage{name: "reset", page: page{Title: "Choose a new password"}, fields: []string{"password"}}
}

// resetPage is GET /portal/password-reset/{token}.
func (h *handler) resetPage(c echo.Context) error {
	if err := h.People.ResetValid(c.Request().Context(), c.Param("token")); err != nil {
		return h.answer(c, err, nil)
	}
	return h.render(c, http.StatusOK, "reset", resetForm().page)
}

// reset is POST /portal/password-reset/{token}: password.
func (h *handler) reset(c echo.Context) error {
	err := h.People.ResetPassword(c.Request().Context(), c.Param("token"), c.Request().PostForm.Get("password"), c.RealIP())
	if err != nil {
		return h.answer(c, err, resetForm())
	}
	h.clearSession(c)
	return c.Redirect(http.StatusSeeOther, signInPath)
}

func invitationForm(in people.Invited, name string) *formPage {
	return &formPage{name: "invitation", page: page{Title: "Join " + in.OrganizationName, Data: in,
		Form: url.Values{"name": {name}}}, fields: []string{"name", "password"}}
}

// invitationPage is GET /portal/invitations/{token}.
func (h *handler) invitationPage(c echo.Context) error {
	in, err := h.People.Invitation(c.Request().Context(), c.Param("token"))
	if err != nil {
		return h.answer(c, err, nil)
	}
	return h.render(c, http.StatusOK, "invitation", invitationForm(in, in.Name).page)
}

// acceptInvitation is POST /portal/invitations/{token}: name and password
// for a person with no sign-in yet, else their password.
func (h *handler) acceptInvitation(c echo.Context) error {
	ctx := c.Request().Context()
	in, err := h.People.Invitation(ctx, c.Param("token"))
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	s, err := h.People.Accept(ctx, c.Param("token"), f.Get("name"), f.Get("password"), c.RealIP())
	if err != nil {
		return h.answer(c, err, invitationForm(in, f.Get("name")))
	}
	return h.afterSignIn(c, s)
}

// organizations is GET /portal/organizations: the person's organizations.
func (h *handler) organizations(c echo.Context) error {
	v := visitOf(c)
	ms, err := h.People.Memberships(c.Request().Context(), v.Person.ID)
	if err != nil {
		return h.failure(c, err)
	}
	return h.render(c, http.StatusOK, "organizations", page{Title: "Your organizations", Data: ms})
}

// switchOrganization is POST /portal/organizations/{id}/switch: a new
// session in that organization.
func (h *handler) switchOrganization(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	s, err := h.People.Switch(c.Request().Context(), visitOf(c).token, id)
	if err != nil {
		return h.answer(c, err, nil)
	}
	h.setSession(c, s.Token)
	return c.Redirect(http.StatusSeeOther, homePath)
}
