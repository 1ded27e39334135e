package portal

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// The invoice editor. GET /portal/invoices/new is a new invoice's (GET
// /portal/invoices/{id}/duplicate: filled with that invoice's customer and
// lines), GET /portal/invoices/{id}/edit an invoice's while it may
// change. Each posts its buttons: "Add a line" and "Update totals" show
// the form again (a row more; its totals), "Save draft" and "Finalize and
// send" make the invoice with invoice.Store.Create, as POST
// /payment-requests does (same rules, events and idempotency), or change
// it with invoice.Store.Update, as PATCH /payment-requests/{id} with
// If-Match does (then Finalize, for a draft finalized). The script
// (lines.js) adds rows and keeps the totals without posting.

const (
	// formLineRows is how many rows of lines a new form shows; "Add a
	// line" adds more, up to maxFormLines.
	formLineRows = 1
	// maxFormLines bounds the lines the portal's form takes (the page
	// stays light and the form under its size limit); the API takes 500.
	maxFormLines = 100
	// maxPickerCustomers bounds the customers the picker lists (the
	// newest); another is found by its email.
	maxPickerCustomers = 500
)

// The editor's buttons, as its action field names them; a form sent
// without one (Enter in a field) finalizes.
const (
	actionAddLine  = "add"
	actionTotals   = "totals"
	actionDraft    = "draft"
	actionFinalize = "finalize"
)

type invoiceFormData struct {
	// Action is where the form posts; Editing the invoice it changes (nil
	// for a new one).
	Action    string
	Editing   *editedInvoice
	Accounts  []account
	Customers []customerOption
	// MoreCustomers: the picker lists the newest maxPickerCustomers only.
	MoreCustomers bool
	Rows          []lineRow
	MaxLines      int
	// Totals are the lines' (nil: no lines, or a line the domain refuses).
	Totals *lineTotals
	// TermsDays are the business's payment terms (nil: none set).
	TermsDays *int
	Reminders invoice.ReminderSettings
}

// editedInvoice is the invoice an edit form changes, at the version it
// showed.
type editedInvoice struct {
	ID, Number string
	Version    int
	Draft      bool
}

type customerOption struct {
	ID, Label string
	Selected  bool
}

// lineRow is a row of the lines editor: its index, its tax rates offered
// and its amount ("" until it can be totalled).
type lineRow struct {
	N      int
	Rates  []rateOption
	Amount string
}

type rateOption struct {
	Value, Label string
	Selected     bool
}

type lineTotals struct{ Subtotal, Tax, Total string }

// invoiceFields are the form's fields in order, as the domain names them
// (so that its refusals land beside them), for rows of lines.
func invoiceFields(rows int) []string {
	fields := []string{"merchantAccountId", "customerId", "customerName", "customerCompany", "customerEmail",
		"customerPhone", "invoiceNumber", "poNumber", "dueDate", "memo", "lines"}
	for i := range rows {
		fields = append(fields, lineField(i, "description"), lineField(i, "quantity"), lineField(i, "unitCost"), lineField(i, "taxRate"))
	}
	return append(fields, "amount", "delivery", "send", "sendAt", "reminders")
}

func lineField(i int, name string) string { return fmt.Sprintf("lines[%d].%s", i, name) }

// lineRows is how many rows of lines form holds (at least formLineRows).
func lineRows(form url.Values) int {
	n := formLineRows
	for i := range maxFormLines + 1 {
		if _, ok := form[lineField(i, "description")]; ok {
			n = max(n, i+1)
		}
	}
	return min(n, maxFormLines)
}

// editor is the editor's page of form, the values sent or filled in; ed
// is the invoice it changes (nil: a new one); rows is how many rows of
// lines it shows (0: as many as form has).
func (h *handler) editor(c echo.Context, form url.Values, ed *editedInvoice, rows int) (*formPage, error) {
	ctx := c.Request().Context()
	org := visitOf(c).Membership.OrganizationID
	all, err := h.accounts(c)
	if err != nil {
		return nil, err
	}
	d := invoiceFormData{Action: invoicesPath, Editing: ed, MaxLines: maxFormLines}
	if ed != nil {
		d.Action = invoicesPath + "/" + ed.ID + "/edit"
	}
	for _, a := range all {
		if a.Active || ed != nil && form.Get("merchantAccountId") == a.ID.String() {
			d.Accounts = append(d.Accounts, a)
		}
	}
	if d.Reminders, err = h.Invoices.ReminderSettings(ctx, org); err != nil {
		return nil, err
	}
	b, err := directory.BrandingOf(ctx, h.Directory.DB, org)
	if err != nil {
		return nil, err
	}
	d.TermsDays = b.PaymentTermsDays
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
	title := "New invoice"
	if ed != nil {
		title = "Edit invoice " + ed.Number
	}
	return &formPage{name: "invoice-new", page: page{Title: title, Form: form, Data: d}, fields: invoiceFields(rows)}, nil
}

