package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
)

// scenario is one kind of request; its pgbench script is pgbench/<key>.sql.
type scenario struct {
	key, title string
	next       func(n int64) request
}

var scenarioTitles = []struct{ key, title string }{
	{"token", "token exchange"},
	{"create", "create invoice (3 lines, send=false, Idempotency-Key)"},
	{"get", "get invoice by id (lines, payments, saved cards)"},
	{"list_first", "list, first page (25)"},
	{"list_deep", "list, page 1,000 by cursor (25)"},
	{"send", "send invoice"},
	{"patch", "change invoice (PATCH a memo, merge patch)"},
	{"deposits", "list deposits, first page (25)"},
	{"customers_search", "search customers (q of a name, first page of 25)"},
	{"finalize", "finalize a draft (3 lines, send=false)"},
	{"terminal", "terminal payment (202, then the SIM-OK terminal's approval)"},
	{"recurring", "recurring invoice issued (create, then its one occurrence issued and sent)"},
	// The portal's pages, as a signed-in member's browser asks for them
	// (session cookie, gzip accepted), each beside the API call reading
	// the same data (portalPairs).
	{"portal_list", "portal: invoices list, first page (25)"},
	{"portal_get", "portal: an invoice's page (the get's invoices)"},
	{"portal_deposits", "portal: deposits list, first page (25)"},
}

// portalPairs are the portal's pages and the API call that reads the same
// data; decisions: a page's server CPU ≤ 2 × its call's.
var portalPairs = []struct{ page, api string }{
	{"portal_list", "list_first"}, {"portal_get", "get"}, {"portal_deposits", "deposits"},
}

// isPortal says whether key is a portal page (no pgbench script, a
// session cookie instead of a token).
func isPortal(key string) bool { return strings.HasPrefix(key, "portal_") }

// hasPgbench says whether scenario key has a pgbench script: the portal's
// pages and the deposits list have none (their baseline is the API call),
// nor have the PATCH, the finalize and the scenarios waiting on a worker
// yet.
func hasPgbench(key string) bool {
	return !isPortal(key) && !slices.Contains([]string{"deposits", "patch", "finalize", "terminal", "recurring"}, key)
}

// mixedTitle is the soak's mix, measured against the server alone.
const mixedTitle = "mixed: create, get, list first page (2:1:1, as make soak)"

// scenarios lists every scenario (without a target: for their keys and titles).
func (h *harness) scenarios() []scenario {
	out := make([]scenario, len(scenarioTitles))
	for i, t := range scenarioTitles {
		out[i] = scenario{key: t.key, title: t.title}
	}
	return out
}

func title(key string) string {
	if key == "mixed" {
		return mixedTitle
	}
	for _, t := range scenarioTitles {
		if t.key == key {
			return t.title
		}
	}
	return key
}

