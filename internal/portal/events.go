package portal

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/webhook"
)

// maxEventShown is how much of an event's JSON its page shows: a page
// weighs at most 60 KB, and an invoice of 500 lines weighs more. The
// whole event is its JSON download.
const maxEventShown = 24 << 10

type eventData struct {
	Event event.Event
	// JSON is the event as delivered, indented; Cut: only its start.
	JSON       string
	Cut        bool
	Deliveries []eventDelivery
	// Manage: the member manages webhooks (redelivers, opens endpoints).
	Manage bool
}

// eventDelivery is where the event stands at one endpoint, with every
// attempt made.
type eventDelivery struct {
	webhook.Delivery
	URL      string
	Attempts []webhook.Attempt
}

// eventOf reads the path's event, as the member's permissions let it (an
// event whose data they may not read is not found, as in the API).
func (h *handler) eventOf(c echo.Context) (event.Event, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return event.Event{}, errNotFound
	}
	m := visitOf(c).Membership
	return h.Events.Get(c.Request().Context(), m.OrganizationID, m.Permissions, id)
}

// eventPage is GET /portal/events/{id}: the event's data, and its
// delivery to each endpoint with every attempt.
func (h *handler) eventPage(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	ev, err := h.eventOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	d := eventData{Event: ev, Manage: m.Can(auth.WebhooksManage)}
	var indented bytes.Buffer
	if err := json.Indent(&indented, ev.JSON(), "", "  "); err != nil {
		return h.failure(c, err)
	}
	d.JSON = indented.String()
	if len(d.JSON) > maxEventShown {
		// At a line's end, so that no character is cut in two.
		d.JSON, d.Cut = d.JSON[:strings.LastIndexByte(d.JSON[:maxEventShown], '\n')], true
	}
	deliveries, err := h.Webhooks.Deliveries(ctx, ev.ID)
	if err != nil {
		return h.failure(c, err)
	}
	attempts, err := h.Webhooks.EventAttempts(ctx, ev.ID)
	if err != nil {
		return h.failure(c, err)
	}
	for _, dl := range deliveries {
		ed := eventDelivery{Delivery: dl}
		for _, a := range attempts {
			if a.EndpointID == dl.EndpointID {
				ed.URL = a.URL
				ed.Attempts = append(ed.Attempts, a)
			}
		}
		d.Deliveries = append(d.Deliveries, ed)
	}
	p := page{Title: "Event " + ev.Type, Data: d}
	if c.QueryParam("done") == "redelivered" {
		p.Notice = "The event is sent again to every enabled endpoint subscribed to it."
	}
	return h.render(c, http.StatusOK, "event", p)
}

// eventJSON is GET /portal/events/{id}/json: the event as delivered, to
// download.
func (h *handler) eventJSON(c echo.Context) error {
	ev, err := h.eventOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="event-`+ev.ID.String()+`.json"`)
	return c.Blob(http.StatusOK, "application/json", ev.JSON())
}

// redeliver is POST /portal/events/{id}/redeliver: the event again to its
// endpoints, as POST /events/{id}/redeliver.
func (h *handler) redeliver(c echo.Context) error {
	m := visitOf(c).Membership
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	if err := h.Webhooks.Redeliver(c.Request().Context(), m.OrganizationID, m.Permissions, id); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/events/"+id.String()+"?done=redelivered")
}