// lineView is the lines editor's rows (rows of them) of form, each
// offering rates, and their totals (nil: none, or a line the domain
// refuses): the invoice editor's and the recurring invoice's alike.
func lineView(form url.Values, rates []invoice.TaxRate, rows int) ([]lineRow, *lineTotals) {
	var out []lineRow
	lines, lineRowsOf, errs := linesOf(form)
	for i := range rows {
		r := lineRow{N: i, Rates: rateOptions(rates, form.Get(lineField(i, "taxRate")))}
		read := errs.Of(lineField(i, "quantity")) == "" && errs.Of(lineField(i, "unitCost")) == "" && errs.Of(lineField(i, "taxRate")) == ""
		if j := slices.Index(lineRowsOf, i); j >= 0 && read && priced(lines[j:j+1]) {
			r.Amount = invoice.Money(invoice.LineTotal(lines[j]))
		}
		out = append(out, r)
	}
	if len(errs) == 0 && len(lines) > 0 && priced(lines) {
		subtotal, tax := invoice.Totals(lines)
		return out, &lineTotals{Subtotal: invoice.Money(subtotal), Tax: invoice.Money(tax), Total: invoice.Money(invoice.LinesTotal(lines))}
	}
	return out, nil
}

// priced says whether the domain takes every one of lines as it is, so
// that they have totals (a line it refuses, such as a quantity of 0 or
// of 40 digits, has none).
func priced(lines []invoice.Line) bool {
	r := rule.As(invoice.Validate(invoice.Draft{Lines: lines}))
	if r == nil {
		return true
	}
	for field := range r.Fields {
		if strings.HasPrefix(field, "lines") {
			return false
		}
	}
	return true
}

// customerOptions are the customers the picker offers, by name, chosen
// the one of id (added when it is not among the newest).
func (h *handler) customerOptions(c echo.Context, chosen string) ([]customerOption, bool, error) {
	ctx := c.Request().Context()
	org := visitOf(c).Membership.OrganizationID
	list, next, err := h.Customers.List(ctx, org, customer.Filter{}, maxPickerCustomers, "")
	if err != nil {
		return nil, false, err
	}
	if id, ok := parseID(chosen); ok && !slices.ContainsFunc(list, func(c customer.Customer) bool { return c.ID == id }) {
		cust, err := h.Customers.Get(ctx, org, id)
		if err == nil {
			list = append(list, cust)
		} else if !rule.Is(err, rule.NotFound) {
			return nil, false, err
		}
	}
	opts := make([]customerOption, len(list))
	for i, cust := range list {
		label := cust.Email
		if cust.Company != nil {
			label = *cust.Company + " · " + label
		}
		if cust.Name != nil {
			label = *cust.Name + " · " + label
		}
		opts[i] = customerOption{ID: cust.ID.String(), Label: label, Selected: cust.ID.String() == chosen}
	}
	slices.SortFunc(opts, func(a, b customerOption) int {
		return strings.Compare(strings.ToLower(a.Label), strings.ToLower(b.Label))
	})
	return opts, next != "", nil
}

// rateOptions are the tax rates a row offers: none, the organization's
// named rates, and the row's own when it is none of them (a rate since
// removed), chosen the one typed.
func rateOptions(rates []invoice.TaxRate, typed string) []rateOption {
	chosen, ok := web.Decimal(typed, false)
	opts := []rateOption{{Value: "", Label: "No tax", Selected: !ok}}
	found := !ok
	for _, r := range rates {
		same := ok && r.Rate.Cmp(&chosen) == 0 && !found
		found = found || same
		opts = append(opts, rateOption{Value: plain(r.Rate), Label: r.Label(), Selected: same})
	}
	if !found {
		opts = append(opts, rateOption{Value: plain(chosen), Label: invoice.Percent(chosen), Selected: true})
	}
	return opts
}

