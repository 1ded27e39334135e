package portal

import (
	"context"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
)

const depositsPath = "/portal/deposits"

var depositStatuses = []string{payment.DepositPending, payment.DepositPaid}

type depositsData struct {
	listData[depositLine]
	Statuses []string
	MIDs     []midOption
	// Chart is the last chartDays days' net deposits, drawn and listed.
	Chart depositChart
}

// depositLine is a deposit as the list's row shows it, its times in the
// organization's time zone, each cell's text made before the template
// runs (as invoiceLine).
type depositLine struct {
	ID, MID                       string
	Paid                          bool // paid, or pending
	BatchDate, PaidAt, ExpectedAt template.HTML
	SalesAmount, RefundsAmount    string
	FeesAmount, NetAmount         string
}

func depositLineOf(d payment.Deposit, zone *time.Location) depositLine {
	l := depositLine{ID: d.ID.String(), MID: d.MID, Paid: d.Status == payment.DepositPaid, BatchDate: day(d.BatchDate),
		SalesAmount: invoice.Money(d.SalesAmount), RefundsAmount: minus(d.RefundsAmount),
		FeesAmount: invoice.Money(d.FeesAmount), NetAmount: invoice.Money(d.NetAmount)}
	if l.Paid {
		l.PaidAt = moment(d.PaidAt, zone)
	} else {
		l.ExpectedAt = day(d.ExpectedAt)
	}
	return l
}

// deposits is GET /portal/deposits: the last 30 days' net deposits as a
// chart with its table, then the organization's deposits, newest first, a
// page at a time, with the API's filters (MID, status, the days they were
// made); ?format=csv exports them all.
func (h *handler) deposits(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	q, err := h.listQuery(c)
	if err != nil {
		return h.failure(c, err)
	}
	f := payment.DepositFilter{MerchantAccountID: q.ID("merchantAccountId"), Status: q.Choice("status", depositStatuses)}
	f.CreatedFrom, f.CreatedTo = q.Dates("createdFrom", "createdTo")
	list := func(ctx context.Context, limit int, cursor string) ([]payment.Deposit, string, error) {
		return h.Payments.Deposits(ctx, m.OrganizationID, f, limit, cursor)
	}
	if !q.Failed() && q.CSV {
		return streamCSV(h, c, csvExport[payment.Deposit]{Name: "deposits", Zone: q.Zone, Columns: depositColumns(q.Zone), Page: list})
	}
	mids, err := h.accounts(c)
	if err != nil {
		return h.failure(c, err)
	}
	// The chart's days end today in the organization's time zone, as its
	// deposits' batch dates are days of its locations.
	now := h.Now().In(q.Zone)
	last := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	days, err := h.Payments.DailyNet(ctx, m.OrganizationID, last.AddDate(0, 0, 1-chartDays), last)
	if err != nil {
		return h.failure(c, err)
	}
	data := depositsData{Statuses: depositStatuses, MIDs: midOptions(mids, q.Values.Get("merchantAccountId")), Chart: newDepositChart(days)}
	data.Zone = q.Zone.String()
	if !q.Failed() {
		row := func(d payment.Deposit) depositLine { return depositLineOf(d, q.Zone) }
		if err := fillList(ctx, q, &data.listData, depositsPath, list, row); err != nil {
			return h.failure(c, err)
		}
	}
	return h.renderList(c, q, "deposits", "Deposits", data)
}

// depositColumns are the columns of the deposits' CSV: the API's names
// for its fields, times in zone.
func depositColumns(zone *time.Location) []csvColumn[payment.Deposit] {
	return []csvColumn[payment.Deposit]{
		{"id", func(d payment.Deposit) string { return d.ID.String() }},
		{"merchantAccountId", func(d payment.Deposit) string { return d.MerchantAccountID.String() }},
		{"mid", func(d payment.Deposit) string { return d.MID }},
		{"batchDate", func(d payment.Deposit) string { return csvDate(&d.BatchDate) }},
		{"expectedAt", func(d payment.Deposit) string { return csvDate(&d.ExpectedAt) }},
		{"status", func(d payment.Deposit) string { return d.Status }},
		{"paidAt", func(d payment.Deposit) string { return csvTime(d.PaidAt, zone) }},
		{"salesCount", func(d payment.Deposit) string { return strconv.Itoa(d.SalesCount) }},
		{"salesAmount", func(d payment.Deposit) string { return d.SalesAmount.Text('f') }},
		{"refundsCount", func(d payment.Deposit) string { return strconv.Itoa(d.RefundsCount) }},
		{"refundsAmount", func(d payment.Deposit) string { return csvMinus(d.RefundsAmount) }},
		{"feesAmount", func(d payment.Deposit) string { return d.FeesAmount.Text('f') }},
		{"netAmount", func(d payment.Deposit) string { return d.NetAmount.Text('f') }},
		{"createdAt", func(d payment.Deposit) string { return csvTime(&d.CreatedAt, zone) }},
	}
}

// heldShown is how many of a deposit's card payments its page lists; the
// card payments list, filtered by the deposit, has them all.
const heldShown = 50

type depositData struct {
	Deposit payment.Deposit
	Held    []cardPaymentRow
	More    bool
	Zone    *time.Location
}

// deposit is GET /portal/deposits/{id}: a deposit's sums and the card
// payments it holds.
func (h *handler) deposit(c echo.Context) error {
	ctx := c.Request().Context()
	m := visitOf(c).Membership
	id, ok := parseID(c.Param("id"))
	if !ok {
		return h.notFound(c)
	}
	d, err := h.Payments.Deposit(ctx, m.OrganizationID, id)
	if err != nil {
		return h.answer(c, err, nil)
	}
	zone, err := h.zoneOf(c)
	if err != nil {
		return h.failure(c, err)
	}
	held, next, err := h.Payments.CardPayments(ctx, m.OrganizationID, payment.Filter{DepositID: &d.ID}, heldShown, "")
	if err != nil {
		return h.failure(c, err)
	}
	data := depositData{Deposit: d, More: next != "", Zone: zone}
	for _, p := range held {
		data.Held = append(data.Held, cardPaymentRow{CardPayment: p, Zone: zone})
	}
	return h.render(c, http.StatusOK, "deposit", page{Title: "Deposit of " + d.BatchDate.Format("2 Jan 2006") + ", " + d.MID, Data: data})
}
