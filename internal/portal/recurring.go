package portal

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/recurring"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// Recurring invoices (issues 39 and 41): /portal/recurring lists the
// series (recurring.Store.List, as GET /recurring-invoices), /new makes
// one (Create, as POST /recurring-invoices, with the form's one-time
// key; GET /portal/invoices/{id}/recurring fills it from an invoice),
// /{id} shows one with the invoices it issued, and members with
// payments.create pause, resume (Update, as PATCH) and end it (End, as
// DELETE). The lines are the invoice editor's (lineView, amountOf).

const recurringPath = "/portal/recurring"

// recurringStatuses are the list's filter's choices.
var recurringStatuses = []string{string(recurring.Active), string(recurring.Paused), string(recurring.Ended)}

// seriesStatusLabel is a series' status in words.
func seriesStatusLabel(s recurring.Status) string {
	switch s {
	case recurring.Active:
		return "Active"
	case recurring.Paused:
		return "Paused"
	}
	return "Ended"
}

// seriesStatusClass colours a status as the invoices' are: active as
// open, paused as a draft, ended as cancelled.
func seriesStatusClass(s recurring.Status) string {
	switch s {
	case recurring.Active:
		return "status status-open"
	case recurring.Paused:
		return "status status-draft"
	}
	return "status status-cancelled"
}

// every is a schedule's interval in words: "Every month", "Every 2 weeks".
func every(sc recurring.Schedule) string {
	if sc.Count == 1 {
		return "Every " + string(sc.Interval)
	}
	return "Every " + strconv.Itoa(sc.Count) + " " + string(sc.Interval) + "s"
}

// seriesLine is a series as the list's row shows it.
type seriesLine struct {
	ID, Customer, Amount, Every, StatusLabel, StatusClass string
	Next                                                  string
	Issued                                                int
}

type recurringListData struct {
	listData[seriesLine]
	Statuses  []string
	CanCreate bool
}

// recurringList is GET /portal/recurring: newest first, a page at a time,
// filtered by status.
func (h *handler) recurringList(c echo.Context) error {
	m := visitOf(c).Membership
	ctx := c.Request().Context()
	q, err := h.listQuery(c)
	if err != nil {
		return h.failure(c, err)
	}
	f := recurring.Filter{Status: q.Choice("status", recurringStatuses)}
	data := recurringListData{Statuses: recurringStatuses, CanCreate: m.Can(auth.PaymentsCreate)}
	if !q.Failed() {
		names := map[uuid.UUID]string{}
		row := func(sr recurring.Series) seriesLine {
			name, ok := names[sr.CustomerID]
			if !ok {
				if cu, err := h.Customers.Get(ctx, m.OrganizationID, sr.CustomerID); err == nil {
					name = cmp.Or(text(cu.Name), text(cu.Company), cu.Email)
				}
				names[sr.CustomerID] = name
			}
			l := seriesLine{ID: sr.ID.String(), Customer: name, Amount: invoice.Money(sr.Amount), Every: every(sr.Schedule),
				StatusLabel: seriesStatusLabel(sr.Status), StatusClass: seriesStatusClass(sr.Status), Issued: sr.IssuedCount, Next: "—"}
			if day, ok := sr.NextOn(); ok {
				l.Next = day.Format("2 Jan 2006")
			}
			return l
		}
		list := func(ctx context.Context, limit int, cursor string) ([]recurring.Series, string, error) {
			return h.Recurring.List(ctx, m.OrganizationID, f, limit, cursor)
		}
		if q.CSV {
			return streamCSV(h, c, csvExport[recurring.Series]{Name: "recurring-invoices", Zone: q.Zone, Columns: seriesColumns(q.Zone), Page: list})
		}
		if err := fillList(ctx, q, &data.listData, recurringPath, list, row); err != nil {
			return h.failure(c, err)
		}
	}
	return h.renderList(c, q, "recurring", "Recurring invoices", data)
}

