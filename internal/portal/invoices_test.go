package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

// merchant is a new demo merchant with an API key, and a member of it
// signed in to the portal with permissions.
func merchant(t *testing.T, env *apitest.Env, permissions ...string) (apitest.Merchant, *portaltest.Client) {
	t.Helper()
	m := apitest.NewMerchant(t, env)
	c, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", permissions...)
	return m, c
}

var (
	rowLinks = regexp.MustCompile(`<a href="/portal/invoices/([0-9a-f-]{36})">`)
	nextLink = regexp.MustCompile(`<a href="([^"]+)" rel="next">Next page</a>`)
)

// invoiceIDs are the invoices a list page shows, in order.
func invoiceIDs(p portaltest.Page) []string {
	var ids []string
	for _, m := range rowLinks.FindAllStringSubmatch(p.Body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// next is the address of the page's "Next page" link, "" when it has none.
func next(p portaltest.Page) string {
	m := nextLink.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

// The list pages through every invoice 25 at a time, newest first, the
// "Next page" link carrying the cursor and the filters; each filter
// narrows it as the API's does, the customer's name matching any part of
// it in any case (and % or _ in it matching only themselves).
func TestInvoiceListFiltersAndPages(t *testing.T) {
	t.Parallel()
	env, _ := newOwnEnv(t)
	m, c := merchant(t, env, auth.PaymentsView)
	var made []models.Invoice // oldest first
	for i := range 30 {
		b := m.Body(fmt.Sprintf("LIST-%02d", i), "10.00")
		b["customerName"] = []string{"Dana Whitfield", "Sam O'Neil", "100% Pure_Co"}[i%3]
		b["customerEmail"] = fmt.Sprintf("customer%d@example.com", i%2)
		made = append(made, m.MustCreate(t, b))
		env.Clock.Advance(10 * time.Second)
	}
	apitest.Want(t, "cancel", env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + made[3].Id.String() + "/cancel", Token: m.Token}).StatusCode, http.StatusOK)

	first := c.Get("/portal/invoices").Want(t, http.StatusOK).Has(t, "<caption", `scope="col"`, "<time datetime=", "Download as CSV")
	ids := invoiceIDs(first)
	if len(ids) != 25 || ids[0] != made[29].Id.String() || ids[24] != made[5].Id.String() {
		t.Fatalf("first page: %d invoices, from %v", len(ids), ids)
	}
	second := c.Get(next(first)).Want(t, http.StatusOK)
	if ids := invoiceIDs(second); len(ids) != 5 || ids[4] != made[0].Id.String() || next(second) != "" {
		t.Fatalf("second page: %v, next %q", ids, next(second))
	}

	count := func(query string) int {
		t.Helper()
		n, path := 0, "/portal/invoices?"+query
		for path != "" {
			p := c.Get(path).Want(t, http.StatusOK)
			n += len(invoiceIDs(p))
			path = next(p)
			if path != "" && !strings.Contains(path, strings.Split(query, "=")[0]+"=") {
				t.Fatalf("the next page %q lost the filter %q", path, query)
			}
		}
		return n
	}
	for query, want := range map[string]int{
		"status=cancelled":                      1,
		"status=open":                           29,
		"customerName=WHIT":                     10,
		"customerName=o%27neil":                 10,
		"customerName=100%25":                   10,
		"customerName=pure_co":                  10,
		"customerName=_":                        10,
		"customerName=%25":                      10,
		"customerName=nobody":                   0,
		"customerEmail=CUSTOMER1%40example.com": 15,
		"invoiceNumber=LIST-07":                 1,
		"invoiceNumber=LIST":                    0,
		"limit=7&customerName=dana":             10,
	} {
		if got := count(query); got != want {
			t.Errorf("%s: %d invoices, want %d", query, got, want)
		}
	}
	// Days are whole days in the locations' time zone, both included.
	la, _ := time.LoadLocation("America/Los_Angeles")
	today := env.Clock.Now().In(la).Format(time.DateOnly)
	if got := count("createdFrom=" + today + "&createdTo=" + today); got != countSince(made, today, la) {
		t.Errorf("today: %d invoices, want %d", got, countSince(made, today, la))
	}
	tomorrow := env.Clock.Now().In(la).AddDate(0, 0, 1).Format(time.DateOnly)
	if got := count("createdFrom=" + tomorrow); got != 0 {
		t.Errorf("from tomorrow: %d invoices", got)
	}
	c.Get("/portal/invoices?customerName=nobody").Has(t, "No invoices match these filters.")

	for _, bad := range []struct{ query, field, message string }{
		{"status=lost", "status", "Choose one"},
		{"status=open&status=paid", "status", "Choose one value"},
		{"createdFrom=30%2F11%2F2026", "createdFrom", "YYYY-MM-DD"},
		{"createdFrom=2026-12-02&createdTo=2026-12-01", "createdTo", "on or after"},
		{"invoiceNumber=" + strings.Repeat("9", 65), "invoiceNumber", "at most 64"},
	} {
		p := c.Get("/portal/invoices?"+bad.query).Want(t, http.StatusBadRequest).ErrorBeside(t, bad.field, bad.message)
		if !strings.HasPrefix(titleOf(p), "Error: ") || len(invoiceIDs(p)) != 0 {
			t.Errorf("%s: title %q, %d rows", bad.query, titleOf(p), len(invoiceIDs(p)))
		}
	}
	c.Get("/portal/invoices?limit=101").Want(t, http.StatusBadRequest).Has(t, "1 to 100")
	c.Get("/portal/invoices?cursor=made-up").Want(t, http.StatusBadRequest).Has(t, "out of date")
	c.Get("/portal/invoices?status=%zz").Want(t, http.StatusBadRequest).Has(t, "could not be read")
}

func countSince(made []models.Invoice, day string, zone *time.Location) int {
	n := 0
	for _, inv := range made {
		if inv.CreatedAt.In(zone).Format(time.DateOnly) == day {
			n++
		}
	}
	return n
}

var titlePattern = regexp.MustCompile(`<title>([^<]*)</title>`)

func titleOf(p portaltest.Page) string {
	m := titlePattern.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return m[1]
}

// form is url.Values from pairs.
func form(pairs ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		v.Add(pairs[i], pairs[i+1])
	}
	return v
}

