package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/invoice"
)

func TestCreateAndReadBackEveryField(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	b := m.Body("INV-1001", "0.30", apitest.Line("1", "0.1"), apitest.Line(1, 0.2))
	b["poNumber"], b["customerCompany"], b["customerPhone"], b["memo"], b["dueDate"] = "PO-7", "Whitfield LLC", "+15125550148", "Thanks", "2026-12-31"
	created := m.MustCreate(t, b)

	var got models.Invoice
	resp := env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + created.Id.String(), Token: m.Token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("get: %d %s", resp.StatusCode, resp.Body)
	}
	resp.JSON(t, &got)
	raw := string(resp.Body)
	for _, want := range []string{`"amount":"0.30"`, `"amountPaid":"0.00"`, `"balance":"0.30"`, `"quantity":"1"`,
		`"unitCost":"0.1"`, `"unitCost":"0.2"`, `"lines":2`, `"status":"open"`, `"failedAttempts":0`,
		`"dueDate":"2026-12-31T00:00:00Z"`, `"payments":[]`, `"savedCards":[]`, `"sentVia":null`, `"delivery":"email"`,
		`"customerPrefers":null`} {
		if !strings.Contains(raw, want) {
			t.Errorf("response lacks %s: %s", want, raw)
		}
	}
	apitest.Want(t, "mid", got.Mid, m.MIDs[0].Mid)
	apitest.WantText(t, "poNumber", got.PoNumber, "PO-7")
	apitest.WantText(t, "customerCompany", got.CustomerCompany, "Whitfield LLC")
	apitest.Want(t, "createdByName", got.CreatedByName, "Demo merchant key")
	apitest.Want(t, "link is a pay link", strings.Contains(apitest.Text(got.Link), "/pay/"), true)
	apitest.Want(t, "link holds the invoice id", strings.Contains(apitest.Text(got.Link), got.Id.String()), false)
	apitest.Want(t, "len(lineItems)", len(*got.LineItems), 2)
	var loc models.Location
	env.Do(apitest.Request{Method: "GET", Path: "/locations/" + m.MIDs[0].LocationId.String(), Token: m.Token}).JSON(t, &loc)
	apitest.WantText(t, "locationName", got.LocationName, loc.Name)

	big := m.MustCreate(t, m.Body("INV-1002", "999999999.99", apitest.Line("3", "333333333.33")))
	if big.Amount.Text('f') != "999999999.99" {
		t.Errorf("amount %s", big.Amount.Text('f'))
	}
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	cases := []struct {
		name  string
		field string
		edit  func(b map[string]any)
	}{
		{"email missing", "customerEmail", func(b map[string]any) { delete(b, "customerEmail") }},
		{"email null", "customerEmail", func(b map[string]any) { b["customerEmail"] = nil }},
		{"email invalid", "customerEmail", func(b map[string]any) { b["customerEmail"] = "nope" }},
		{"lines do not add up", "lines", func(b map[string]any) { b["lines"] = []any{apitest.Line("1", "5.00")} }},
		{"0.0149 rounds down", "lines", func(b map[string]any) {
			b["amount"] = "0.03"
			b["lines"] = []any{apitest.Line("1", "0.0149"), apitest.Line("1", "0.005")}
		}},
		{"text needs a phone", "customerPhone", func(b map[string]any) { b["delivery"] = "text" }},
		{"delivery unknown", "delivery", func(b map[string]any) { b["delivery"] = "pigeon" }},
		{"amount zero", "amount", func(b map[string]any) { b["amount"] = 0 }},
		{"amount three places", "amount", func(b map[string]any) { b["amount"] = "1.001" }},
		{"amount too large", "amount", func(b map[string]any) { b["amount"] = "1000000000" }},
		{"amount not a number", "amount", func(b map[string]any) { b["amount"] = "ten" }},
		{"quantity zero", "lines[1].quantity", func(b map[string]any) { b["lines"] = []any{apitest.Line("1", "12.30"), apitest.Line("0", "1")} }},
		{"quantity five places", "lines[0].quantity", func(b map[string]any) { b["lines"] = []any{apitest.Line("1.00001", "12.30")} }},
		{"unit cost five places", "lines[0].unitCost", func(b map[string]any) { b["lines"] = []any{apitest.Line("1", "12.30001")} }},
		{"quantity not a number", "lines[2].quantity", func(b map[string]any) {
			b["lines"] = []any{apitest.Line("1", "1"), apitest.Line("1", "1"), apitest.Line("abc", "1")}
		}},
		{"description empty", "lines[0].description", func(b map[string]any) {
			l := apitest.Line("1", "12.30")
			l["description"] = ""
			b["lines"] = []any{l}
		}},
		{"uom key missing", "lines[0].uom", func(b map[string]any) {
			l := apitest.Line("1", "12.30")
			delete(l, "uom")
			b["lines"] = []any{l}
		}},
		{"invoice number too long", "invoiceNumber", func(b map[string]any) { b["invoiceNumber"] = strings.Repeat("9", 65) }},
		{"memo too long", "memo", func(b map[string]any) { b["memo"] = strings.Repeat("m", 2001) }},
		{"name too long", "customerName", func(b map[string]any) { b["customerName"] = strings.Repeat("n", 201) }},
		{"phone too long", "customerPhone", func(b map[string]any) { b["customerPhone"] = strings.Repeat("1", 33) }},
		{"merchant account not a uuid", "merchantAccountId", func(b map[string]any) { b["merchantAccountId"] = "x" }},
		{"due date not a date", "dueDate", func(b map[string]any) { b["dueDate"] = "tomorrow" }},
		{"too many lines", "lines", func(b map[string]any) {
			lines := make([]any, 501)
			for i := range lines {
				lines[i] = apitest.Line("1", "0.01")
			}
			b["amount"] = "5.01"
			b["lines"] = lines
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := m.Body("V-"+c.name, "12.30")
			c.edit(b)
			resp := m.Create(t, b, nil)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, resp.Body)
			}
			p := resp.Problem(t)
			if p.Errors == nil || len((*p.Errors)[c.field]) == 0 {
				t.Fatalf("errors lack %q: %s", c.field, resp.Body)
			}
		})
	}
	var list []models.Invoice
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests", Token: m.Token}).JSON(t, &list)
	if len(list) != 0 {
		t.Fatalf("refused requests created %d invoices", len(list))
	}
}