// seriesColumns are the series' CSV: the API's names for its fields.
func seriesColumns(zone *time.Location) []csvColumn[recurring.Series] {
	return []csvColumn[recurring.Series]{
		{"id", func(sr recurring.Series) string { return sr.ID.String() }},
		{"status", func(sr recurring.Series) string { return string(sr.Status) }},
		{"customerId", func(sr recurring.Series) string { return sr.CustomerID.String() }},
		{"invoiceNumberPrefix", func(sr recurring.Series) string { return sr.Prefix }},
		{"amount", func(sr recurring.Series) string { m := sr.Model(); return m.Amount.Decimal.Text('f') }},
		{"interval", func(sr recurring.Series) string { return string(sr.Interval) }},
		{"intervalCount", func(sr recurring.Series) string { return strconv.Itoa(sr.Count) }},
		{"nextIssueOn", func(sr recurring.Series) string {
			if day, ok := sr.NextOn(); ok {
				return day.Format(time.DateOnly)
			}
			return ""
		}},
		{"issuedCount", func(sr recurring.Series) string { return strconv.Itoa(sr.IssuedCount) }},
		{"createdAt", func(sr recurring.Series) string { return csvTime(&sr.CreatedAt, zone) }},
	}
}

// cardOption is a saved card the automatic payment may use.
type cardOption struct {
	ID, Label string
	Selected  bool
}

type recurringFormData struct {
	Accounts      []account
	Customers     []customerOption
	MoreCustomers bool
	Rows          []lineRow
	MaxLines      int
	Totals        *lineTotals
	Reminders     invoice.ReminderSettings
	// Cards are the chosen customer's cards saved with consent to future
	// charges; Unconsented counts those saved without it.
	Cards       []cardOption
	Unconsented int
	Chosen      bool
}

// recurringFields are the form's fields in order, as the domain names
// them (the card as savedCardId).
func recurringFields(rows int) []string {
	fields := []string{"merchantAccountId", "customerId", "invoiceNumberPrefix", "poNumber", "lines"}
	for i := range rows {
		fields = append(fields, lineField(i, "description"), lineField(i, "quantity"), lineField(i, "unitCost"), lineField(i, "taxRate"))
	}
	return append(fields, "amount", "memo", "interval", "intervalCount", "startOn", "end", "endAfter", "endOn", "dueDays",
		"send", "reminders", "savedCardId")
}

// recurringForm is the new series' form of values; rows is how many rows
// of lines it shows (0: as many as form has).
func (h *handler) recurringForm(c echo.Context, form url.Values, rows int) (*formPage, error) {
	ctx := c.Request().Context()
	org := visitOf(c).Membership.OrganizationID
	all, err := h.accounts(c)
	if err != nil {
		return nil, err
	}
	d := recurringFormData{MaxLines: maxFormLines}
	for _, a := range all {
		if a.Active {
			d.Accounts = append(d.Accounts, a)
		}
	}
	if d.Reminders, err = h.Invoices.ReminderSettings(ctx, org); err != nil {
		return nil, err
	}
	if d.Customers, d.MoreCustomers, err = h.customerOptions(c, form.Get("customerId")); err != nil {
		return nil, err
	}
	rates, err := h.Invoices.TaxRates(ctx, org)
	if err != nil {
		return nil, err
	}
	if rows == 0 {
		rows = lineRows(form)
	}
	d.Rows, d.Totals = lineView(form, rates, rows)
	if id, ok := parseID(form.Get("customerId")); ok {
		d.Chosen = true
		cards, err := h.Payments.SavedCardsOf(ctx, h.Payments.DB, org, id)
		if err != nil {
			return nil, err
		}
		for _, card := range cards {
			if card.ChargeConsentAt == nil {
				d.Unconsented++
				continue
			}
			label := text(card.CardBrand) + " ending in " + text(card.LastFour)
			if card.Expiry != nil {
				label += ", expires " + *card.Expiry
			}
			d.Cards = append(d.Cards, cardOption{ID: card.ID.String(), Label: strings.TrimSpace(label), Selected: form.Get("savedCardId") == card.ID.String()})
		}
	}
	return &formPage{name: "recurring-new", page: page{Title: "New recurring invoice", Form: form, Data: d}, fields: recurringFields(rows)}, nil
}

// newRecurring is GET /portal/recurring/new: the form, empty, to start
// today.
func (h *handler) newRecurring(c echo.Context) error {
	return h.showRecurringForm(c, url.Values{})
}

