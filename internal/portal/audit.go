package portal

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/audit"
)

// auditPageSize is how many entries a page of the log shows.
const auditPageSize = 50

type auditData struct {
	Entries []audit.Line
	Older   string
}

// audit is GET /portal/audit: the log, newest first, 50 entries a page
// (?before= the last entry's id for the next).
func (h *handler) audit(c echo.Context) error {
	ctx := c.Request().Context()
	org := visitOf(c).Membership.OrganizationID
	var before *audit.Line
	if id, ok := parseID(c.QueryParam("before")); ok {
		e, err := h.People.AuditEntry(ctx, org, id)
		if err != nil {
			return h.failure(c, err)
		}
		before = e
	}
	entries, more, err := h.People.AuditPage(ctx, org, before, auditPageSize)
	if err != nil {
		return h.failure(c, err)
	}
	d := auditData{Entries: entries}
	if more {
		d.Older = "/portal/audit?before=" + entries[len(entries)-1].ID.String()
	}
	return h.render(c, http.StatusOK, "audit", page{Title: "Audit log", Data: d})
}