// newInvoice is GET /portal/invoices/new: the form, empty.
func (h *handler) newInvoice(c echo.Context) error {
	return h.newForm(c, url.Values{"delivery": {invoice.Email}, "send": {"now"}})
}

// duplicateInvoice is GET /portal/invoices/{id}/duplicate: the new
// invoice's form filled with the invoice's customer and lines.
func (h *handler) duplicateInvoice(c echo.Context) error {
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	form, err := h.formOf(c, inv)
	if err != nil {
		return h.failure(c, err)
	}
	form.Set("send", "now")
	form.Del("dueDate")
	return h.newForm(c, form)
}

// newForm answers the new invoice's form of values with a new key, the
// next number suggested and the due date of the payment terms.
func (h *handler) newForm(c echo.Context, form url.Values) error {
	h.allowScript(c, linesScript)
	number, err := h.Invoices.NextNumber(c.Request().Context(), visitOf(c).Membership.OrganizationID)
	if err != nil {
		return h.failure(c, err)
	}
	form.Set("invoiceNumber", number)
	form.Set(idempotencyField, newFormKey())
	ed, err := h.editor(c, form, nil, 0)
	if err != nil {
		return h.failure(c, err)
	}
	if days := ed.page.Data.(invoiceFormData).TermsDays; days != nil {
		zone, err := h.zoneOf(c)
		if err != nil {
			return h.failure(c, err)
		}
		form.Set("dueDate", h.Now().In(zone).AddDate(0, 0, *days).Format(time.DateOnly))
	}
	return h.render(c, http.StatusOK, ed.name, ed.page)
}

// formOf is the editor's form filled with inv: its customer chosen, the
// customer's details left empty where the invoice has the customer's own
// (so that another customer chosen takes theirs), its lines.
func (h *handler) formOf(c echo.Context, inv invoice.Invoice) (url.Values, error) {
	cust, err := h.Customers.Get(c.Request().Context(), inv.OrganizationID, inv.CustomerID)
	if err != nil {
		return nil, err
	}
	text := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	f := url.Values{}
	set := func(field string, v *string) {
		if v != nil {
			f.Set(field, *v)
		}
	}
	f.Set("merchantAccountId", inv.MerchantAccountID.String())
	f.Set("customerId", inv.CustomerID.String())
	for _, m := range []struct {
		field         string
		on, customers *string
	}{
		{"customerName", inv.CustomerName, cust.Name}, {"customerCompany", inv.CustomerCompany, cust.Company},
		{"customerEmail", &inv.CustomerEmail, &cust.Email}, {"customerPhone", inv.CustomerPhone, cust.Phone},
	} {
		if !strings.EqualFold(text(m.on), text(m.customers)) {
			set(m.field, m.on)
		}
	}
	set("poNumber", inv.PONumber)
	set("memo", inv.Memo)
	if inv.DueDate != nil {
		f.Set("dueDate", inv.DueDate.Format(time.DateOnly))
	}
	f.Set("delivery", inv.Delivery)
	f.Set("reminders", invoiceRow{Invoice: inv}.ReminderChoice())
	if len(inv.Lines) == 0 {
		f.Set("amount", plain(inv.Amount))
	}
	for i, l := range inv.Lines[:min(len(inv.Lines), maxFormLines)] {
		f.Set(lineField(i, "description"), l.Description)
		f.Set(lineField(i, "quantity"), plain(l.Quantity))
		f.Set(lineField(i, "unitCost"), plain(l.UnitCost))
		if l.TaxRate != nil {
			f.Set(lineField(i, "taxRate"), plain(*l.TaxRate))
		}
	}
	return f, nil
}

// again answers the editor's own buttons, which change nothing: "Add a
// line" shows it with a row more, "Update totals" with its totals (and,
// when a line cannot be read, the message beside it). It reports false
// for the other buttons.
func (h *handler) again(c echo.Context, ed *editedInvoice) (bool, error) {
	f := c.Request().PostForm
	switch f.Get("action") {
	case actionAddLine:
		form, err := h.editor(c, f, ed, min(lineRows(f)+1, maxFormLines))
		if err != nil {
			return true, h.failure(c, err)
		}
		return true, h.render(c, http.StatusOK, form.name, form.page)
	case actionTotals:
		form, err := h.editor(c, f, ed, 0)
		if err != nil {
			return true, h.failure(c, err)
		}
		status := http.StatusOK
		if _, _, errs := linesOf(f); len(errs) > 0 {
			status, form.page.Errors = http.StatusBadRequest, errs
		}
		return true, h.render(c, status, form.name, form.page)
	}
	return false, nil
}