// makeRecurring is GET /portal/invoices/{id}/recurring: the new series'
// form filled from the invoice: its customer, MID, lines, memo, PO
// number, and its number's prefix.
func (h *handler) makeRecurring(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form, err := h.formOf(c, inv)
	if err != nil {
		return h.failure(c, err)
	}
	for _, k := range []string{"customerName", "customerCompany", "customerEmail", "customerPhone", "dueDate", "delivery"} {
		form.Del(k)
	}
	form.Set("invoiceNumberPrefix", trailingNumber.ReplaceAllString(inv.InvoiceNumber, ""))
	return h.showRecurringForm(c, form)
}

// trailingNumber is an invoice number's trailing number and its dash.
var trailingNumber = regexp.MustCompile(`[-_ ]?\d+$`)

func (h *handler) showRecurringForm(c echo.Context, form url.Values) error {
	h.allowScript(c, linesScript)
	zone, err := h.zoneOf(c)
	if err != nil {
		return h.failure(c, err)
	}
	defaults := map[string]string{"interval": "month", "intervalCount": "1", "end": "never", "dueDays": "30", "send": "yes",
		"startOn": h.Now().In(zone).Format(time.DateOnly)}
	for k, v := range defaults {
		if form.Get(k) == "" {
			form.Set(k, v)
		}
	}
	form.Set(idempotencyField, newFormKey())
	p, err := h.recurringForm(c, form, 0)
	if err != nil {
		return h.failure(c, err)
	}
	return h.render(c, http.StatusOK, p.name, p.page)
}

// createRecurring is POST /portal/recurring: "Add a line" and "Update"
// show the form again; "Create" makes the series with the form's key, so
// that the form sent twice makes one.
func (h *handler) createRecurring(c echo.Context) error {
	h.allowScript(c, linesScript)
	f := c.Request().PostForm
	rows := 0
	if f.Get("action") == actionAddLine {
		rows = min(lineRows(f)+1, maxFormLines)
	}
	form, err := h.recurringForm(c, f, rows)
	if err != nil {
		return h.failure(c, err)
	}
	switch f.Get("action") {
	case actionAddLine:
		return h.render(c, http.StatusOK, form.name, form.page)
	case actionTotals:
		status := http.StatusOK
		if _, _, errs := linesOf(f); len(errs) > 0 {
			status, form.page.Errors = http.StatusBadRequest, errs
		}
		return h.render(c, status, form.name, form.page)
	}
	t, sc, lineRowsOf, errs := termsOf(f)
	if len(errs) > 0 {
		form.page.Errors = errs
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	key := f.Get(idempotencyField)
	sr, _, err := h.Recurring.Create(c.Request().Context(), visitOf(c).Membership.OrganizationID, t, sc, &key)
	if r := rule.As(keyRefusal(err, form, idempotencyField, "made a recurring invoice")); r != nil {
		return h.refused(c, seriesWords(renumber(r, lineRowsOf)), form)
	}
	if err != nil {
		return h.failure(c, err)
	}
	return c.Redirect(http.StatusSeeOther, recurringPath+"/"+sr.ID.String()+"?done=created")
}

// seriesWords is r with the domain's names of fields as the form names
// them.
func seriesWords(r *rule.Error) *rule.Error {
	out := *r
	if out.Field == "autoPay.savedCardId" {
		out.Field = "savedCardId"
	}
	if msgs, ok := r.Fields["autoPay.savedCardId"]; ok {
		out.Fields = map[string][]string{"savedCardId": msgs}
		for k, v := range r.Fields {
			if k != "autoPay.savedCardId" {
				out.Fields[k] = v
			}
		}
	}
	return &out
}

// termsOf reads the form as a series' terms and schedule: what cannot be
// read at all is refused here, beside its field; every rule is the
// domain's.
func termsOf(f url.Values) (t recurring.Terms, sc recurring.Schedule, rows []int, errs web.Errors) {
	opt := func(name string) *string {
		s := strings.TrimSpace(f.Get(name))
		if s == "" {
			return nil
		}
		return &s
	}
	whole := func(name, msg string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(f.Get(name)))
		if err != nil {
			errs.Add(name, msg)
		}
		return n, err == nil
	}
	date := func(name string) (time.Time, bool) {
		d, err := time.Parse(time.DateOnly, strings.TrimSpace(f.Get(name)))
		if err != nil {
			errs.Add(name, "Enter a date as YYYY-MM-DD, such as 2026-12-31.")
		}
		return d, err == nil
	}
	if id, err := uuid.Parse(f.Get("merchantAccountId")); err == nil {
		t.MerchantAccountID = id
	} else {
		errs.Add("merchantAccountId", "Choose the merchant account (MID) the customer pays into.")
	}
	if id, ok := parseID(f.Get("customerId")); ok {
		t.CustomerID = id
	} else {
		errs.Add("customerId", "Choose the customer billed.")
	}
	t.Prefix = strings.TrimSpace(f.Get("invoiceNumberPrefix"))
	t.Memo, t.PONumber = opt("memo"), opt("poNumber")
	t.Lines, t.Amount, rows, errs = amountOf(f, errs)
	t.DueDays, _ = whole("dueDays", "Enter the days from issue to due, 0 to 365.")
	switch f.Get("send") {
	case "yes":
		t.Send = true
	case "no":
	default:
		errs.Add("send", "Choose whether each invoice is sent.")
	}
	t.Reminders = remindersOf(f, &errs)
	if s := f.Get("savedCardId"); s != "" {
		if id, ok := parseID(s); ok {
			t.AutoPay = &id
		} else {
			errs.Add("savedCardId", "Choose one of the cards offered, or no automatic payment.")
		}
	}
	sc.Interval = recurring.Interval(f.Get("interval"))
	sc.Count, _ = whole("intervalCount", "Enter how many weeks, months or years apart, 1 to 12.")
	sc.StartOn, _ = date("startOn")
	switch f.Get("end") {
	case "never":
	case "after":
		if n, ok := whole("endAfter", "Enter how many invoices, such as 12."); ok {
			sc.EndAfter = &n
		}
	case "on":
		if d, ok := date("endOn"); ok {
			sc.EndOn = &d
		}
	default:
		errs.Add("end", "Choose when the series ends.")
	}
	return t, sc, rows, errs
}

