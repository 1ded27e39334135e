package portal

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/webhook"
)

// attemptsPageSize is how many delivery attempts an endpoint's page shows.
const attemptsPageSize = 25

type webhooksData struct {
	Endpoints []webhook.Endpoint
	Zone      *time.Location
	// Types are the event types the member may subscribe an endpoint to;
	// All: "*" too (it may read every type its organization receives).
	Types []string
	All   bool
	Max   int
}

type endpointData struct {
	Endpoint webhook.Endpoint
	// Secret is shown once: on the page that answers a creation or a
	// rotation, never again.
	Secret  string
	Rotated bool
	// Replayed: the form was sent again, and this is the endpoint its
	// first sending added.
	Replayed bool
	Attempts []webhook.Attempt
	Older    string
	// Events: the member may open events (events.view).
	Events    bool
	Rotations []rotationChoice
	// Zone is the organization's time zone, in which times are shown.
	Zone *time.Location
}

type rotationChoice struct {
	Seconds int
	Label   string
}

// rotationChoices are when the old secret stops after a rotation.
var rotationChoices = []rotationChoice{{0, "At once (the old secret leaked)"}, {3600, "In an hour"}, {86400, "In 24 hours, time to deploy the new one"}}

// subscribable are the event types the member may subscribe an endpoint
// to (its organization's kind's whose data it may read, as webhook.Store
// checks), and whether that is every one ("*").
func subscribable(m *people.Membership) (types []string, all bool) {
	types = readableTypes(m)
	return types, len(types) == len(event.ReceivedBy(m.Kind))
}

func (h *handler) webhooksPage(c echo.Context, form url.Values) (*formPage, error) {
	m := visitOf(c).Membership
	list, err := h.Webhooks.Endpoints(c.Request().Context(), m.OrganizationID)
	if err != nil {
		return nil, err
	}
	zone, err := h.zoneOf(c)
	if err != nil {
		return nil, err
	}
	types, all := subscribable(m)
	if form == nil {
		form = url.Values{idempotencyField: {newFormKey()}}
	}
	return &formPage{name: "webhooks", page: page{Title: "Webhooks", Form: form,
		Data: webhooksData{Endpoints: list, Zone: zone, Types: types, All: all, Max: webhook.MaxEndpoints}},
		fields: []string{"url", "description", "eventTypes"}}, nil
}

// webhooks is GET /portal/webhooks: the organization's endpoints, oldest
// first, and the form that adds one.
func (h *handler) webhooks(c echo.Context) error {
	form, err := h.webhooksPage(c, nil)
	if err != nil {
		return h.failure(c, err)
	}
	return h.renderDone(c, form.name, form.page, map[string]string{
		"deleted": "The endpoint was deleted; nothing more is sent to it.",
	})
}

// createWebhook is POST /portal/webhooks: url, description, eventTypes
// (repeated) and the form's idempotency key. The answer shows the signing
// secret, this once; the same form sent again adds nothing and shows the
// endpoint its first sending added.
func (h *handler) createWebhook(c echo.Context) error {
	f := c.Request().PostForm
	n := webhook.NewEndpoint{URL: strings.TrimSpace(f.Get("url")), EventTypes: f["eventTypes"]}
	if slices.Contains(n.EventTypes, "*") {
		n.EventTypes = []string{"*"}
	}
	if d := strings.TrimSpace(f.Get("description")); d != "" {
		n.Description = &d
	}
	key := f.Get(idempotencyField)
	e, secret, replayed, err := h.Webhooks.Create(c.Request().Context(), webhookActor(c), n, &key)
	if err != nil {
		h.logURLRefused(err)
		form, ferr := h.webhooksPage(c, f)
		if ferr != nil {
			return h.failure(c, ferr)
		}
		return h.answer(c, keyRefusal(err, form, idempotencyField, "added an endpoint"), form)
	}
	h.allowScript(c, copyScript)
	status := http.StatusCreated
	if replayed {
		status = http.StatusOK
	}
	return h.render(c, status, "webhook-secret", page{Title: "Webhook endpoint added",
		Data: endpointData{Endpoint: e, Secret: secret, Replayed: replayed}})
}

// webhookActor is the member as package webhook checks what it may manage
// and audits it.
func webhookActor(c echo.Context) webhook.Actor {
	m := visitOf(c).Membership
	return webhook.Actor{OrganizationID: m.OrganizationID, Permissions: m.Permissions, Audit: actor(c).Audit()}
}

// logURLRefused logs what a URL's refusal holds beyond the page: what its
// host resolved to, which a page never tells.
func (h *handler) logURLRefused(err error) {
	if e := rule.As(err); e != nil && error(e) != err {
		h.Log.Info("webhook endpoint url refused", "error", err.Error())
	}
}

