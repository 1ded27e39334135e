package portal

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/people"
)

type keysData struct {
	Keys []auth.Key
	// Offered are the permissions a new key may get: those the member
	// holds that the organization's kind is offered.
	Offered []string
	Made    *auth.NewKey
	Name    string
}

func offered(m *people.Membership) []string {
	var out []string
	for _, p := range auth.PermissionsFor(m.Kind) {
		if m.Can(p) {
			out = append(out, p)
		}
	}
	return out
}

func (h *handler) keysPage(c echo.Context, form url.Values) (*formPage, error) {
	m := visitOf(c).Membership
	keys, err := h.Auth.Keys(c.Request().Context(), m.OrganizationID)
	if err != nil {
		return nil, err
	}
	slices.Reverse(keys) // newest first
	return &formPage{name: "keys", page: page{Title: "API keys", Form: form, Data: keysData{Keys: keys, Offered: offered(m)}},
		fields: []string{"name", "permissions"}}, nil
}

// keys is GET /portal/keys: every key of the organization, revoked ones
// too, and the form that makes one.
func (h *handler) keys(c echo.Context) error {
	form, err := h.keysPage(c, nil)
	if err != nil {
		return h.failure(c, err)
	}
	if r := c.QueryParam("revoked"); r != "" {
		form.page.Notice = "Key " + r + " is revoked: it gets no new token, and its tokens stop working within a minute."
	}
	return h.render(c, http.StatusOK, form.name, form.page)
}

// createKey is POST /portal/keys: name and permissions (repeated). The
// answer shows the secret, this once.
func (h *handler) createKey(c echo.Context) error {
	f := c.Request().PostForm
	v := visitOf(c)
	k, err := h.Auth.CreateKey(c.Request().Context(), v.Membership.ID, f.Get("name"), f["permissions"])
	if err != nil {
		form, ferr := h.keysPage(c, f)
		if ferr != nil {
			return h.failure(c, ferr)
		}
		return h.answer(c, err, form)
	}
	if err := h.People.Record(c.Request().Context(), actor(c), people.ActionKeyCreated,
		k.KeyID+" "+strings.TrimSpace(f.Get("name"))+" ("+strings.Join(k.Permissions, ", ")+")"); err != nil {
		return h.failure(c, err)
	}
	form, err := h.keysPage(c, nil)
	if err != nil {
		return h.failure(c, err)
	}
	d := form.page.Data.(keysData)
	d.Made, d.Name = &k, strings.TrimSpace(f.Get("name"))
	form.page.Data = d
	form.page.Title = "API key made"
	return h.render(c, http.StatusCreated, "key-made", form.page)
}

func (h *handler) keyOf(c echo.Context) (auth.Key, error) {
	k, err := h.Auth.Key(c.Request().Context(), c.Param("keyId"))
	if err == nil && k.OrganizationID != visitOf(c).Membership.OrganizationID {
		return auth.Key{}, errNotFound
	}
	return k, err
}

// revokePage is GET /portal/keys/{keyId}/revoke: the confirmation.
func (h *handler) revokePage(c echo.Context) error {
	k, err := h.keyOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return h.render(c, http.StatusOK, "key-revoke", page{Title: "Revoke API key " + k.Name, Data: k})
}

// revokeKey is POST /portal/keys/{keyId}/revoke, as payreq keys revoke.
func (h *handler) revokeKey(c echo.Context) error {
	m := visitOf(c).Membership
	k, err := h.Auth.RevokeKey(c.Request().Context(), m.OrganizationID, c.Param("keyId"))
	if err != nil {
		return h.answer(c, err, nil)
	}
	if err := h.People.Record(c.Request().Context(), actor(c), people.ActionKeyRevoked, k.ID+" "+k.Name); err != nil {
		return h.failure(c, err)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/keys?revoked="+url.QueryEscape(k.ID))
}