// seriesOf reads the series of the path's id; another organization's is
// not found, as an unknown one.
func (h *handler) seriesOf(c echo.Context) (recurring.Series, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return recurring.Series{}, recurring.ErrNotFound
	}
	return h.Recurring.Get(c.Request().Context(), visitOf(c).Membership.OrganizationID, id)
}

// maxShownOccurrences is how many of a series' latest invoices its page
// shows.
const maxShownOccurrences = 24

type issuedRow struct {
	ID, Number, Amount, StatusLabel, StatusClass string
	On                                           string
}

type seriesData struct {
	ID, Customer, CustomerID, Amount, Every, StatusLabel, StatusClass string
	Status                                                            recurring.Status
	MID, Prefix, StartOn, End, Memo, PONumber                         string
	DueDays, IssuedCount, SkippedCount                                int
	Send                                                              bool
	Upcoming                                                          []string
	Card                                                              string
	Lines                                                             []invoice.Line
	Issued                                                            []issuedRow
	CanChange                                                         bool
}

// seriesPage is GET /portal/recurring/{id}.
func (h *handler) seriesPage(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	sr, err := h.seriesOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	d := seriesData{ID: sr.ID.String(), CustomerID: sr.CustomerID.String(), Amount: invoice.Money(sr.Amount), Every: every(sr.Schedule),
		StatusLabel: seriesStatusLabel(sr.Status), StatusClass: seriesStatusClass(sr.Status), Status: sr.Status, Prefix: sr.Prefix,
		StartOn: sr.StartOn.Format("2 Jan 2006"), Memo: text(sr.Memo), PONumber: text(sr.PONumber), DueDays: sr.DueDays,
		IssuedCount: sr.IssuedCount, SkippedCount: sr.SkippedCount, Send: sr.Send, Lines: sr.Lines,
		CanChange: m.Can(auth.PaymentsCreate) && sr.Status != recurring.Ended, End: "Never"}
	switch {
	case sr.EndAfter != nil:
		d.End = "After " + strconv.Itoa(*sr.EndAfter) + " invoices"
	case sr.EndOn != nil:
		d.End = "On " + sr.EndOn.Format("2 Jan 2006")
	}
	for _, day := range sr.Upcoming() {
		d.Upcoming = append(d.Upcoming, day.Format("Mon 2 Jan 2006"))
	}
	cu, err := h.Customers.Get(ctx, m.OrganizationID, sr.CustomerID)
	if err != nil {
		return h.failure(c, err)
	}
	d.Customer = cmp.Or(text(cu.Name), text(cu.Company), cu.Email)
	accounts, err := h.accounts(c)
	if err != nil {
		return h.failure(c, err)
	}
	for _, a := range accounts {
		if a.ID == sr.MerchantAccountID {
			d.MID = a.MID + " · " + a.Location
		}
	}
	if sr.AutoPay != nil {
		cards, err := h.Payments.SavedCardsOf(ctx, h.Payments.DB, m.OrganizationID, sr.CustomerID)
		if err != nil {
			return h.failure(c, err)
		}
		d.Card = "A saved card since removed"
		for _, card := range cards {
			if card.ID == *sr.AutoPay {
				d.Card = strings.TrimSpace(text(card.CardBrand) + " ending in " + text(card.LastFour))
			}
		}
	}
	occurrences, err := h.Recurring.Occurrences(ctx, m.OrganizationID, sr.ID, maxShownOccurrences)
	if err != nil {
		return h.failure(c, err)
	}
	for _, o := range occurrences {
		if o.InvoiceID == nil {
			continue
		}
		inv, err := h.Invoices.Get(ctx, m.OrganizationID, *o.InvoiceID)
		if err != nil {
			return h.failure(c, err)
		}
		r := invoiceRow{Invoice: inv}
		d.Issued = append(d.Issued, issuedRow{ID: inv.ID.String(), Number: inv.InvoiceNumber, Amount: invoice.Money(inv.Amount),
			StatusLabel: r.StatusLabel(), StatusClass: r.StatusClass(), On: o.IssueOn.Format("2 Jan 2006")})
	}
	return h.renderDone(c, "recurring-series", page{Title: "Recurring invoice " + sr.Prefix, Data: d}, map[string]string{
		"created": "The recurring invoice was made.", "paused": "The recurring invoice is paused: it issues nothing until resumed.",
		"active": "The recurring invoice is resumed.", "changed": "The changes apply to the invoices issued from now on.", "ended": "The recurring invoice has ended: it issues nothing more.",
	})
}