func TestLinesMessageNamesBothSums(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	resp := m.Create(t, m.Body("S-1", "12.40", apitest.Line("2", "6.15")), nil)
	p := resp.Problem(t)
	msg := strings.Join((*p.Errors)["lines"], " ")
	if !strings.Contains(msg, "12.30") || !strings.Contains(msg, "12.40") {
		t.Fatalf("errors.lines %q does not name both sums", msg)
	}
}

func TestCreateUnprocessable(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	other := apitest.NewMerchant(t, env)
	m.MustCreate(t, m.Body("DUP-1", "1.00"))

	dup := m.Create(t, m.Body("DUP-1", "2.00"), nil)
	if dup.StatusCode != http.StatusUnprocessableEntity || dup.Problem(t).Title != "Invoice number already used" {
		t.Errorf("duplicate number: %d %s", dup.StatusCode, dup.Body)
	}
	// The same number in another organization is fine.
	other.MustCreate(t, other.Body("DUP-1", "1.00"))

	b := m.Body("MID-1", "1.00")
	b["merchantAccountId"] = other.MIDs[0].Id.String()
	if r := m.Create(t, b, nil); r.StatusCode != http.StatusUnprocessableEntity || r.Problem(t).Title != "Unknown merchant account" {
		t.Errorf("other organization's MID: %d %s", r.StatusCode, r.Body)
	}
	if _, err := env.App.DB.Exec(`UPDATE locations SET status = 'inactive' WHERE id = $1`, m.MIDs[0].LocationId); err != nil {
		t.Fatal(err)
	}
	if r := m.Create(t, m.Body("MID-2", "1.00"), nil); r.StatusCode != http.StatusUnprocessableEntity || r.Problem(t).Title != "Merchant account unavailable" {
		t.Errorf("inactive location: %d %s", r.StatusCode, r.Body)
	}
}

func idemKey(k string) http.Header { return http.Header{"Idempotency-Key": {k}} }

