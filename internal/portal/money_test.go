package portal_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// sameAsAPI checks that a CSV export holds exactly the items of the API's
// list, in its order, each column the API's field of that name: text and
// numbers as the API writes them, times the same instant, none left
// empty but a null.
func sameAsAPI(t *testing.T, what, export string, api []map[string]any) {
	t.Helper()
	records, err := csv.NewReader(strings.NewReader(export)).ReadAll()
	if err != nil {
		t.Fatalf("%s: the export is no CSV: %v\n%s", what, err, export)
	}
	if len(records) != len(api)+1 {
		t.Fatalf("%s: %d rows exported, the API lists %d", what, len(records)-1, len(api))
	}
	header := records[0]
	for i, item := range api {
		for j, col := range header {
			got := records[i+1][j]
			v, ok := item[col]
			if !ok {
				t.Fatalf("%s: column %s is no field of the API's", what, col)
			}
			var want string
			switch v := v.(type) {
			case nil:
			case string:
				want = v
			case bool, float64:
				want = fmt.Sprint(v)
			default:
				t.Fatalf("%s: field %s is a %T", what, col, v)
			}
			// A refund's money is negative in the export as on the pages
			// (the API's amounts are positive, with their kind).
			if (col == "amount" && item["kind"] == "refund" || col == "refundsAmount") && want != "" && want != "0.00" {
				want = "-" + want
			}
			if at, err := time.Parse(time.RFC3339Nano, want); err == nil && strings.Contains(want, "T") {
				if gotAt, err := time.Parse(time.RFC3339, got); err != nil || !gotAt.Equal(at) {
					t.Errorf("%s: row %d %s is %q, the API's %q", what, i, col, got, want)
				}
				continue
			}
			if got != want && got != "'"+want { // a formula is made safe to open (csvCell)
				t.Errorf("%s: row %d %s is %q, the API's %q", what, i, col, got, want)
			}
		}
	}
	if len(api) > 0 && len(header) < 10 {
		t.Errorf("%s: only the columns %v", what, header)
	}
}

func apiItems(t *testing.T, env *apitest.Env, token, path string) []map[string]any {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Body)
	}
	var list []map[string]any
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		t.Fatal(err)
	}
	return list
}

var money = regexp.MustCompile(`-?\$[0-9,]+\.[0-9]{2}`)