// seriesStatus is POST /portal/recurring/{id}/status: status active
// (resume) or paused (pause). Sent twice, the second changes nothing.
func (h *handler) seriesStatus(c echo.Context) error {
	sr, err := h.seriesOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	st := recurring.Status(c.Request().PostForm.Get("status"))
	if st != recurring.Active && st != recurring.Paused {
		return h.message(c, http.StatusBadRequest, "Form incomplete", "This form is incomplete. Open the recurring invoice and try again.")
	}
	if sr.Status != st {
		if _, err := h.Recurring.Update(c.Request().Context(), visitOf(c).Membership.OrganizationID, sr.ID, recurring.Change{Status: &st}); err != nil {
			return h.answer(c, err, nil)
		}
	}
	return c.Redirect(http.StatusSeeOther, recurringPath+"/"+sr.ID.String()+"?done="+string(st))
}

// endSeriesPage is GET /portal/recurring/{id}/end: what ending does,
// before it is done.
func (h *handler) endSeriesPage(c echo.Context) error {
	sr, err := h.seriesOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if sr.Status == recurring.Ended {
		return c.Redirect(http.StatusSeeOther, recurringPath+"/"+sr.ID.String())
	}
	return h.render(c, http.StatusOK, "recurring-end", page{Title: "End recurring invoice " + sr.Prefix + "?",
		Data: struct{ ID, Prefix, Every, Amount string }{sr.ID.String(), sr.Prefix, every(sr.Schedule), invoice.Money(sr.Amount)}})
}

// endSeries is POST /portal/recurring/{id}/end; sent twice, the series
// stays ended.
func (h *handler) endSeries(c echo.Context) error {
	sr, err := h.seriesOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if _, err := h.Recurring.End(c.Request().Context(), visitOf(c).Membership.OrganizationID, sr.ID); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, recurringPath+"/"+sr.ID.String()+"?done=ended")
}

// seriesForm is the form of what a series may change (recurring.Change),
// for sr, of values form.
func (h *handler) seriesForm(c echo.Context, sr recurring.Series, form url.Values, rows int) (*formPage, error) {
	form.Set("customerId", sr.CustomerID.String()) // the cards offered: the customer's
	p, err := h.recurringForm(c, form, rows)
	if err != nil {
		return nil, err
	}
	p.name, p.page.Title = "recurring-edit", "Edit recurring invoice "+sr.Prefix
	p.page.Data = seriesEdit{recurringFormData: p.page.Data.(recurringFormData), ID: sr.ID.String(), Prefix: sr.Prefix}
	return p, nil
}

