package portal

import (
	"net/http"
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/rule"
)

var errNotFound = rule.New(rule.NotFound, "", "Page not found", "There is no such thing in this organization.")

type membersData struct {
	Members     []people.Membership
	Roles       []string
	Permissions []string
	Member      people.Membership
	Required    bool
}

func (h *handler) membersPage(c echo.Context, form url.Values) (*formPage, error) {
	m := visitOf(c).Membership
	ms, err := h.People.Members(c.Request().Context(), m.OrganizationID)
	if err != nil {
		return nil, err
	}
	if form == nil {
		form = url.Values{"role": {people.Member}}
	}
	return &formPage{name: "members", page: page{Title: "Members", Form: form, Data: membersData{Members: ms,
		Roles: rolesFor(m), Permissions: auth.PermissionsFor(m.Kind), Required: m.TwoFactorRequired}},
		fields: []string{"email", "role", "permissions"}}, nil
}

// rolesFor are the roles a member may give: Admins make no Owners.
func rolesFor(m *people.Membership) []string {
	if m.Role == people.Owner {
		return people.Roles
	}
	return []string{people.Admin, people.Member}
}

// members is GET /portal/members: the list and the invitation form.
func (h *handler) members(c echo.Context) error {
	form, err := h.membersPage(c, nil)
	if err != nil {
		return h.failure(c, err)
	}
	return h.renderDone(c, form.name, form.page, map[string]string{
		"invited": "The invitation is on its way; its link works once, for 72 hours.",
		"changed": "The member's role and permissions were changed.",
		"removed": "The member was removed: their sessions ended, and the API keys they made keep working.",
		"rule":    "The two-factor rule was changed.",
	})
}

// invite is POST /portal/members: email, role, permissions (repeated).
func (h *handler) invite(c echo.Context) error {
	f := c.Request().PostForm
	perms := f["permissions"]
	if perms == nil {
		perms = []string{}
	}
	_, err := h.People.Invite(c.Request().Context(), actor(c), visitOf(c).Membership.OrganizationID,
		people.NewMember{Email: f.Get("email"), Role: f.Get("role"), Permissions: perms})
	if err != nil {
		form, ferr := h.membersPage(c, f)
		if ferr != nil {
			return h.failure(c, ferr)
		}
		return h.answer(c, err, form)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/members?done=invited")
}

func (h *handler) memberOf(c echo.Context) (people.Membership, error) {
	id, err := uuid.Parse(c.Param("membershipId"))
	if err != nil {
		return people.Membership{}, errNotFound
	}
	ms, err := h.People.Members(c.Request().Context(), visitOf(c).Membership.OrganizationID)
	if err != nil {
		return people.Membership{}, err
	}
	for _, m := range ms {
		if m.ID == id {
			return m, nil
		}
	}
	return people.Membership{}, errNotFound
}

func (h *handler) memberForm(c echo.Context, target people.Membership, form url.Values) *formPage {
	m := visitOf(c).Membership
	if form == nil {
		form = url.Values{"role": {target.Role}, "permissions": target.Permissions}
	}
	return &formPage{name: "member", page: page{Title: "Member " + target.Email, Form: form,
		Data: membersData{Member: target, Roles: rolesFor(m), Permissions: auth.PermissionsFor(m.Kind)}},
		fields: []string{"role", "permissions"}}
}

// memberPage is GET /portal/members/{membershipId}: its role and
// permissions to change, and its removal.
func (h *handler) memberPage(c echo.Context) error {
	target, err := h.memberOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form := h.memberForm(c, target, nil)
	return h.render(c, http.StatusOK, form.name, form.page)
}

// changeMember is POST /portal/members/{membershipId}: role, permissions.
func (h *handler) changeMember(c echo.Context) error {
	target, err := h.memberOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	err = h.People.ChangeMember(c.Request().Context(), actor(c), target.OrganizationID, target.ID, f.Get("role"), f["permissions"])
	if err != nil {
		return h.answer(c, err, h.memberForm(c, target, f))
	}
	return c.Redirect(http.StatusSeeOther, "/portal/members?done=changed")
}

// removeMember is POST /portal/members/{membershipId}/remove.
func (h *handler) removeMember(c echo.Context) error {
	target, err := h.memberOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if err := h.People.RemoveMember(c.Request().Context(), actor(c), target.OrganizationID, target.ID); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/members?done=removed")
}

// twoFactorRule is POST /portal/members/two-factor: required (on or off),
// the Owner's switch.
func (h *handler) twoFactorRule(c echo.Context) error {
	on := c.Request().PostForm.Get("required") == "on"
	if err := h.People.SetTwoFactorRequired(c.Request().Context(), actor(c), visitOf(c).Membership.OrganizationID, on); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/members?done=rule")
}