// Two days of card payments and deposits, the second's net below zero (a
// refund of more than its sales): the lists show them with the API's
// filters, a page at a time, and their CSV holds exactly what the API
// lists for the same filters; the deposits chart's table and its bars
// say, for each of the 30 days, the sum of that day's deposits' nets as
// the API gives them, and the same total. A deposit's page shows what it
// holds.
func TestCardPaymentsAndDepositsAsTheAPIListsThem(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	settle := func() {
		if _, err := env.App.Payments.SettleOrganization(t.Context(), org, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	first := paidSale(t, env, m, "CP-1", "120.00", apitest.CardApprove)
	paidSale(t, env, m, "CP-2", "30.50", apitest.CardApprove)
	declined := m.MustCreate(t, m.Body("CP-3", "9.99"))
	env.Pay(t, apitest.PayPath(t, declined), apitest.Payment{Card: apitest.CardDecline, Amount: "9.99"})
	settle()
	env.Clock.Advance(24 * time.Hour)
	m.Renew()
	env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + first.Id.String() + "/refund", Token: m.Token,
		Body: map[string]any{"amount": "100.00", "reason": "=HYPERLINK(\"http://evil\")"}})
	paidSale(t, env, m, "CP-4", "10.00", apitest.CardApprove)
	settle()

	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	mid := m.MIDs[0].Id.String()
	deps := apiItems(t, env, m.Token, "/deposits")
	if len(deps) != 2 {
		t.Fatalf("%d deposits, want 2", len(deps))
	}
	// The portal's days are whole days in the organization's time zone:
	// its locations' when they share one, else UTC.
	zone := time.UTC
	if z := m.Locs[0].TimeZone; m.Locs[len(m.Locs)-1].TimeZone == z {
		zone, _ = time.LoadLocation(z)
	}
	day := env.Clock.Now().In(zone).Format(time.DateOnly)
	for _, query := range []string{"", "kind=sale", "kind=refund", "status=declined", "kind=sale&status=approved",
		"merchantAccountId=" + mid, "invoiceId=" + first.InvoiceId.String(), "depositId=" + deps[0]["id"].(string),
		"createdFrom=" + day, "limit=2"} {
		apiQuery := query
		if strings.HasPrefix(query, "createdFrom=") {
			from, _ := time.ParseInLocation(time.DateOnly, day, zone)
			apiQuery = "createdFrom=" + url.QueryEscape(from.Format(time.RFC3339))
		}
		if query == "limit=2" {
			apiQuery = "limit=100" // the export holds every page
		}
		api := apiItems(t, env, m.Token, "/card-payments?"+apiQuery)
		if strings.Contains(query, "limit") {
			page := c.Get("/portal/card-payments?"+query).Want(t, http.StatusOK)
			next := regexp.MustCompile(`href="(/portal/card-payments\?[^"]*cursor=[^"]+)" rel="next"`).FindStringSubmatch(page.Body)
			if next == nil {
				t.Fatalf("no next page of 2 of %d:\n%s", len(api), page.Body)
			}
			rest := c.Get(strings.ReplaceAll(next[1], "&amp;", "&")).Want(t, http.StatusOK)
			if !strings.Contains(rest.Body, api[2]["id"].(string)) || strings.Contains(rest.Body, api[0]["id"].(string)) {
				t.Errorf("the second page does not start at the third card payment")
			}
		} else {
			page := c.Get("/portal/card-payments?"+query).Want(t, http.StatusOK)
			for _, p := range api {
				if !strings.Contains(page.Body, `href="/portal/card-payments/`+p["id"].(string)+`"`) {
					t.Errorf("?%s: card payment %s is not listed", query, p["id"])
				}
			}
			if n := strings.Count(page.Body, `<tr><td data-label="Made"><a href="/portal/card-payments/`); n != len(api) {
				t.Errorf("?%s: %d rows, the API lists %d", query, n, len(api))
			}
		}
		export := c.Get("/portal/card-payments?format=csv&" + strings.ReplaceAll(query, "limit=2", ""))
		export.Want(t, http.StatusOK)
		if ct := export.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
			t.Errorf("the export is %s", ct)
		}
		sameAsAPI(t, "card payments ?"+query, export.Body, api)
	}
	if export := c.Get("/portal/card-payments?format=csv&kind=refund"); !strings.Contains(export.Body, `'=HYPERLINK`) {
		t.Errorf("a reason that is a formula is not made safe: %s", export.Body)
	}
	for _, query := range []string{"", "status=pending", "merchantAccountId=" + mid} {
		sameAsAPI(t, "deposits ?"+query, c.Get("/portal/deposits?format=csv&"+query).Want(t, http.StatusOK).Body,
			apiItems(t, env, m.Token, "/deposits?"+query))
	}
	for _, bad := range []struct{ query, field string }{{"kind=bogus", "kind"}, {"status=lost", "status"},
		{"merchantAccountId=not-an-id", "merchantAccountId"}, {"createdFrom=2026-13-01", "createdFrom"}} {
		c.Get("/portal/card-payments?"+bad.query).Want(t, http.StatusBadRequest).ErrorBeside(t, bad.field, "")
	}
	c.Get("/portal/deposits?status=lost").Want(t, http.StatusBadRequest).ErrorBeside(t, "status", "")
	c.Get("/portal/card-payments?cursor=forged").Want(t, http.StatusBadRequest)

	// The chart: per batch day, the sum of the API's deposits' nets.
	want := map[string]apd.Decimal{}
	var total apd.Decimal
	for _, d := range deps {
		var net apd.Decimal
		if _, _, err := net.SetString(d["netAmount"].(string)); err != nil {
			t.Fatal(err)
		}
		sum := want[d["batchDate"].(string)]
		if _, err := apd.BaseContext.Add(&sum, &sum, &net); err != nil {
			t.Fatal(err)
		}
		want[d["batchDate"].(string)] = sum
		if _, err := apd.BaseContext.Add(&total, &total, &net); err != nil {
			t.Fatal(err)
		}
	}
	page := c.Get("/portal/deposits").Want(t, http.StatusOK)
	rows := regexp.MustCompile(`<tr><td data-label="Day"><time datetime="(\d{4}-\d\d-\d\d)">[^<]*</time></td><td data-label="Deposits" class="num">(\d+)</td><td data-label="Net" class="num">([^<]+)</td></tr>`).
		FindAllStringSubmatch(page.Body, -1)
	bars := regexp.MustCompile(`<rect class="bar( negative)?" [^>]*height="([0-9.]+)"><title>([^<]+)</title></rect>`).FindAllStringSubmatch(page.Body, -1)
	if len(rows) != len(want) || len(bars) != 30 {
		t.Fatalf("the chart's table has %d days, want the %d with deposits; its drawing %d bars, want 30:\n%s", len(rows), len(want), len(bars), page.Body)
	}
	for i, r := range rows {
		if w := want[r[1]]; r[3] != invoice.Money(w) {
			t.Errorf("the table says %s on %s, the API's deposits %s", r[3], r[1], invoice.Money(w))
		}
		if i > 0 && r[1] >= rows[i-1][1] {
			t.Errorf("the table lists %s after %s: not newest first", r[1], rows[i-1][1])
		}
	}
	negative := 0
	for _, bar := range bars {
		day, err := time.Parse("2 Jan 2006", strings.SplitN(bar[3], ":", 2)[0])
		if err != nil {
			t.Fatalf("bar %q: %v", bar[3], err)
		}
		w := want[day.Format(time.DateOnly)]
		if got := money.FindString(bar[3]); got != invoice.Money(w) {
			t.Errorf("the bar of %s says %s, the API's deposits %s", day.Format(time.DateOnly), got, invoice.Money(w))
		}
		if (bar[1] != "") != w.Negative {
			t.Errorf("the bar of %s drawn negative %v, its net %s", day.Format(time.DateOnly), bar[1] != "", w.Text('f'))
		}
		if w.Negative {
			negative++
		}
		if w.IsZero() != (bar[2] == "0.0") {
			t.Errorf("the bar of %s is %s high for a net of %s", day.Format(time.DateOnly), bar[2], w.Text('f'))
		}
	}
	if negative != 1 || !strings.Contains(page.Body, `<td data-label="Net" class="num">`+invoice.Money(total)+`</td></tr></tfoot>`) {
		t.Errorf("%d negative days, want 1; or the total is not %s", negative, invoice.Money(total))
	}
	if !strings.Contains(page.Body, `role="img" aria-labelledby="chart-title chart-desc"`) || !strings.Contains(page.Body, invoice.Money(total)+" net in all") {
		t.Error("the chart's title and description are missing")
	}

	dep := deps[1]["id"].(string) // the first day's
	held := apiItems(t, env, m.Token, "/card-payments?depositId="+dep)
	dp := c.Get("/portal/deposits/"+dep).Want(t, http.StatusOK)
	for _, p := range held {
		dp.Has(t, `href="/portal/card-payments/`+p["id"].(string)+`"`)
	}
	var netFirst apd.Decimal
	_, _, _ = netFirst.SetString(deps[1]["netAmount"].(string))
	dp.Has(t, invoice.Money(netFirst), "?depositId="+dep)
}