type seriesEdit struct {
	recurringFormData
	ID, Prefix string
}

// editSeriesPage is GET /portal/recurring/{id}/edit: the form filled with
// the series' terms.
func (h *handler) editSeriesPage(c echo.Context) error {
	h.allowScript(c, linesScript)
	sr, err := h.seriesOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if sr.Status == recurring.Ended {
		return c.Redirect(http.StatusSeeOther, recurringPath+"/"+sr.ID.String())
	}
	f := url.Values{"memo": {text(sr.Memo)}, "poNumber": {text(sr.PONumber)}, "dueDays": {strconv.Itoa(sr.DueDays)}, "end": {"never"}}
	if sr.Lines == nil {
		f.Set("amount", plain(sr.Amount))
	}
	for i, l := range sr.Lines[:min(len(sr.Lines), maxFormLines)] {
		f.Set(lineField(i, "description"), l.Description)
		f.Set(lineField(i, "quantity"), plain(l.Quantity))
		f.Set(lineField(i, "unitCost"), plain(l.UnitCost))
		if l.TaxRate != nil {
			f.Set(lineField(i, "taxRate"), plain(*l.TaxRate))
		}
	}
	switch {
	case sr.EndAfter != nil:
		f.Set("end", "after")
		f.Set("endAfter", strconv.Itoa(*sr.EndAfter))
	case sr.EndOn != nil:
		f.Set("end", "on")
		f.Set("endOn", sr.EndOn.Format(time.DateOnly))
	}
	if sr.AutoPay != nil {
		f.Set("savedCardId", sr.AutoPay.String())
	}
	p, err := h.seriesForm(c, sr, f, 0)
	if err != nil {
		return h.failure(c, err)
	}
	return h.render(c, http.StatusOK, p.name, p.page)
}

// editSeries is POST /portal/recurring/{id}/edit: the form's values as a
// change of every member it shows (recurring.Store.Update, as PATCH);
// sent twice, the second sets the same values again.
func (h *handler) editSeries(c echo.Context) error {
	h.allowScript(c, linesScript)
	sr, err := h.seriesOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	rows := 0
	if f.Get("action") == actionAddLine {
		rows = min(lineRows(f)+1, maxFormLines)
	}
	form, err := h.seriesForm(c, sr, f, rows)
	if err != nil {
		return h.failure(c, err)
	}
	switch f.Get("action") {
	case actionAddLine:
		return h.render(c, http.StatusOK, form.name, form.page)
	case actionTotals:
		status := http.StatusOK
		if _, _, errs := linesOf(f); len(errs) > 0 {
			status, form.page.Errors = http.StatusBadRequest, errs
		}
		return h.render(c, status, form.name, form.page)
	}
	// The members the form does not show are the series' own.
	f.Set("merchantAccountId", sr.MerchantAccountID.String())
	f.Set("invoiceNumberPrefix", sr.Prefix)
	f.Set("interval", string(sr.Interval))
	f.Set("intervalCount", strconv.Itoa(sr.Count))
	f.Set("startOn", sr.StartOn.Format(time.DateOnly))
	f.Set("send", map[bool]string{true: "yes", false: "no"}[sr.Send])
	t, sc, lineRowsOf, errs := termsOf(f)
	if len(errs) > 0 {
		form.page.Errors = errs
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	ch := recurring.Change{SetLines: true, Lines: t.Lines, SetMemo: true, Memo: t.Memo, SetPONumber: true, PONumber: t.PONumber,
		DueDays: &t.DueDays, SetEndAfter: true, EndAfter: sc.EndAfter, SetEndOn: true, EndOn: sc.EndOn, SetAutoPay: true, AutoPay: t.AutoPay}
	if t.Lines == nil {
		ch.Amount = &t.Amount
	}
	if _, err := h.Recurring.Update(c.Request().Context(), visitOf(c).Membership.OrganizationID, sr.ID, ch); err != nil {
		if r := rule.As(err); r != nil {
			return h.refused(c, seriesWords(renumber(r, lineRowsOf)), form)
		}
		return h.failure(c, err)
	}
	return c.Redirect(http.StatusSeeOther, recurringPath+"/"+sr.ID.String()+"?done=changed")
}