func TestIdempotency(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)

	first := m.Create(t, m.Body("IDEM-1", "10.5"), idemKey("k-1"))
	if first.StatusCode != http.StatusCreated {
		t.Fatalf("first: %d %s", first.StatusCode, first.Body)
	}
	var a, b models.Invoice
	first.JSON(t, &a)
	// Same body, the amount spelled as a number this time: still the same request.
	again := m.Create(t, m.Body("IDEM-1", 10.5), idemKey("k-1"))
	if again.StatusCode != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %s", again.StatusCode, again.Header, again.Body)
	}
	again.JSON(t, &b)
	if a.Id != b.Id {
		t.Fatalf("replay made another invoice")
	}
	if r := m.Create(t, m.Body("IDEM-1", "10.50"), idemKey("k-1")); r.StatusCode != http.StatusUnprocessableEntity || r.Problem(t).Title != "Idempotency key reused" {
		t.Fatalf("different body: %d %s", r.StatusCode, r.Body)
	}

	// A refused request is not remembered: the corrected retry creates.
	bad := m.Body("IDEM-2", "10.00", apitest.Line("1", "9.00"))
	if r := m.Create(t, bad, idemKey("k-2")); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad: %d", r.StatusCode)
	}
	if r := m.Create(t, m.Body("IDEM-1", "5.00"), idemKey("k-3")); r.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("duplicate number under a new key: %d", r.StatusCode)
	}
	if r := m.Create(t, m.Body("IDEM-2", "10.00"), idemKey("k-2")); r.StatusCode != http.StatusCreated {
		t.Fatalf("corrected retry: %d %s", r.StatusCode, r.Body)
	}
	if r := m.Create(t, m.Body("IDEM-3", "5.00"), idemKey("k-3")); r.StatusCode != http.StatusCreated {
		t.Fatalf("key of a 422 reused: %d %s", r.StatusCode, r.Body)
	}

	// Keys are per organization.
	other := apitest.NewMerchant(t, env)
	if r := other.Create(t, other.Body("IDEM-1", "10.00"), idemKey("k-1")); r.StatusCode != http.StatusCreated {
		t.Fatalf("another organization's same key: %d %s", r.StatusCode, r.Body)
	}

	// After 24 hours the key is forgotten.
	env.Clock.Advance(24*time.Hour + time.Second)
	m.Token = env.TokenFor(t, m.Org)
	if r := m.Create(t, m.Body("IDEM-9", "1.00"), idemKey("k-1")); r.StatusCode != http.StatusCreated {
		t.Fatalf("expired key: %d %s", r.StatusCode, r.Body)
	}
}

func TestConcurrentIdenticalCreatesMakeOneInvoice(t *testing.T) {
	t.Parallel()
	deployment := apitest.Options{DataDir: t.TempDir(), PublicURL: "http://payreq.test"}
	one := apitest.New(t, testDSN, deployment)
	two := apitest.New(t, testDSN, deployment)
	m := apitest.NewMerchant(t, one)
	envs := []*apitest.Env{one, two}

	var wg sync.WaitGroup
	statuses := make([]int, 20)
	ids := make([]string, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := envs[i%2].Do(apitest.Request{Method: "POST", Path: "/payment-requests", Token: m.Token,
				Body: m.Body("RACE-1", "42.00"), Header: idemKey("race")})
			statuses[i] = r.StatusCode
			var inv models.Invoice
			if r.StatusCode < 300 {
				r.JSON(t, &inv)
			}
			ids[i] = inv.Id.String()
		}()
	}
	wg.Wait()
	created := 0
	for i, s := range statuses {
		if s == http.StatusCreated {
			created++
		} else if s != http.StatusOK {
			t.Errorf("request %d: status %d", i, s)
		}
		if ids[i] != ids[0] {
			t.Errorf("request %d got invoice %s, request 0 got %s", i, ids[i], ids[0])
		}
	}
	if created != 1 {
		t.Fatalf("%d requests answered 201, want exactly 1", created)
	}
	var n int
	if err := one.App.DB.Get(&n, `SELECT count(*) FROM invoices WHERE invoice_number = 'RACE-1' AND organization_id = $1`, m.Org); err != nil || n != 1 {
		t.Fatalf("%d invoices in the database (%v)", n, err)
	}
}