// An invoice's status is said in the words a business reads, on its
// colour: one never sent says so, one past its due date is overdue, one
// paid and refunded says how much went back, a cancelled one shows no
// balance; in the list and on its page alike.
func TestInvoiceStatusesInWords(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	c, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView)
	unsent := m.MustCreate(t, m.Body("ST-1", "40.00"))
	late := m.Body("ST-2", "40.00")
	late["send"], late["dueDate"] = true, env.Clock.Now().AddDate(0, 0, -20).Format(time.DateOnly)
	overdue := m.MustCreate(t, late)
	sale := paidSale(t, env, m, "ST-3", "40.00", apitest.CardApprove)
	r := env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + sale.Id.String() + "/refund", Token: m.Token,
		Body: map[string]any{"amount": "7.50"}})
	apitest.Want(t, "refund", r.StatusCode, http.StatusCreated)
	cancelled := m.MustCreate(t, m.Body("ST-4", "40.00"))
	apitest.Want(t, "cancel", env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + cancelled.Id.String() + "/cancel",
		Token: m.Token, Body: map[string]any{}}).StatusCode, http.StatusOK)

	list := c.Get("/portal/invoices").Want(t, http.StatusOK)
	for number, want := range map[string]string{
		"ST-1": `<span class="status status-open">Open · not sent</span>`,
		"ST-2": `<span class="status status-overdue">Overdue</span>`,
		"ST-3": `<span class="status status-refunded">Paid · $7.50 refunded</span>`,
		"ST-4": `<td class="num">—</td><td><span class="status status-cancelled">Cancelled</span>`,
	} {
		row := between(list.Body, ">"+number+"</a>", "</tr>")
		if !strings.Contains(row, want) {
			t.Errorf("%s's row lacks %s: %s", number, want, row)
		}
	}
	c.Get("/portal/invoices/"+unsent.Id.String()).Has(t, "Open · not sent")
	c.Get("/portal/invoices/"+overdue.Id.String()).Has(t, `status-overdue">Overdue<`)
	c.Get("/portal/invoices/"+sale.InvoiceId.String()).Has(t, "Paid · $7.50 refunded")
	if page := c.Get("/portal/invoices/"+cancelled.Id.String()).Has(t, "Cancelled"); strings.Contains(page.Body, "<dt>Balance</dt>") {
		t.Error("a cancelled invoice's page shows a balance")
	}
}