// scenario makes the requests of key against the server at base.
func (h *harness) scenario(key string, ds *dataset, base, token string) scenario {
	bearer := http.Header{"Authorization": {"Bearer " + token}}
	withJSON := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
	sc := scenario{key: key, title: title(key)}
	sample := func() string { return ds.sample[rand.IntN(len(ds.sample))].String() }
	switch key {
	case "token":
		sc.next = func(int64) request { return h.tokenRequest(h.key) }
	case "create":
		sc.next = func(n int64) request {
			// Customer c on its MID, as pgbench's creates (bench/load.sql).
			c := rand.IntN(20000)
			mid := ds.mids[c%len(ds.mids)]
			body := fmt.Sprintf(`{"merchantAccountId":%q,"invoiceNumber":"LOAD-%s-%d","amount":"60.00","poNumber":null,`+
				`"customerName":"Dana Whitfield","customerCompany":null,"customerEmail":"customer%d@example.com",`+
				`"customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"send":false,"lines":[`+
				`{"description":"Consulting","quantity":"1","unitCost":"10","uom":null,"commodityCode":null,"upc":null},`+
				`{"description":"Travel","quantity":"2","unitCost":"10","uom":null,"commodityCode":null,"upc":null},`+
				`{"description":"Materials","quantity":"3","unitCost":"10","uom":null,"commodityCode":null,"upc":null}]}`,
				mid.String(), h.run, n, c)
			hd := withJSON.Clone()
			hd.Set("Idempotency-Key", fmt.Sprintf("load-%s-%d", h.run, n))
			return request{method: "POST", path: "/payment-requests", body: []byte(body), header: hd, want: http.StatusCreated}
		}
	case "get":
		sc.next = func(int64) request {
			return request{method: "GET", path: "/payment-requests/" + sample(), header: bearer, want: http.StatusOK}
		}
	case "list_first":
		sc.next = func(int64) request {
			return request{method: "GET", path: "/payment-requests?limit=25", header: bearer, want: http.StatusOK}
		}
	case "list_deep":
		path := "/payment-requests?limit=25&cursor=" + url.QueryEscape(h.cursor)
		sc.next = func(int64) request { return request{method: "GET", path: path, header: bearer, want: http.StatusOK} }
	case "mixed":
		// As make soak (internal/faults TestSoak): half creates, a quarter
		// gets, a quarter first pages.
		parts := []scenario{h.scenario("create", ds, base, token), h.scenario("get", ds, base, token), h.scenario("list_first", ds, base, token)}
		sc.next = func(n int64) request {
			switch n % 4 {
			case 0, 1:
				return parts[0].next(n)
			case 2:
				return parts[1].next(n)
			default:
				return parts[2].next(n)
			}
		}
	case "send":
		sc.next = func(int64) request {
			return request{method: "POST", path: "/payment-requests/" + sample() + "/send", header: bearer, want: http.StatusOK}
		}
	case "patch":
		// An open invoice with nothing paid, its memo changed: the lock,
		// the check for charges under way, the creation rules, the write
		// and invoice.updated.
		patch := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/merge-patch+json"}}
		sc.next = func(n int64) request {
			id := ds.editable[rand.IntN(len(ds.editable))].String()
			body := fmt.Sprintf(`{"memo":"Edited by run %s, request %d"}`, h.run, n)
			return request{method: "PATCH", path: "/payment-requests/" + id, body: []byte(body), header: patch, want: http.StatusOK}
		}
	case "customers_search":
		sc.next = func(int64) request {
			// A name the organization's customers hold once (bench/load.sql:
			// customer c is "Customer c"; from 2,000 on, no other holds it).
			q := url.QueryEscape(fmt.Sprintf("Customer %d", 2000+rand.IntN(18000)))
			return request{method: "GET", path: "/customers?limit=25&q=" + q, header: bearer, want: http.StatusOK}
		}
	case "finalize":
		// A draft of the template's three lines, made for this run
		// (prepareScenario), opened with its pay link, not sent.
		var next atomic.Int64
		sc.next = func(int64) request {
			id := h.drafts[int(next.Add(1)-1)%len(h.drafts)].String()
			return request{method: "POST", path: "/payment-requests/" + id + "/finalize", body: []byte(`{"send":false}`),
				header: withJSON, want: http.StatusOK}
		}
	case "terminal":
		// 1.00 toward the client's own invoice at its own SIM-OK
		// terminal (one payment at a time per terminal): the 202 is
		// measured, then the client waits for the approval the worker
		// records (the simulator answers after 2 s) before its next one.
		free := make(chan int, len(h.tills))
		for i := range h.tills {
			free <- i
		}
		sc.next = func(n int64) request {
			i := <-free
			t := h.tills[i]
			body := fmt.Sprintf(`{"terminalId":%q,"invoiceId":%q,"amount":"1.00"}`, t.terminal, t.invoice)
			hd := withJSON.Clone()
			hd.Set("Idempotency-Key", fmt.Sprintf("terminal-%s-%d", h.run, n))
			return request{method: "POST", path: "/terminal-payments", body: []byte(body), header: hd, want: http.StatusAccepted,
				then: func(c *conn, answer []byte, err error) error {
					defer func() { free <- i }()
					if err != nil {
						return nil
					}
					return waitFor(c, bearer, "/terminal-payments/", answer, func(v outcome) (bool, error) {
						if v.Status == "pending" {
							return false, nil
						}
						if v.Status != "approved" {
							return true, fmt.Errorf("terminal payment %s: %s", v.ID, v.Status)
						}
						return true, nil
					})
				}}
		}
	case "recurring":
		// A series issuing once, today, its invoice sent: the 201 is
		// measured, then the client waits for the worker to issue it.
		sc.next = func(n int64) request {
			c := rand.IntN(len(h.customers))
			body := fmt.Sprintf(`{"merchantAccountId":%q,"customerId":%q,"invoiceNumberPrefix":"R%s-%d","amount":"60.00",`+
				`"lines":[{"description":"Consulting","quantity":"1","unitCost":"10","uom":null,"commodityCode":null,"upc":null},`+
				`{"description":"Travel","quantity":"2","unitCost":"10","uom":null,"commodityCode":null,"upc":null},`+
				`{"description":"Materials","quantity":"3","unitCost":"10","uom":null,"commodityCode":null,"upc":null}],`+
				`"memo":null,"poNumber":null,"delivery":"email","reminders":null,"interval":"month","intervalCount":1,`+
				`"startOn":%q,"endAfter":1,"endOn":null,"dueDays":30,"send":true}`,
				ds.mids[c%len(ds.mids)], h.customers[c], h.run, n, h.today)
			return request{method: "POST", path: "/recurring-invoices", body: []byte(body), header: withJSON, want: http.StatusCreated,
				then: func(c *conn, answer []byte, err error) error {
					if err != nil {
						return nil
					}
					return waitFor(c, bearer, "/recurring-invoices/", answer, func(v outcome) (bool, error) {
						return v.IssuedCount > 0, nil
					})
				}}
		}
	case "deposits":
		sc.next = func(int64) request {
			return request{method: "GET", path: "/deposits?limit=25", header: bearer, want: http.StatusOK}
		}
	case "portal_list", "portal_get", "portal_deposits":
		// token is the session's Cookie header here (portal.go).
		page := http.Header{"Cookie": {token}, "Accept": {"text/html"}, "Accept-Encoding": {"gzip"}}
		path := map[string]string{"portal_list": "/portal/invoices", "portal_deposits": "/portal/deposits"}[key]
		sc.next = func(int64) request {
			if key == "portal_get" {
				return request{method: "GET", path: "/portal/invoices/" + sample(), header: page, want: http.StatusOK}
			}
			return request{method: "GET", path: path, header: page, want: http.StatusOK}
		}
	default:
		panic("bench: unknown scenario " + key)
	}
	return sc
}