func TestListOrderFiltersAndPaging(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	start := env.Clock.Now()
	var made []models.Invoice
	for i := range 6 {
		env.Clock.Advance(time.Second)
		b := m.Body(fmt.Sprintf("L-%d", i), "1.00")
		b["merchantAccountId"] = m.MIDs[i%3].Id.String()
		if i == 4 {
			b["customerEmail"] = "Other@Example.com"
		}
		made = append(made, m.MustCreate(t, b))
	}
	list := func(query string) []models.Invoice {
		t.Helper()
		var out []models.Invoice
		r := env.Do(apitest.Request{Method: "GET", Path: "/payment-requests" + query, Token: m.Token})
		if r.StatusCode != http.StatusOK {
			t.Fatalf("list %s: %d %s", query, r.StatusCode, r.Body)
		}
		r.JSON(t, &out)
		return out
	}
	all := list("")
	if len(all) != 6 {
		t.Fatalf("%d invoices listed, want 6", len(all))
	}
	apitest.Want(t, "first listed", all[0].Id, made[5].Id)
	apitest.Want(t, "last listed", all[5].Id, made[0].Id)
	apitest.Want(t, "lineItems of a list item", all[0].LineItems == nil, true)
	apitest.Want(t, "payments of a list item", all[0].Payments == nil, true)
	apitest.Want(t, "savedCards of a list item", all[0].SavedCards == nil, true)
	if _, err := env.App.Invoices.Cancel(context.Background(), invoiceActor(m), made[1].Id); err != nil {
		t.Fatal(err)
	}
	count := func(query string, want int) {
		t.Helper()
		if got := len(list(query)); got != want {
			t.Errorf("%s: %d invoices, want %d", query, got, want)
		}
	}
	count("?status=cancelled", 1)
	count("?status=open", 5)
	count("?merchantAccountId="+m.MIDs[0].Id.String(), 2)
	// mids[0] and mids[1] are at Downtown, mids[2] at the Airport Kiosk.
	count("?locationId="+m.MIDs[2].LocationId.String(), 2)
	count("?invoiceNumber=L-3", 1)
	count("?customerEmail=other@example.com", 1)
	count("?createdFrom="+url.QueryEscape(start.Add(3*time.Second).Format(time.RFC3339Nano)), 4)
	count("?createdTo="+url.QueryEscape(start.Add(3*time.Second).Format(time.RFC3339Nano)), 2)

	for _, q := range []string{"?status=lost", "?limit=0", "?limit=101", "?cursor=abc", "?createdFrom=yesterday"} {
		r := env.Do(apitest.Request{Method: "GET", Path: "/payment-requests" + q, Token: m.Token})
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, r.StatusCode)
		}
	}
	other := apitest.NewMerchant(t, env)
	if got := len(func() []models.Invoice {
		var out []models.Invoice
		env.Do(apitest.Request{Method: "GET", Path: "/payment-requests", Token: other.Token}).JSON(t, &out)
		return out
	}()); got != 0 {
		t.Errorf("another organization sees %d invoices", got)
	}
}

func TestPagingThrough250WhileInsertsHappen(t *testing.T) {
	t.Parallel()
	// 250 creates back to back outrun the default 200-request burst of the
	// per-key rate limit, which this test is not about.
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) { c.RateLimit, c.RateBurst = 1000, 1000 }})
	m := apitest.NewMerchant(t, env)
	for i := range 250 {
		env.Clock.Advance(time.Millisecond)
		m.MustCreate(t, m.Body(fmt.Sprintf("P-%03d", i), "1.00"))
	}
	seen := map[string]bool{}
	path := "/payment-requests?limit=40"
	pages := 0
	for path != "" {
		r := env.Do(apitest.Request{Method: "GET", Path: path, Token: m.Token})
		var page []models.Invoice
		r.JSON(t, &page)
		for _, inv := range page {
			if seen[inv.InvoiceNumber] {
				t.Fatalf("%s listed twice", inv.InvoiceNumber)
			}
			seen[inv.InvoiceNumber] = true
		}
		pages++
		// New invoices arrive while the client pages: they are newer than
		// the cursor, so they never show up in later pages.
		env.Clock.Advance(time.Millisecond)
		m.MustCreate(t, m.Body(fmt.Sprintf("NEW-%d", pages), "1.00"))
		path = ""
		if link := r.Header.Get("Link"); link != "" {
			u := strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
			parsed, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			path = parsed.RequestURI()
		}
	}
	for i := range 250 {
		if !seen[fmt.Sprintf("P-%03d", i)] {
			t.Fatalf("P-%03d never listed", i)
		}
	}
	if pages != 7 || len(seen) != 250 {
		t.Fatalf("%d pages, %d invoices", pages, len(seen))
	}
}

