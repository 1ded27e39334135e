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
	// Replayed: the form was sent again, and Made (without its secret)
	// is the key its first sending made.
	Replayed bool
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
	if form == nil {
		form = url.Values{idempotencyField: {newFormKey()}}
	}
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
	return h.renderDone(c, form.name, form.page, map[string]string{
		"revoked": "The key is revoked: it gets no new token, and its tokens stop working within a minute.",
	})
}

// createKey is POST /portal/keys: name, permissions (repeated) and the
// form's idempotency key. The answer shows the secret, this once; the same
// form sent again makes nothing and names the key its first sending made.
func (h *handler) createKey(c echo.Context) error {
	f := c.Request().PostForm
	v := visitOf(c)
	key := f.Get(idempotencyField)
	k, replayed, err := h.Auth.CreateKey(c.Request().Context(), actor(c).Audit(), v.Membership.ID, f.Get("name"), f["permissions"], &key)
	if err != nil {
		form, ferr := h.keysPage(c, f)
		if ferr != nil {
			return h.failure(c, ferr)
		}
		return h.answer(c, keyRefusal(err, form, idempotencyField, "made a key"), form)
	}
	form, err := h.keysPage(c, nil)
	if err != nil {
		return h.failure(c, err)
	}
	d := form.page.Data.(keysData)
	d.Made, d.Name, d.Replayed = &k, strings.TrimSpace(f.Get("name")), replayed
	form.page.Data = d
	form.page.Title = "API key made"
	status := http.StatusCreated
	if replayed {
		status = http.StatusOK
	} else {
		h.allowScript(c, copyScript)
	}
	return h.render(c, status, "key-made", form.page)
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
	_, err := h.Auth.RevokeKey(c.Request().Context(), actor(c).Audit(), m.OrganizationID, c.Param("keyId"))
	if err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/keys?done=revoked")
}