// till is a terminal of the terminal scenario with the invoice its
// payments go toward.
type till struct{ terminal, invoice uuid.UUID }

// prepareScenario makes what scenario key uses up, against the server at
// base: finalize's drafts (copies of an editable invoice, as many as 2,000
// a second of the run would finalize; the last run's left go first), an invoice on each terminal's MID
// for the terminal scenario, and the customers and day of the recurring
// one's series.
func (h *harness) prepareScenario(ctx context.Context, key, base, token string) error {
	ds := h.big
	db, err := sqlx.Open("postgres", ds.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	switch key {
	case "finalize":
		n := max(1000, int(2000*(h.o.warmup+h.o.window).Seconds()))
		h.drafts = nil
		if _, err := db.ExecContext(ctx, `DELETE FROM invoice_lines l USING invoices i
				WHERE i.id = l.invoice_id AND i.status = 'draft' AND i.created_by_name = 'bench draft';
			DELETE FROM invoices WHERE status = 'draft' AND created_by_name = 'bench draft'`); err != nil {
			return err
		}
		return db.SelectContext(ctx, &h.drafts, `WITH t AS (SELECT * FROM invoices WHERE id = $1),
			d AS (INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, po_number, amount,
					customer_name, customer_company, customer_email, customer_phone, delivery, memo, due_date, line_count,
					status, created_at, created_by_name, reminders, tax_amount, customer_id)
				SELECT gen_random_uuid(), t.organization_id, t.merchant_account_id, 'DRAFT-' || $2 || '-' || g, t.po_number,
					t.amount, t.customer_name, t.customer_company, t.customer_email, t.customer_phone, t.delivery, t.memo,
					now()::date + 30, t.line_count, 'draft', t.created_at - g * interval '1 microsecond', 'bench draft',
					t.reminders, t.tax_amount, t.customer_id
				FROM t, generate_series(1, $3) g RETURNING id),
			l AS (INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_cost, uom, commodity_code, upc, tax_rate)
				SELECT d.id, l.position, l.description, l.quantity, l.unit_cost, l.uom, l.commodity_code, l.upc, l.tax_rate
				FROM d, invoice_lines l WHERE l.invoice_id = $1)
			SELECT id FROM d`, ds.editable[0], fmt.Sprintf("%s-%d", h.run, h.batch.Add(1)), n)
	case "terminal":
		c := &conn{base: base}
		defer c.close()
		h.tills = nil
		for i, t := range ds.terminals {
			body := fmt.Sprintf(`{"merchantAccountId":%q,"invoiceNumber":"TILL-%s-%d-%d","amount":"9999.00","poNumber":null,`+
				`"customerName":"Dana Whitfield","customerCompany":null,"customerEmail":"customer1@example.com",`+
				`"customerPhone":null,"delivery":null,"memo":null,"dueDate":null,"send":false,"lines":[`+
				`{"description":"Tab","quantity":"1","unitCost":"9999.00","uom":null,"commodityCode":null,"upc":null}]}`,
				t.MerchantAccountID, h.run, h.batch.Add(1), i)
			answer, err := c.do(request{method: "POST", path: "/payment-requests", body: []byte(body), want: http.StatusCreated,
				header: http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}})
			if err != nil {
				return err
			}
			var inv outcome
			if err := json.Unmarshal(answer, &inv); err != nil {
				return err
			}
			h.tills = append(h.tills, till{terminal: t.ID, invoice: uuid.MustParse(inv.ID)})
		}
		return nil
	case "recurring":
		h.customers = nil
		if err := db.SelectContext(ctx, &h.customers, `SELECT id FROM customers WHERE organization_id = $1
			ORDER BY id LIMIT 1000`, ds.org); err != nil {
			return err
		}
		return db.GetContext(ctx, &h.today, `SELECT (now() AT TIME ZONE l.time_zone)::date::text
			FROM merchant_accounts m JOIN locations l ON l.id = m.location_id WHERE m.id = $1`, ds.mids[0])
	}
	return nil
}

