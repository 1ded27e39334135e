package portal

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/rule"
)

// The organization's reminder schedule, as GET and PUT /reminder-settings
// read and set it (invoice.Store.ReminderSettings, SetReminderSettings):
// members with payments.view read it, those with payments.create change it.

const remindersPath = "/portal/reminder-settings"

type remindersData struct {
	Settings  invoice.ReminderSettings
	CanChange bool
	Min, Max  int
	Count     int
	Hour      string
}

func (h *handler) remindersForm(c echo.Context, rs invoice.ReminderSettings, form url.Values) *formPage {
	if form == nil {
		offsets := make([]string, len(rs.OffsetsDays))
		for i, o := range rs.OffsetsDays {
			offsets[i] = strconv.Itoa(o)
		}
		form = url.Values{"offsetsDays": {strings.Join(offsets, ", ")}}
		if rs.Enabled {
			form.Set("enabled", "on")
		}
	}
	return &formPage{name: "reminders", page: page{Title: "Reminder settings", Form: form, Data: remindersData{Settings: rs,
		CanChange: visitOf(c).Membership.Can(auth.PaymentsCreate), Min: invoice.MinReminderOffset, Max: invoice.MaxReminderOffset,
		Count: invoice.MaxReminderCount, Hour: invoice.ReminderHour}}, fields: []string{"enabled", "offsetsDays"}}
}

// reminders is GET /portal/reminder-settings.
func (h *handler) reminders(c echo.Context) error {
	rs, err := h.Invoices.ReminderSettings(c.Request().Context(), visitOf(c).Membership.OrganizationID)
	if err != nil {
		return h.failure(c, err)
	}
	form := h.remindersForm(c, rs, nil)
	if c.QueryParam("done") == "saved" {
		form.page.Notice = "The reminder settings were saved."
	}
	return h.render(c, http.StatusOK, form.name, form.page)
}

// setReminders is POST /portal/reminder-settings: enabled (on, or absent)
// and offsetsDays, whole days from the due date separated by commas or
// spaces ("-3, 0, 3").
func (h *handler) setReminders(c echo.Context) error {
	ctx := c.Request().Context()
	org := visitOf(c).Membership.OrganizationID
	f := c.Request().PostForm
	in := invoice.ReminderSettings{Enabled: f.Get("enabled") == "on", OffsetsDays: []int{}}
	for _, s := range strings.FieldsFunc(f.Get("offsetsDays"), func(r rune) bool { return r == ',' || r == ' ' || r == ';' }) {
		n, err := strconv.Atoi(strings.ReplaceAll(s, "−", "-")) // a typographic minus, as pasted
		if err != nil {
			current, rerr := h.Invoices.ReminderSettings(ctx, org)
			if rerr != nil {
				return h.failure(c, rerr)
			}
			return h.refused(c, rule.InvalidField("offsetsDays", "Enter whole numbers of days, such as -3, 0, 7; “"+
				clip.Marked(s, 40)+"” is not one."), h.remindersForm(c, current, f))
		}
		in.OffsetsDays = append(in.OffsetsDays, n)
	}
	_, err := h.Invoices.SetReminderSettings(ctx, invoiceActor(c), in)
	if err != nil {
		current, rerr := h.Invoices.ReminderSettings(ctx, org)
		if rerr != nil {
			return h.failure(c, rerr)
		}
		return h.answer(c, err, h.remindersForm(c, current, f))
	}
	return c.Redirect(http.StatusSeeOther, remindersPath+"?done=saved")
}