// endpointOf is the endpoint of the path's id, of the member's
// organization.
func (h *handler) endpointOf(c echo.Context) (webhook.Endpoint, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return webhook.Endpoint{}, errNotFound
	}
	return h.Webhooks.Endpoint(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
}

func (h *handler) endpointPage(c echo.Context, e webhook.Endpoint) (*formPage, error) {
	m := visitOf(c).Membership
	attempts, next, err := h.Webhooks.EndpointAttempts(c.Request().Context(), m.OrganizationID, m.Permissions, e.ID,
		attemptsPageSize, c.QueryParam("after"))
	if err != nil {
		return nil, err
	}
	zone, err := h.zoneOf(c)
	if err != nil {
		return nil, err
	}
	d := endpointData{Endpoint: e, Attempts: attempts, Events: m.Can(auth.EventsView), Rotations: rotationChoices, Zone: zone}
	if next != "" {
		d.Older = "/portal/webhooks/" + e.ID.String() + "?after=" + url.QueryEscape(next)
	}
	return &formPage{name: "webhook", page: page{Title: "Webhook endpoint " + e.URL, Data: d,
		Form: url.Values{"expireCurrentInSeconds": {"86400"}, idempotencyField: {newFormKey()}}}, fields: []string{"expireCurrentInSeconds"}}, nil
}

// webhookEndpoint is GET /portal/webhooks/{id}: the endpoint, what may be
// done to it, and its delivery attempts, newest first (?after= the
// cursor of the next page).
func (h *handler) webhookEndpoint(c echo.Context) error {
	e, err := h.endpointOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form, err := h.endpointPage(c, e)
	if errors.Is(err, keyset.ErrInvalid) {
		return h.message(c, http.StatusBadRequest, "Not a page of this list", "The address of this page was not made by the portal. Open the list again.")
	}
	if err != nil {
		return h.failure(c, err)
	}
	return h.renderDone(c, form.name, form.page, map[string]string{
		"enabled":  "The endpoint is enabled: new events are sent to it.",
		"disabled": "The endpoint is disabled: nothing is sent to it until it is enabled again.",
		"pinged":   "A webhook.ping event is on its way to the endpoint; its attempt is listed here once made.",
	})
}

// webhookStatus is POST /portal/webhooks/{id}/status: status enabled or
// disabled.
func (h *handler) webhookStatus(c echo.Context) error {
	m := visitOf(c).Membership
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	status := c.Request().PostForm.Get("status")
	e, err := h.Webhooks.Update(c.Request().Context(), webhookActor(c), id, webhook.Change{Status: &status,
		DisabledReason: "Disabled in the portal by " + m.PersonName + "."})
	if err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/webhooks/"+e.ID.String()+"?done="+e.Status)
}

// rotateWebhookSecret is POST /portal/webhooks/{id}/rotate-secret:
// expireCurrentInSeconds, when the old secret stops (0, 3600 or 86400).
// The answer shows the new secret, this once.
func (h *handler) rotateWebhookSecret(c echo.Context) error {
	e, err := h.endpointOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	seconds, err := strconv.Atoi(f.Get("expireCurrentInSeconds"))
	if err != nil {
		seconds = -1 // refused by the store, beside the field
	}
	key := f.Get(idempotencyField)
	rotated, secret, replayed, err := h.Webhooks.RotateSecret(c.Request().Context(), webhookActor(c), e.ID,
		time.Duration(seconds)*time.Second, &key)
	if err != nil {
		form, ferr := h.endpointPage(c, e)
		if ferr != nil {
			return h.failure(c, ferr)
		}
		form.page.Form = f
		return h.answer(c, keyRefusal(err, form, idempotencyField, "rotated the secret"), form)
	}
	h.allowScript(c, copyScript)
	return h.render(c, http.StatusOK, "webhook-secret", page{Title: "Webhook secret rotated",
		Data: endpointData{Endpoint: rotated, Secret: secret, Rotated: true, Replayed: replayed}})
}

// pingWebhook is POST /portal/webhooks/{id}/ping: a webhook.ping event to
// the endpoint alone.
func (h *handler) pingWebhook(c echo.Context) error {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	if _, err := h.Webhooks.Ping(c.Request().Context(), webhookActor(c), id); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/webhooks/"+id.String()+"?done=pinged")
}

// deleteWebhookPage is GET /portal/webhooks/{id}/delete: the confirmation.
func (h *handler) deleteWebhookPage(c echo.Context) error {
	e, err := h.endpointOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	return h.render(c, http.StatusOK, "webhook-delete", page{Title: "Delete webhook endpoint " + e.URL, Data: e})
}

// deleteWebhook is POST /portal/webhooks/{id}/delete.
func (h *handler) deleteWebhook(c echo.Context) error {
	e, err := h.endpointOf(c)
	if err == nil {
		err = h.Webhooks.Delete(c.Request().Context(), webhookActor(c), e.ID)
	}
	if err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/webhooks?done=deleted")
}