// tokenRequest is a client-credentials exchange from an address of its own.
func (h *harness) tokenRequest(key auth.NewKey) request {
	n := h.addrSeq.Add(1)
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {key.KeyID}, "client_secret": {key.Secret}}
	return request{method: "POST", path: "/oauth/token", body: []byte(form.Encode()), want: http.StatusOK,
		header: http.Header{
			"Content-Type":    {"application/x-www-form-urlencoded"},
			"X-Forwarded-For": {fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255)},
		}}
}

// eventData stands for an event's data in the scripts: an invoice of
// three lines as the API renders it.
const eventData = `{"id":"01a2115a-7623-774e-8e24-d019f192b164","merchantAccountId":"01a2115a-7623-774e-8e24-d019f192b165",` +
	`"mid":"496160873888","locationName":"Downtown","invoiceNumber":"BENCH-1","poNumber":null,"amount":"60.00",` +
	`"amountPaid":"0.00","balance":"60.00","amountRefunded":"0.00","customerName":"Dana Whitfield","customerCompany":null,` +
	`"customerEmail":"customer1@example.com","customerPhone":null,"delivery":"email","sentVia":null,"sentAt":null,` +
	`"sendProblem":null,"memo":null,"dueDate":null,"lines":3,"status":"open","failedAttempts":0,"problem":null,` +
	`"paidAt":null,"level3Sent":false,"createdAt":"2026-11-25T06:30:00.123456Z","createdByName":"bench",` +
	`"cancelledAt":null,"cancelledByName":null,"link":"http://127.0.0.1:8080/pay/01a2115a7623774e8e24d019f192b164.AbCdEfGhIjKlMnOpQrStUv",` +
	`"customerPrefers":null,"lineItems":[{"description":"Consulting","quantity":"1","unitCost":"10","uom":null,` +
	`"commodityCode":null,"upc":null},{"description":"Travel","quantity":"2","unitCost":"10","uom":null,"commodityCode":null,` +
	`"upc":null},{"description":"Materials","quantity":"3","unitCost":"10","uom":null,"commodityCode":null,"upc":null}],` +
	`"payments":[],"savedCards":[]}`

