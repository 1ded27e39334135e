package portal

import (
	"cmp"
	"net/http"
	"net/url"
	"strings"

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

// afterSignIn is where a new session goes: the second step, next (a
// portal page the sign-in was asked for, such as an invitation), the
// choice of organization, or home.
func (h *handler) afterSignIn(c echo.Context, s people.Session, next string) error {
	h.setSession(c, s.Token)
	if s.Device != "" {
		h.setDevice(c, s.Device)
	}
	next = localPath(next)
	switch {
	case s.AwaitingSecondFactor && next != "":
		return c.Redirect(http.StatusSeeOther, "/portal/sign-in/two-factor?next="+url.QueryEscape(next))
	case s.AwaitingSecondFactor:
		return c.Redirect(http.StatusSeeOther, "/portal/sign-in/two-factor")
	case next != "":
		return c.Redirect(http.StatusSeeOther, next)
	case s.Membership == nil:
		return c.Redirect(http.StatusSeeOther, "/portal/organizations")
	}
	return c.Redirect(http.StatusSeeOther, homePath)
}

// localPath is next when it is a page of the portal, else "": a sign-in
// sends nobody to another site.
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || !strings.HasPrefix(next, "/portal/") || strings.ContainsAny(next, "\\\x00") {
		return ""
	}
	return next
}

func signInForm(email, next string) *formPage {
	return &formPage{name: "signin", page: page{Title: "Sign in", Form: url.Values{"email": {email}, "next": {localPath(next)}}},
		fields: []string{"email", "password"}}
}

// signInPage is GET /portal/sign-in; ?next= is where to go after.
func (h *handler) signInPage(c echo.Context) error {
	next := c.QueryParam("next")
	if v, err := h.session(c); err == nil && v != nil && !v.AwaitingSecondFactor {
		return c.Redirect(http.StatusSeeOther, cmp.Or(localPath(next), homePath))
	}
	return h.render(c, http.StatusOK, "signin", signInForm("", next).page)
}

// signIn is POST /portal/sign-in: email and password. A wrong one of
// either gets one answer, 401.
func (h *handler) signIn(c echo.Context) error {
	f := c.Request().PostForm
	email, next := f.Get("email"), f.Get("next")
	s, err := h.People.SignIn(c.Request().Context(), email, f.Get("password"), address(c), h.device(c))
	if err == people.ErrWrongCredentials {
		form := signInForm(email, next)
		form.page.Alert = people.ErrWrongCredentials.Message
		return h.render(c, http.StatusUnauthorized, form.name, form.page)
	}
	if err != nil {
		return h.answer(c, err, signInForm(email, next))
	}
	return h.afterSignIn(c, s, next)
}

func secondFactorForm(next string) *formPage {
	return &formPage{name: "second-factor", page: page{Title: "Second step of signing in", Form: url.Values{"next": {localPath(next)}}},
		fields: []string{"code", "recoveryCode"}}
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
	return h.render(c, http.StatusOK, "second-factor", secondFactorForm(c.QueryParam("next")).page)
}

// secondFactor is POST /portal/sign-in/two-factor: code or recoveryCode.
func (h *handler) secondFactor(c echo.Context) error {
	ck, err := c.Cookie(h.sessionCookie)
	if err != nil {
		return c.Redirect(http.StatusSeeOther, signInPath)
	}
	f := c.Request().PostForm
	next := f.Get("next")
	s, err := h.People.SecondFactor(c.Request().Context(), ck.Value, f.Get("code"), f.Get("recoveryCode"), address(c))
	if err == people.ErrNoSession {
		h.clearSession(c)
		return c.Redirect(http.StatusSeeOther, signInPath)
	}
	if r := rule.As(err); r != nil && r.Kind == rule.Invalid {
		form := secondFactorForm(next)
		form.page.Errors = nil
		p := form.page
		p.Errors.Add(firstField(r), r.Fields[firstField(r)][0])
		return h.render(c, http.StatusUnauthorized, form.name, p)
	}
	if err != nil {
		return h.answer(c, err, secondFactorForm(next))
	}
	return h.afterSignIn(c, s, next)
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

type invitationData struct {
	Invited people.Invited
	// Other: signed in as another person than the invitation's.
	Other bool
}

func invitationForm(in people.Invited, other bool, name string) *formPage {
	return &formPage{name: "invitation", page: page{Title: "Join " + in.OrganizationName, Data: invitationData{Invited: in, Other: other},
		Form: url.Values{"name": {name}}}, fields: []string{"name", "password"}}
}

// invitation reads the invitation of the request and, for a person who
// has a sign-in, their session: nil with a redirect to sign in (and back
// here after) when they are not signed in yet.
func (h *handler) invitation(c echo.Context) (people.Invited, *visit, error) {
	in, err := h.People.Invitation(c.Request().Context(), c.Param("token"))
	if err != nil || !in.HasPassword {
		return in, nil, err
	}
	v, err := h.session(c)
	if err != nil || v == nil || v.AwaitingSecondFactor {
		return in, nil, err
	}
	c.Set(visitKey, v)
	return in, v, nil
}

// invitationPage is GET /portal/invitations/{token}. A person without a
// sign-in chooses a name and a password; one with a sign-in signs in the
// ordinary way (both steps, the same limits), comes back, and is asked
// only to accept.
func (h *handler) invitationPage(c echo.Context) error {
	in, v, err := h.invitation(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if in.HasPassword && v == nil {
		return c.Redirect(http.StatusSeeOther, signInPath+"?next="+url.QueryEscape(c.Request().URL.Path))
	}
	return h.render(c, http.StatusOK, "invitation", invitationForm(in, v != nil && v.Person.ID != in.PersonID, in.Name).page)
}

// acceptInvitation is POST /portal/invitations/{token}: name and password
// for a person with no sign-in yet; nothing more for one signed in.
func (h *handler) acceptInvitation(c echo.Context) error {
	ctx := c.Request().Context()
	in, v, err := h.invitation(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if in.HasPassword {
		if v == nil {
			return c.Redirect(http.StatusSeeOther, signInPath+"?next="+url.QueryEscape(c.Request().URL.Path))
		}
		s, err := h.People.AcceptSignedIn(ctx, c.Param("token"), v.token, c.RealIP())
		if err != nil {
			return h.answer(c, err, invitationForm(in, v.Person.ID != in.PersonID, ""))
		}
		return h.afterSignIn(c, s, "")
	}
	f := c.Request().PostForm
	s, err := h.People.Accept(ctx, c.Param("token"), f.Get("name"), f.Get("password"), c.RealIP())
	if err != nil {
		return h.answer(c, err, invitationForm(in, false, f.Get("name")))
	}
	return h.afterSignIn(c, s, "")
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