// Refunds read as money going back, negative, wherever the pages show
// them beside sales: the card payments' list, a refund's page, a sale's
// refunds, an invoice's refunds, the deposits' list and a deposit's page.
// The deposits chart's table lists only the days with deposits.
func TestRefundsShownNegative(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	sale := paidSale(t, env, m, "NEG-1", "30.00", apitest.CardApprove)
	var refund models.CardPayment
	r := env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + sale.Id.String() + "/refund", Token: m.Token,
		Body: map[string]any{"amount": "4.25"}})
	apitest.Want(t, "refund", r.StatusCode, http.StatusCreated)
	r.JSON(t, &refund)
	made, err := env.App.Payments.SettleOrganization(t.Context(), org, slog.New(slog.DiscardHandler))
	if err != nil || len(made) != 1 {
		t.Fatalf("settle: %d deposits, %v", len(made), err)
	}
	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	c.Get("/portal/card-payments").Want(t, http.StatusOK).Has(t, `<td data-label="Amount" class="num">-$4.25</td>`, `<td data-label="Amount" class="num">$30.00`)
	c.Get("/portal/card-payments/"+refund.Id.String()).Has(t, "<dt>Amount</dt><dd>-$4.25</dd>")
	c.Get("/portal/card-payments/"+sale.Id.String()).Has(t, `class="num">-$4.25</td>`, "<dt>Amount</dt><dd>$30.00</dd>")
	c.Get("/portal/invoices/"+sale.InvoiceId.String()).Has(t, `class="num">-$4.25</td>`)
	deposits := c.Get("/portal/deposits").Has(t, `<td data-label="Refunds" class="num">-$4.25</td>`)
	if n := strings.Count(deposits.Body, `<tr><td data-label="Day">`); n != 1 {
		t.Errorf("the chart's table lists %d days, want the 1 with a deposit", n)
	}
	c.Get("/portal/deposits/"+made[0].ID.String()).Has(t, "<dt>Refunds</dt><dd>-$4.25 (1)</dd>")
}