// pgbenchVars are the -D values of a scenario's script.
func (h *harness) pgbenchVars(ctx context.Context, key string) (map[string]string, error) {
	ds := h.big
	v := map[string]string{
		"org":     ds.org.String(),
		"key":     h.key.KeyID,
		"window":  time.Now().UTC().Truncate(time.Minute).Format(time.RFC3339),
		"samples": fmt.Sprint(len(ds.sample)),
		"descs":   "{Consulting,Travel,Materials}",
		"qtys":    "{1,2,3}",
		"costs":   "{10,10,10}",
		"nulls":   "{NULL,NULL,NULL}",
		"hash":    `\x` + fmt.Sprintf("%064x", 1),
		// The size of an invoice.created event's data with three lines.
		"eventdata": eventData,
	}
	// The MIDs a list page asks directory for: the organization's.
	mids := make([]string, len(ds.mids))
	for i, id := range ds.mids {
		mids[i] = id.String()
	}
	v["mids"] = "{" + strings.Join(mids, ",") + "}"

	if key == "list_deep" {
		at, id, err := h.deepKeyset(ctx)
		if err != nil {
			return nil, err
		}
		v["after_at"], v["after_id"] = at, id
	}
	if key == "list_first" || key == "list_deep" {
		// The customers whose stated preferences a page asks for: its invoices'.
		offset := 0
		if key == "list_deep" {
			offset = 999 * 25
		}
		customers, err := h.pageCustomers(ctx, offset)
		if err != nil {
			return nil, err
		}
		v["page_customers"] = customers
	}
	return v, nil
}

// pageCustomers are the customers of the 25 invoices from offset on, newest
// first, as an array.
func (h *harness) pageCustomers(ctx context.Context, offset int) (string, error) {
	db, err := sqlx.Open("postgres", h.big.dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var ids string
	err = db.GetContext(ctx, &ids, `SELECT array_agg(DISTINCT customer_id)::text FROM (SELECT customer_id FROM invoices
		WHERE organization_id = $1 ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 25) page`, h.big.org, offset)
	if err != nil {
		return "", fmt.Errorf("the customers of a list page: %w", err)
	}
	return ids, nil
}

// deepKeyset is the (createdAt, id) after which page 1,000 starts.
func (h *harness) deepKeyset(ctx context.Context) (string, string, error) {
	db, err := sqlx.Open("postgres", h.big.dsn)
	if err != nil {
		return "", "", err
	}
	defer db.Close()
	var row struct {
		At time.Time `db:"created_at"`
		ID string    `db:"id"`
	}
	err = db.GetContext(ctx, &row, `SELECT created_at, id FROM invoices WHERE organization_id = $1
		ORDER BY created_at DESC, id DESC OFFSET 999 * 25 - 1 LIMIT 1`, h.big.org)
	if err != nil {
		return "", "", fmt.Errorf("page 1,000 of the list (%s invoices): %w", thousands(h.big.invoices), err)
	}
	return row.At.UTC().Format(time.RFC3339Nano), row.ID, nil
}