func TestSendAndCancel(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	b := m.Body("SC-1", "20.00")
	b["customerPhone"] = "+15035550123"
	inv := m.MustCreate(t, b)
	if inv.SentVia != nil {
		t.Fatalf("send=false sent the link")
	}
	path := "/payment-requests/" + inv.Id.String()

	var sent models.Invoice
	r := env.Do(apitest.Request{Method: "POST", Path: path + "/send", Token: m.Token})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("send: %d %s", r.StatusCode, r.Body)
	}
	r.JSON(t, &sent)
	apitest.WantText(t, "sentVia", (*string)(sent.SentVia), "email")
	apitest.Want(t, "sentAt set", sent.SentAt != nil, true)

	// The customer said on the pay page they want texts: that wins over delivery.
	if _, err := env.App.DB.Exec(`UPDATE customers SET prefers = 'text' WHERE organization_id = $1 AND email = 'dana@example.com'`, m.Org); err != nil {
		t.Fatal(err)
	}
	env.Do(apitest.Request{Method: "POST", Path: path + "/send", Token: m.Token}).JSON(t, &sent)
	apitest.WantText(t, "sentVia", (*string)(sent.SentVia), "text")
	apitest.WantText(t, "customerPrefers", (*string)(sent.CustomerPrefers), "text")
	var messages int
	env.App.DB.Get(&messages, `SELECT count(*) FROM outbox WHERE invoice_id = $1 AND channel = 'text' AND recipient = '+15035550123'`, inv.Id)
	if messages != 1 {
		t.Fatalf("%d text messages queued", messages)
	}

	var cancelled models.Invoice
	r = env.Do(apitest.Request{Method: "POST", Path: path + "/cancel", Token: m.Token})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.StatusCode, r.Body)
	}
	r.JSON(t, &cancelled)
	apitest.Want(t, "status", cancelled.Status, "cancelled")
	apitest.Want(t, "cancelledAt set", cancelled.CancelledAt != nil, true)
	apitest.WantText(t, "cancelledByName", cancelled.CancelledByName, "Demo merchant key")
	var pending int
	env.App.DB.Get(&pending, `SELECT count(*) FROM outbox WHERE invoice_id = $1 AND cancelled_at IS NULL AND delivered_at IS NULL`, inv.Id)
	if pending != 0 {
		t.Fatalf("%d messages still pending after cancel", pending)
	}
	for _, op := range []string{"/send", "/cancel"} {
		r := env.Do(apitest.Request{Method: "POST", Path: path + op, Token: m.Token})
		if r.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s on cancelled: %d", op, r.StatusCode)
		}
	}

	other := apitest.NewMerchant(t, env)
	for _, req := range []apitest.Request{
		{Method: "GET", Path: path},
		{Method: "POST", Path: path + "/send"},
		{Method: "POST", Path: path + "/cancel"},
		{Method: "GET", Path: "/payment-requests/0190a0c8-0000-7000-8000-000000000000"},
	} {
		req.Token = other.Token
		if r := env.Do(req); r.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s by another organization: %d", req.Method, req.Path, r.StatusCode)
		}
	}
}

func TestCreateSendsUnlessTold(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	b := m.Body("SEND-1", "3.00")
	b["send"] = nil
	inv := m.MustCreate(t, b)
	apitest.WantText(t, "sentVia", (*string)(inv.SentVia), "email")
	apitest.Want(t, "sentAt set", inv.SentAt != nil, true)
	var n int
	env.App.DB.Get(&n, `SELECT count(*) FROM outbox WHERE invoice_id = $1 AND channel = 'email' AND recipient = 'dana@example.com'`, inv.Id)
	if n != 1 {
		t.Fatalf("%d messages queued", n)
	}
}

func invoiceActor(m apitest.Merchant) invoice.Actor {
	return invoice.Actor{OrganizationID: uuid.MustParse(m.Org), Name: "test"}
}
