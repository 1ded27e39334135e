package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/rule"
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
	Zone   *time.Location
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
	zone, err := h.zoneOf(c)
	if err != nil {
		return h.failure(c, err)
	}
	d := eventData{Event: ev, Manage: m.Can(auth.WebhooksManage), Zone: zone}
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
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	if err := h.Webhooks.Redeliver(c.Request().Context(), webhookActor(c), id); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, "/portal/events/"+id.String()+"?done=redelivered")
}

const eventsPath = "/portal/events"

type eventsData struct {
	listData[eventRow]
	// Types are those the filter offers: the organization's kind's whose
	// data the member may read. The filter takes any, as the API's does:
	// one it may not read is refused with 403 naming the permission.
	Types []string
}

// eventRow is an event as the list shows it: when in the organization's
// time zone, and a line saying what it is about.
type eventRow struct {
	event.Event
	Zone  *time.Location
	About string
}

// events is GET /portal/events: the organization's events a member may
// read (those whose data its permissions cover, as GET /events), newest
// first, a page at a time, filtered by type and day; ?format=csv exports
// them.
func (h *handler) events(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	q, err := h.listQuery(c)
	if err != nil {
		return h.failure(c, err)
	}
	f := event.Filter{Type: q.Choice("type", event.Types)}
	f.CreatedFrom, f.CreatedTo = q.Dates("createdFrom", "createdTo")
	data := eventsData{Types: readableTypes(m)}
	data.Zone = q.Zone.String()
	list := func(ctx context.Context, limit int, cursor string) ([]event.Event, string, error) {
		return h.Events.List(ctx, m.OrganizationID, m.Permissions, f, limit, cursor)
	}
	if !q.Failed() {
		if q.CSV {
			if f.Type != nil {
				// A type it may not read is refused before the first byte.
				if _, _, err := list(ctx, 1, ""); err != nil {
					return h.answer(c, err, &formPage{name: "events", page: q.Page("Events", data)})
				}
			}
			return streamCSV(h, c, csvExport[event.Event]{Name: "events", Zone: q.Zone, Columns: eventColumns(q.Zone), Page: list})
		}
		row := func(e event.Event) eventRow { return eventRow{Event: e, Zone: q.Zone, About: about(e)} }
		err := fillList(ctx, q, &data.listData, eventsPath, list, row)
		if rule.Is(err, rule.Forbidden) {
			return h.refused(c, rule.As(err), &formPage{name: "events", page: q.Page("Events", data)})
		}
		if err != nil {
			return h.failure(c, err)
		}
	}
	return h.renderList(c, q, "events", "Events", data)
}

// readableTypes are the event types of the member's organization's kind
// whose data it may read.
func readableTypes(m *people.Membership) []string {
	var out []string
	readable := event.Readable(m.Permissions)
	for _, t := range event.ReceivedBy(m.Kind) {
		if slices.Contains(readable, t) {
			out = append(out, t)
		}
	}
	return out
}

// eventColumns are the columns of the events' CSV, as GET /events names
// them; data is the JSON as delivered.
func eventColumns(zone *time.Location) []csvColumn[event.Event] {
	return []csvColumn[event.Event]{
		{"id", func(e event.Event) string { return e.ID.String() }},
		{"type", func(e event.Event) string { return e.Type }},
		{"createdAt", func(e event.Event) string { return csvTime(&e.CreatedAt, zone) }},
		{"data", func(e event.Event) string { return string(e.Data) }},
	}
}

// about is what an event concerns, in a few words: the invoice's number,
// a card payment's or a deposit's amount.
func about(e event.Event) string {
	var d struct {
		InvoiceNumber string          `json:"invoiceNumber"`
		Amount        json.RawMessage `json:"amount"`
		NetAmount     json.RawMessage `json:"netAmount"`
		MID           string          `json:"mid"`
		Business      struct {
			LegalName string `json:"legalName"`
		} `json:"business"`
		Invoice struct {
			InvoiceNumber string `json:"invoiceNumber"`
		} `json:"invoice"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return ""
	}
	amount := func(raw json.RawMessage) string {
		var s string
		var v apd.Decimal
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		if _, _, err := v.SetString(s); err != nil {
			return ""
		}
		return invoice.Money(v)
	}
	var parts []string
	for _, p := range []string{d.InvoiceNumber, d.Invoice.InvoiceNumber, amount(d.Amount), amount(d.NetAmount), d.MID, d.Business.LegalName, d.Message} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " · ")
}
