package portal_test

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// apiList is every invoice GET /payment-requests lists for query,
// following its Link headers.
func apiList(t *testing.T, env *apitest.Env, token, query string) []models.Invoice {
	t.Helper()
	var all []models.Invoice
	path := "/payment-requests?limit=100&" + query
	for path != "" {
		resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: token})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Body)
		}
		var page []models.Invoice
		resp.JSON(t, &page)
		all = append(all, page...)
		path = ""
		if link := resp.Header.Get("Link"); link != "" {
			u, err := url.Parse(strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`))
			if err != nil {
				t.Fatal(err)
			}
			path = u.RequestURI()
		}
	}
	return all
}

// csvOf reads an export: its records by header name.
func csvOf(t *testing.T, p portaltest.Page) []map[string]string {
	t.Helper()
	records, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
	if err != nil || len(records) == 0 {
		t.Fatalf("not CSV (%v):\n%s", err, p.Body)
	}
	var out []map[string]string
	for _, r := range records[1:] {
		row := map[string]string{}
		for i, h := range records[0] {
			row[h] = r[i]
		}
		out = append(out, row)
	}
	return out
}

// The export holds exactly what the API lists for the same filters, in
// the same order, every page of it; its cells that a spreadsheet would
// run start with a quote.
func TestInvoiceCSVEqualsTheAPIsList(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView)
	la, _ := time.LoadLocation("America/Los_Angeles")
	for i := range 130 {
		b := m.Body(fmt.Sprintf("CSV-%03d", i), fmt.Sprintf("%d.%02d", 10+i, i%100))
		b["customerEmail"] = fmt.Sprintf("csv%d@example.com", i%3)
		if i == 7 {
			b["customerName"] = `=HYPERLINK("https://evil.example.com","click")`
		}
		if i%10 == 0 {
			b["dueDate"] = "2031-01-15"
		}
		inv := m.MustCreate(t, b)
		if i%4 == 0 {
			apitest.Want(t, "cancel", env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/cancel", Token: m.Token}).StatusCode, http.StatusOK)
		}
	}
	day := env.Clock.Now().In(la)
	from := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, la)
	for _, c2 := range []struct{ portal, api string }{
		{"", ""},
		{"status=open", "status=open"},
		{"status=cancelled&customerEmail=CSV1%40example.com", "status=cancelled&customerEmail=CSV1%40example.com"},
		{"createdFrom=" + from.Format(time.DateOnly) + "&createdTo=" + from.Format(time.DateOnly),
			"createdFrom=" + url.QueryEscape(from.Format(time.RFC3339)) + "&createdTo=" + url.QueryEscape(from.AddDate(0, 0, 1).Format(time.RFC3339))},
	} {
		p := c.Get("/portal/invoices?format=csv&"+c2.portal).Want(t, http.StatusOK)
		if cd := p.Header.Get("Content-Disposition"); cd != "attachment; filename=invoices-"+day.Format(time.DateOnly)+".csv" {
			t.Errorf("Content-Disposition %q", cd)
		}
		rows, want := csvOf(t, p), apiList(t, env, m.Token, c2.api)
		if len(rows) != len(want) || len(want) == 0 {
			t.Fatalf("%q: %d rows, the API lists %d", c2.portal, len(rows), len(want))
		}
		for i, inv := range want {
			r := rows[i]
			created, err := time.Parse(time.RFC3339, r["createdAt"])
			if err != nil || !created.Equal(inv.CreatedAt.Truncate(time.Second)) {
				t.Errorf("row %d createdAt %q, the API says %v", i, r["createdAt"], inv.CreatedAt)
			}
			due := ""
			if inv.DueDate != nil {
				due = inv.DueDate.Format(time.DateOnly)
			}
			for field, w := range map[string]string{"id": inv.Id.String(), "invoiceNumber": inv.InvoiceNumber, "status": string(inv.Status),
				"amount": inv.Amount.Text('f'), "balance": inv.Balance.Text('f'), "amountPaid": inv.AmountPaid.Text('f'),
				"customerEmail": *inv.CustomerEmail, "mid": inv.Mid, "dueDate": due} {
				if r[field] != w {
					t.Errorf("%q row %d: %s %q, the API says %q", c2.portal, i, field, r[field], w)
				}
			}
			if inv.InvoiceNumber == "CSV-007" && r["customerName"] != `'=HYPERLINK("https://evil.example.com","click")` {
				t.Errorf("a formula is exported as %q", r["customerName"])
			}
		}
	}
	// The export's own link on the list page carries the filters.
	c.Get("/portal/invoices?status=paid").Has(t, `href="/portal/invoices?format=csv&amp;status=paid"`)
	c.Get("/portal/invoices?format=csv&status=lost").Want(t, http.StatusBadRequest).ErrorBeside(t, "status", "Choose one")
}

// An export of 100,000 invoices streams: the server's live heap while it
// is read grows by far less than the rows would take.
func TestInvoiceCSVOfHundredThousandInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 100,000 invoices")
	}
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m, c := merchant(t, env, auth.PaymentsView)
	const n = 100_000
	_, err := env.App.DB.Exec(`
		WITH c AS (
			INSERT INTO customers (id, organization_id, email, name, created_at, updated_at)
			SELECT gen_random_uuid(), $1, 'bulk' || g || '@example.com', 'Customer ' || g, now(), now()
			FROM generate_series(1, $3) g
			RETURNING id, email
		)
		INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, amount, customer_name, customer_email,
			delivery, status, created_at, created_by_name, memo, customer_id)
		SELECT gen_random_uuid(), $1, $2, 'BULK-' || g, (g % 1000) + 0.99, 'Customer ' || g, c.email,
			'email', 'open', now() - g * interval '1 second', 'seed', repeat('m', 200), c.id
		FROM generate_series(1, $3) g JOIN c ON c.email = 'bulk' || g || '@example.com'`, uuid.MustParse(m.Org), m.MIDs[0].Id, n)
	if err != nil {
		t.Fatal(err)
	}

	// As autovacuum would, so that the pages are planned for 100,000 rows.
	if _, err := env.App.DB.Exec(`ANALYZE invoices`); err != nil {
		t.Fatal(err)
	}
	live := func() uint64 {
		runtime.GC()
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		return s.HeapAlloc
	}
	before := live()
	req, err := http.NewRequest("GET", env.URL+"/portal/invoices?format=csv", nil)
	if err != nil {
		t.Fatal(err)
	}
	// 100,000 rows under the race detector on a loaded machine outlast the
	// client's usual 30 s.
	long := *c.HTTP
	long.Timeout = 5 * time.Minute
	resp, err := long.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := csv.NewReader(resp.Body)
	r.ReuseRecord = true
	rows, peak := 0, uint64(0)
	for {
		_, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d rows: %v", rows, err)
		}
		rows++
		if rows%10_000 == 0 {
			peak = max(peak, live())
		}
	}
	if rows != n+1 {
		t.Fatalf("%d rows, want %d and the header", rows, n)
	}
	// The rows as invoices would take well over 100 MB; the export holds
	// one page of 500 at a time.
	growth := int64(peak) - int64(before)
	t.Logf("the live heap grew by %d KB at most while the export streamed", growth>>10)
	if growth > 16<<20 {
		t.Errorf("the live heap grew by %d MB while the export streamed", growth>>20)
	}
}