// createInvoice is POST /portal/invoices: the form's values as a draft
// for invoice.Store.Create with the form's idempotency key, saved as a
// draft or finalized and sent as its button says. A form sent twice makes
// one invoice, and both answers lead to it.
func (h *handler) createInvoice(c echo.Context) error {
	h.allowScript(c, linesScript) // the form may come back
	if done, err := h.again(c, nil); done {
		return err
	}
	f := c.Request().PostForm
	form, err := h.editor(c, f, nil, 0)
	if err != nil {
		return h.failure(c, err)
	}
	d, rows, ok := h.readDraft(c, form)
	if !ok {
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	done := "created"
	if f.Get("action") == actionDraft {
		d.AsDraft, d.Send, d.SendAt, done = true, nil, nil, "drafted"
	}
	key := f.Get(idempotencyField)
	inv, _, err := h.Invoices.Create(c.Request().Context(), invoiceActor(c), d, &key)
	if r := rule.As(keyRefusal(err, form, idempotencyField, "made an invoice")); r != nil {
		return h.refused(c, invoiceWords(renumber(r, rows)), form)
	}
	if err != nil {
		return h.failure(c, err)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done="+done)
}

// readDraft reads form's values as a draft; when they cannot be read, it
// sets the form's errors (with what the domain would refuse too, so that
// every message shows at once) and reports false.
func (h *handler) readDraft(c echo.Context, form *formPage) (invoice.Draft, []int, bool) {
	zones := map[uuid.UUID]*time.Location{}
	for _, a := range form.page.Data.(invoiceFormData).Accounts {
		zones[a.ID] = a.Zone
	}
	d, rows, errs := draftOf(form.page.Form, zones)
	if len(errs) == 0 {
		return d, rows, true
	}
	if r := rule.As(invoice.Validate(d)); r != nil {
		for _, e := range web.FromRule(invoiceWords(renumber(r, rows)), form.fields) {
			errs.Add(e.Field, e.Message)
		}
	}
	form.page.Errors = errs
	return d, rows, false
}

// editInvoicePage is GET /portal/invoices/{id}/edit: the editor filled
// with the invoice, at its version, while it may change.
func (h *handler) editInvoicePage(c echo.Context) error {
	h.allowScript(c, linesScript)
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	if !inv.Changeable() {
		return h.answer(c, invoice.NotChangeable(&inv), nil)
	}
	form, err := h.formOf(c, inv)
	if err != nil {
		return h.failure(c, err)
	}
	form.Set("invoiceNumber", inv.InvoiceNumber)
	form.Set("version", strconv.Itoa(inv.Version))
	form.Set("send", "now")
	ed, err := h.editor(c, form, editedOf(inv), 0)
	if err != nil {
		return h.failure(c, err)
	}
	return h.render(c, http.StatusOK, ed.name, ed.page)
}

func editedOf(inv invoice.Invoice) *editedInvoice {
	return &editedInvoice{ID: inv.ID.String(), Number: inv.InvoiceNumber, Version: inv.Version, Draft: inv.Status == invoice.InDraft}
}

// editInvoice is POST /portal/invoices/{id}/edit: the form's values as a
// change of every member the editor shows, for the version it showed
// (another → the form again, saying the invoice changed, nothing saved);
// a draft finalized then, as its button says.
func (h *handler) editInvoice(c echo.Context) error {
	h.allowScript(c, linesScript)
	inv, err := h.invoiceOf(c)
	if err != nil {
		return h.answer(c, err, nil)
	}
	f := c.Request().PostForm
	ed := editedOf(inv)
	version, err := strconv.Atoi(f.Get("version"))
	if err != nil {
		return h.message(c, http.StatusBadRequest, "Form incomplete", "This form is incomplete. Open the invoice and edit it again.")
	}
	ed.Version = version
	if done, err := h.again(c, ed); done {
		return err
	}
	form, err := h.editor(c, f, ed, 0)
	if err != nil {
		return h.failure(c, err)
	}
	d, rows, ok := h.readDraft(c, form)
	if !ok {
		return h.render(c, http.StatusBadRequest, form.name, form.page)
	}
	change := invoice.Change{To: d, IfMatch: []int{version}, Given: map[string]bool{}}
	for _, name := range invoice.Changeable {
		change.Given[name] = name != "amount" || d.Lines == nil
	}
	changed, err := h.Invoices.Update(c.Request().Context(), invoiceActor(c), inv.ID, change)
	if r := rule.As(err); r != nil {
		if r.Kind == rule.Changed {
			r = rule.New(rule.Changed, "", r.Title, "Someone changed this invoice after this page was shown, so nothing was saved. "+
				"Open the invoice again to see it as it is now, then edit it.")
		}
		return h.refused(c, invoiceWords(renumber(r, rows)), form)
	}
	if err != nil {
		return h.failure(c, err)
	}
	if changed.Status != invoice.InDraft || f.Get("action") == actionDraft {
		return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done=changed")
	}
	if _, err = h.Invoices.Finalize(c.Request().Context(), invoiceActor(c), inv.ID, d.Send, d.SendAt); err != nil {
		return h.answer(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, invoicesPath+"/"+inv.ID.String()+"?done=finalized")
}

// renumber is r with its lines named by the form's rows: the draft leaves
// out blank rows, so its line i is the form's row rows[i].
func renumber(r *rule.Error, rows []int) *rule.Error {
	out := *r
	out.Field = rowField(r.Field, rows)
	if len(r.Fields) > 0 {
		out.Fields = map[string][]string{}
		for name, msgs := range r.Fields {
			out.Fields[rowField(name, rows)] = msgs
		}
	}
	return &out
}

// rowField is the form's name of the draft's field name.
func rowField(name string, rows []int) string {
	if m := lineKey.FindStringSubmatch(name); m != nil {
		if i, err := strconv.Atoi(m[1]); err == nil && i < len(rows) {
			return lineField(rows[i], m[2])
		}
	}
	return name
}

var lineKey = regexp.MustCompile(`^lines\[(\d+)\]\.(\w+)$`)

// invoiceWords is r as the editor says it: the refusals whose message
// names the API's members (a customer's email, a tax-exempt customer's
// taxed line) in the page's words.
func invoiceWords(r *rule.Error) *rule.Error {
	out := *r
	switch {
	case r.Title == "Customer email differs":
		out.Message = "This is not the email of the customer chosen above. Leave the email empty to use theirs, or choose “A new customer”."
	case r.Title == "Customer is tax-exempt":
		out.Message = "This customer is tax-exempt: choose “No tax” for each line."
	default:
		return r
	}
	return &out
}

// draftOf reads the form as a draft: what cannot be read at all (a number
// that is no number, a date that is no date) is refused here, beside its
// field; every rule is the domain's. rows are the form's rows of the
// draft's lines (blank rows are left out). With lines, the amount is
// theirs: one typed too must be their total.
func draftOf(f url.Values, zones map[uuid.UUID]*time.Location) (d invoice.Draft, rows []int, errs web.Errors) {
	text := func(name string) *string {
		s := strings.TrimSpace(f.Get(name))
		if s == "" {
			return nil
		}
		return &s
	}
	d.InvoiceNumber = strings.TrimSpace(f.Get("invoiceNumber"))
	d.PONumber, d.CustomerName, d.CustomerCompany = text("poNumber"), text("customerName"), text("customerCompany")
	d.CustomerEmail, d.CustomerPhone, d.Memo, d.Delivery = text("customerEmail"), text("customerPhone"), text("memo"), text("delivery")
	if s := f.Get("customerId"); s != "" {
		if id, ok := parseID(s); ok {
			d.CustomerID = &id
		} else {
			errs.Add("customerId", "Choose one of the customers offered, or “A new customer”.")
		}
	}

	zone := time.UTC
	if id, err := uuid.Parse(f.Get("merchantAccountId")); err != nil {
		errs.Add("merchantAccountId", "Choose the merchant account (MID) the customer pays into.")
	} else {
		d.MerchantAccountID = id
		if z := zones[id]; z != nil {
			zone = z
		}
	}
	if s := strings.TrimSpace(f.Get("dueDate")); s != "" {
		if t, err := time.Parse(time.DateOnly, s); err == nil {
			d.DueDate = &t
		} else {
			errs.Add("dueDate", "Enter a date as YYYY-MM-DD, such as 2026-12-31.")
		}
	}

	d.Lines, d.Amount, rows, errs = amountOf(f, errs)

	switch f.Get("send") {
	case "now":
		d.Send = ptrTo(true)
	case "no":
		d.Send = ptrTo(false)
	case "schedule":
		s := strings.TrimSpace(f.Get("sendAt"))
		t, err := time.ParseInLocation("2006-01-02T15:04", s, zone)
		if err != nil && f.Get("action") != actionDraft {
			errs.Add("sendAt", "Enter the day and time to send the pay link, in the time zone of the MID's location.")
		} else if err == nil {
			d.SendAt = &t
		}
	default:
		errs.Add("send", "Choose when the pay link goes to the customer.")
	}
	d.Reminders = remindersOf(f, &errs)
	return d, rows, errs
}

// amountOf reads the form's lines (nil: none) and amount, adding to errs
// what cannot be read: with lines the amount is theirs, and one typed too
// must be their total. rows are the form's rows of the lines.
func amountOf(f url.Values, errs web.Errors) (lines []invoice.Line, amount apd.Decimal, rows []int, _ web.Errors) {
	lines, rows, lineErrs := linesOf(f)
	errs = append(errs, lineErrs...)
	if len(lines) == 0 {
		lines = nil
	}
	typed := strings.TrimSpace(f.Get("amount"))
	read, msg := web.ReadMoney(typed, "Enter the amount in dollars and cents, such as 120.50.")
	switch {
	case len(lines) > 0 && len(lineErrs) == 0 && priced(lines):
		amount = invoice.LinesTotal(lines)
		if typed != "" && (msg != "" || read.Cmp(&amount) != 0) {
			errs.Add("amount", "The lines make the total, "+invoice.Money(amount)+": leave the amount empty.")
		}
	case len(lines) > 0:
	case typed == "":
		errs.Add("amount", "Enter the amount of the invoice, such as 120.50, or add a line.")
	case msg != "":
		errs.Add("amount", msg)
	default:
		amount = read
	}
	return lines, amount, rows, errs
}

// remindersOf reads the reminders' choice: the settings' (nil), on or off.
func remindersOf(f url.Values, errs *web.Errors) *bool {
	switch f.Get("reminders") {
	case "":
		return nil
	case "on":
		return ptrTo(true)
	case "off":
		return ptrTo(false)
	}
	errs.Add("reminders", "Choose one of the choices offered.")
	return nil
}

// linesOf reads the form's rows of lines, blank ones left out: the lines,
// the form's row of each, and what cannot be read, beside its field.
func linesOf(f url.Values) (lines []invoice.Line, rows []int, errs web.Errors) {
	for i := range maxFormLines + 1 {
		desc, hasDesc := f[lineField(i, "description")]
		qty, hasQty := f[lineField(i, "quantity")]
		cost, hasCost := f[lineField(i, "unitCost")]
		if !hasDesc && !hasQty && !hasCost {
			break
		}
		if i == maxFormLines {
			errs.Add("lines", fmt.Sprintf("The portal takes up to %d lines; make invoices with more through the API.", maxFormLines))
			break
		}
		l := invoice.Line{Description: strings.TrimSpace(first(desc))}
		q, c := strings.TrimSpace(first(qty)), strings.TrimSpace(first(cost))
		if l.Description == "" && q == "" && c == "" {
			continue
		}
		if v, ok := web.Decimal(q, false); ok {
			l.Quantity = v
		} else {
			errs.Add(lineField(i, "quantity"), "Enter a number, such as 2 or 1.5.")
		}
		if v, msg := web.ReadMoney(c, "Enter an amount, such as 19.99 (negative for a discount)."); msg == "" {
			l.UnitCost = v
		} else {
			errs.Add(lineField(i, "unitCost"), msg)
		}
		if s := strings.TrimSpace(f.Get(lineField(i, "taxRate"))); s != "" {
			if v, ok := web.Decimal(s, false); ok {
				l.TaxRate = &v
			} else {
				errs.Add(lineField(i, "taxRate"), "Choose one of the tax rates offered.")
			}
		}
		lines = append(lines, l)
		rows = append(rows, i)
	}
	return lines, rows, errs
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func ptrTo[T any](v T) *T { return &v }
