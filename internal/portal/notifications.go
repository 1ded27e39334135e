package portal

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/rule"
)

// The member's own choice of emails (people.Store.NotificationChoices,
// SetNotificationChoices), on /portal/account/notifications; and, for
// Owners and Admins, whether the organization's customers get receipts
// (directory.Store.Receipts, SetReceipts), posted to /portal/settings/receipts.

const (
	notificationsPath = "/portal/account/notifications"
	receiptsPath      = "/portal/settings/receipts"
)

type notificationsData struct {
	Choices []notificationChoice
	// Manages: the member may change the organization's receipts setting
	// (Owners and Admins), Receipts.
	Manages, Receipts bool
}

type notificationChoice struct {
	Name, Label string
	On          bool
	// Hint says why the choice would send nothing to this member (a
	// permission missing), or that nothing sends it yet.
	Hint string
}

// notificationLabels are the choices in words, with the permission each
// email's event is read under (event.Permission: payments.view for them all).
var notificationLabels = map[string]string{
	people.NotifyInvoicePaid:    "An invoice is paid in full",
	people.NotifyCardDeclined:   "A card payment or a refund is declined",
	people.NotifyDepositPaid:    "A deposit is paid into the bank account",
	people.NotifyTerminalFailed: "A payment at a card terminal fails",
}

// notifications is GET /portal/account/notifications.
func (h *handler) notifications(c echo.Context) error {
	m := visitOf(c).Membership
	on, err := h.People.NotificationChoices(c.Request().Context(), m.ID)
	if err != nil {
		return h.failure(c, err)
	}
	choices := make([]notificationChoice, len(people.Notifications))
	for i, name := range people.Notifications {
		choices[i] = notificationChoice{Name: name, Label: notificationLabels[name], On: on[name]}
		switch {
		case !m.Can(auth.PaymentsView):
			choices[i].Hint = "None are sent to you: they need the permission payments.view."
		case name == people.NotifyTerminalFailed:
			choices[i].Hint = "Kept for when card terminals arrive; nothing sends it yet."
		}
	}
	d := notificationsData{Choices: choices}
	if managers(*m) == nil {
		on, err := h.Directory.Receipts(c.Request().Context(), m.OrganizationID)
		if err != nil {
			return h.failure(c, err)
		}
		d.Manages, d.Receipts = true, on
	}
	return h.renderDone(c, "notifications", page{Title: "Email notifications", Data: d}, map[string]string{
		"saved":    "Your notification choices were saved.",
		"receipts": "The receipts setting was saved.",
	})
}

// setReceipts is POST /portal/settings/receipts (Owners and Admins):
// receipts "on", or absent for off.
func (h *handler) setReceipts(c echo.Context) error {
	m := visitOf(c).Membership
	on := c.Request().PostForm.Get("receipts") == "on"
	if err := h.Directory.SetReceipts(c.Request().Context(), actor(c).Audit(), m.OrganizationID, on, h.Now()); err != nil {
		return h.failure(c, err)
	}
	return c.Redirect(http.StatusSeeOther, notificationsPath+"?done=receipts")
}

// setNotifications is POST /portal/account/notifications: notify, once for
// each choice turned on; every other is turned off.
func (h *handler) setNotifications(c echo.Context) error {
	on := c.Request().PostForm["notify"]
	for _, name := range on {
		if !slices.Contains(people.Notifications, name) {
			return h.failure(c, rule.InvalidField("notify", "Choose among the notifications listed."))
		}
	}
	if err := h.People.SetNotificationChoices(c.Request().Context(), actor(c), on); err != nil {
		return h.failure(c, err)
	}
	return c.Redirect(http.StatusSeeOther, notificationsPath+"?done=saved")
}
