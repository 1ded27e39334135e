package portal

import (
	"cmp"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/people"
)

const confirmPath = "/portal/account/confirm"

// confirmed lets in a person who confirmed it's them within
// people.ConfirmWindow (by signing in, or on the confirmation page):
// the pages that change the second factor or make an API key. Anyone
// else confirms first: a GET is sent to the confirmation page and back;
// a POST changes nothing and answers the confirmation page, which leads
// back to the form.
func (h *handler) confirmed(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		v := visitOf(c)
		if h.People.Confirmed(v.Session) {
			return next(c)
		}
		back := c.Request().URL.Path
		if c.Request().Method == http.MethodGet {
			return c.Redirect(http.StatusSeeOther, confirmPath+"?next="+url.QueryEscape(back))
		}
		form := confirmForm(back)
		form.page.Alert = "Confirm it's you first. Nothing was changed: send the form again after."
		return h.render(c, http.StatusForbidden, form.name, form.page)
	}
}

func confirmForm(next string) *formPage {
	return &formPage{name: "confirm", page: page{Title: "Confirm it's you", Form: url.Values{"next": {localPath(next)}}},
		fields: []string{"password", "code"}}
}

// confirmPage is GET /portal/account/confirm?next=: the password, and a
// code of the app with a second factor.
func (h *handler) confirmPage(c echo.Context) error {
	form := confirmForm(c.QueryParam("next"))
	return h.render(c, http.StatusOK, form.name, form.page)
}

// confirm is POST /portal/account/confirm: password, code and next. A
// wrong password or code counts as a failed sign-in of the person.
func (h *handler) confirm(c echo.Context) error {
	v := visitOf(c)
	f := c.Request().PostForm
	err := h.People.Confirm(c.Request().Context(), v.token, f.Get("password"), f.Get("code"), address(c))
	if err == people.ErrNoSession {
		h.clearSession(c)
		return c.Redirect(http.StatusSeeOther, signInPath)
	}
	if err != nil {
		return h.answer(c, err, confirmForm(f.Get("next")))
	}
	return c.Redirect(http.StatusSeeOther, cmp.Or(localPath(f.Get("next")), "/portal/account"))
}
