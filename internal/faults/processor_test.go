package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// gateway is a CardPointe-style REST fake under /cardconnect/rest that keeps
// a ledger of what it charged, and answers according to a plan: some
// authorisations are charged and their answer never comes (the client
// times out), some are charged only once the client has given up, some
// voids stall.
type gateway struct {
	srv  *httptest.Server
	quit chan struct{}
	plan func(n int) authPlan // n counts authorisations, from 1
	// voidsFail, when set and false, lifts every plan's voidFail.
	voidsFail *atomic.Bool

	// refundsHeld, when set and true, makes each refund stand and its
	// answer never come.
	refundsHeld *atomic.Bool

	mu      sync.Mutex
	n       int
	charges map[string]*charge // by order id
	voids   map[string]int     // void requests per order id
	refunds map[string]string  // refund order id → amount, each refund made
	asked   int                // refund requests
}

type authPlan struct {
	slow      bool // charge, then never answer
	late      bool // answer nothing, and charge once the client has given up
	voidStall int  // how many void requests for the order stall
	voidFail  bool // every void for the order answers 500
}

type charge struct {
	Amount string
	RetRef string
	Voided bool
}

func startGateway(t *testing.T, plan func(n int) authPlan) *gateway {
	t.Helper()
	g := &gateway{quit: make(chan struct{}), plan: plan, charges: map[string]*charge{}, voids: map[string]int{},
		refunds: map[string]string{}}
	plans := map[string]authPlan{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "testing" || pass != "testing123" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req map[string]any
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &req); err != nil && r.Method != http.MethodGet {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		order, _ := req["orderid"].(string)
		hold := func() {
			select {
			case <-r.Context().Done():
			case <-g.quit:
			}
		}
		answer := func(body map[string]string) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(body)
		}
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/cardconnect/rest/auth":
			g.mu.Lock()
			g.n++
			p := g.plan(g.n)
			plans[order] = p
			retRef := fmt.Sprintf("%012d", 100000000000+g.n)
			amount, _ := req["amount"].(string)
			if req["account"] == "4000000000000002" {
				g.mu.Unlock()
				answer(map[string]string{"respstat": "C", "respcode": "05", "resptext": "Do not honor", "retref": retRef})
				return
			}
			if !p.late {
				g.charges[order] = &charge{Amount: amount, RetRef: retRef}
			}
			g.mu.Unlock()
			switch {
			case p.late:
				hold()
				g.mu.Lock()
				g.charges[order] = &charge{Amount: amount, RetRef: retRef}
				g.mu.Unlock()
			case p.slow:
				hold()
			default:
				answer(map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": retRef,
					"amount": amount, "merchid": fmt.Sprint(req["merchid"])})
			}
		case r.Method == http.MethodPut && r.URL.Path == "/cardconnect/rest/voidByOrderId":
			g.mu.Lock()
			g.voids[order]++
			p, nth := plans[order], g.voids[order]
			c := g.charges[order]
			g.mu.Unlock()
			switch {
			case p.voidFail && (g.voidsFail == nil || g.voidsFail.Load()):
				http.Error(w, "gateway error", http.StatusInternalServerError)
			case nth <= p.voidStall:
				hold()
			case c == nil:
				answer(map[string]string{"respstat": "C", "respcode": "29", "resptext": "Txn not found"})
			default:
				g.mu.Lock()
				c.Voided = true
				g.mu.Unlock()
				answer(map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": c.RetRef})
			}
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/cardconnect/rest/inquire/"):
			// Every sale is settled: a refund is a refund, not a void.
			answer(map[string]string{"respstat": "A", "voidable": "N", "setlstat": "Accepted"})
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/cardconnect/rest/inquireByOrderid/"):
			id := strings.Split(strings.TrimPrefix(r.URL.Path, "/cardconnect/rest/inquireByOrderid/"), "/")[0]
			g.mu.Lock()
			_, made := g.refunds[id]
			g.mu.Unlock()
			if !made {
				answer(map[string]string{"respstat": "C", "respcode": "29", "resptext": "Txn not found"})
				return
			}
			answer(map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": "9" + id[len(id)-11:]})
		case r.Method == http.MethodPut && r.URL.Path == "/cardconnect/rest/refund":
			amount, _ := req["amount"].(string)
			g.mu.Lock()
			g.asked++
			g.refunds[order] = amount
			g.mu.Unlock()
			if g.refundsHeld != nil && g.refundsHeld.Load() {
				hold()
				return
			}
			answer(map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": "9" + order[len(order)-11:]})
		default:
			http.Error(w, "no such endpoint", http.StatusNotFound)
		}
	}))
	t.Cleanup(func() {
		close(g.quit)
		g.srv.Close()
	})
	return g
}

func (g *gateway) url() string {
	return strings.Replace(g.srv.URL, "http://", "http://testing:testing123@", 1) + "/cardconnect/rest"
}

// captured is the ledger: every charge not voided, by order id.
func (g *gateway) captured() map[string]charge {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]charge{}
	for id, c := range g.charges {
		if !c.Voided {
			out[id] = *c
		}
	}
	return out
}

// voidRequests is how many voids each order id got.
func (g *gateway) voidRequests() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{}
	for id, n := range g.voids {
		out[id] = n
	}
	return out
}

// payable creates an invoice of 30.00 numbered number and returns its id
// and the path of its pay page.
func payable(t *testing.T, c *http.Client, baseURL, tok, mid, number string) (id, path string) {
	t.Helper()
	a := send(c, "POST", baseURL+"/payment-requests", tok, invoiceBody(mid, number, false), nil)
	if a.Status != http.StatusCreated {
		t.Fatalf("create: %v", a)
	}
	var inv struct {
		Link string `json:"link"`
	}
	if err := json.Unmarshal(a.Body, &inv); err != nil {
		t.Fatal(err)
	}
	link, err := url.Parse(inv.Link)
	if err != nil {
		t.Fatal(err)
	}
	return created(t, a), link.Path
}

var csrfPattern = regexp.MustCompile(`name="csrfToken" value="([^"]+)"`)

// pay opens the pay page and posts the form for amount.
func pay(c *http.Client, baseURL, path, amount string) (answer, error) {
	page := send(c, "GET", baseURL+path, "", nil, nil)
	if page.Status != http.StatusOK {
		return page, fmt.Errorf("pay page: %v", page)
	}
	m := csrfPattern.FindSubmatch(page.Body)
	if m == nil {
		return page, fmt.Errorf("no form on the pay page: %v", page)
	}
	expiry := time.Now().AddDate(2, 0, 0)
	form := url.Values{"csrfToken": {string(m[1])}, "cardNumber": {"4111111111111111"}, "amount": {amount},
		"cardholderName": {"Dana Whitfield"}, "expiry": {fmt.Sprintf("%02d%02d", int(expiry.Month()), expiry.Year()%100)},
		"cvv": {"123"}}
	return send(c, "POST", baseURL+path, "", form.Encode(), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}), nil
}

// The card processor times out on payments made through the pay page, with
// the CardPointe client: some charges are made and their answer lost, some
// are made only after the client gave up, some voids stall. Afterwards the
// gateway's ledger of charges not voided is exactly the payment rows: no
// customer charged without a payment, no payment without a charge.
func TestProcessorTimeoutsOnPayment(t *testing.T) {
	t.Parallel() // waits on timeouts more than it works
	g := startGateway(t, func(n int) authPlan {
		switch n % 6 {
		case 1:
			return authPlan{slow: true}
		case 3:
			return authPlan{late: true}
		case 5:
			return authPlan{slow: true, voidStall: 1}
		}
		return authPlan{}
	})
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	d.Env["PAYREQ_PROCESSOR"] = "cardpointe"
	d.Env["PAYREQ_CARDPOINTE_URL"] = g.url()
	d.Env["PAYREQ_CARDPOINTE_TIMEOUT"] = "1500ms"
	keys := d.seed(t)
	srv := d.start(t, "payreq", nil)
	c := httpClient("127.0.0.1", 60*time.Second)
	tok := token(t, c, srv.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, srv.URL, tok)

	// Six invoices of 30.00, each paid in two halves by a customer who
	// tries again when the page says the processor could not be reached.
	const invoices = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[int]int{}
	var slowest time.Duration
	for i := range invoices {
		_, path := payable(t, c, srv.URL, tok, mid, fmt.Sprintf("PAY-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := httpClient(fmt.Sprintf("127.0.0.%d", 100+i), 60*time.Second)
			paid := 0
			for try := 0; paid < 2 && try < 9; try++ {
				r, err := pay(customer, srv.URL, path, "15.00")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				outcomes[r.Status]++
				slowest = max(slowest, r.Took)
				mu.Unlock()
				switch r.Status {
				case http.StatusSeeOther:
					paid++
				case http.StatusServiceUnavailable:
					if !strings.Contains(string(r.Body), "nothing was charged") {
						t.Errorf("503 page without its message: %s", r.Body)
					}
				default:
					t.Errorf("pay: %v", r)
					return
				}
			}
			if paid < 2 {
				t.Errorf("invoice %s: %d payments after 9 tries", path, paid)
			}
		}()
	}
	wg.Wait()
	t.Logf("pay page answers %v; slowest %v", outcomes, slowest)
	if outcomes[http.StatusServiceUnavailable] == 0 {
		t.Error("no payment timed out; the test needs some")
	}

	// The ledger and the payments agree, charge for charge.
	db := openDB(t, dsn)
	var payments []struct {
		ID     string `db:"id"`
		Amount string `db:"amount"`
		RetRef string `db:"ret_ref"`
	}
	if err := db.Select(&payments, `SELECT id::text, amount::text, coalesce(ret_ref, '') AS ret_ref FROM card_payments WHERE status = 'approved'`); err != nil {
		t.Fatal(err)
	}
	ledger := g.captured()
	for _, p := range payments {
		ch, ok := ledger[p.ID]
		if !ok {
			t.Errorf("payment %s has no charge at the processor", p.ID)
			continue
		}
		if !sameAmount(ch.Amount, p.Amount) || ch.RetRef != p.RetRef {
			t.Errorf("payment %s is %s (retref %s), the charge %s (retref %s)", p.ID, p.Amount, p.RetRef, ch.Amount, ch.RetRef)
		}
		delete(ledger, p.ID)
	}
	for order, ch := range ledger {
		t.Errorf("order %s charged %s at the processor without a payment", order, ch.Amount)
	}
	g.mu.Lock()
	t.Logf("%d authorisations, %d charges, %d payments", g.n, len(g.charges), len(payments))
	g.mu.Unlock()
	var pending int
	if err := db.Get(&pending, `SELECT count(*) FROM pending_charges`); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Errorf("%d pending charges left, though every outcome is known", pending)
	}
	var unpaid int
	if err := db.Get(&unpaid, `SELECT count(*) FROM invoices WHERE amount_paid <> (SELECT coalesce(sum(amount), 0) FROM card_payments p WHERE p.invoice_id = invoices.id AND p.kind = 'sale' AND p.status = 'approved')`); err != nil {
		t.Fatal(err)
	}
	if unpaid != 0 {
		t.Errorf("%d invoices whose amount paid is not the sum of their payments", unpaid)
	}
}

func sameAmount(a, b string) bool {
	x, _, err1 := apd.NewFromString(a)
	y, _, err2 := apd.NewFromString(b)
	return err1 == nil && err2 == nil && x.Cmp(y) == 0
}

// The processor takes the charge, its answer is lost, and it then refuses
// every void for a while: the customer is not told that nothing was
// charged, and once the processor answers again the charge is voided by the
// service on its own, so the ledger and the payments agree again.
func TestProcessorUnreachableAfterCharging(t *testing.T) {
	t.Parallel()
	var voidsFail atomic.Bool
	voidsFail.Store(true)
	g := startGateway(t, func(n int) authPlan {
		if n%2 == 1 {
			return authPlan{slow: true, voidFail: true}
		}
		return authPlan{}
	})
	g.voidsFail = &voidsFail
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	d.Env["PAYREQ_PROCESSOR"] = "cardpointe"
	d.Env["PAYREQ_CARDPOINTE_URL"] = g.url()
	d.Env["PAYREQ_CARDPOINTE_TIMEOUT"] = "500ms"
	keys := d.seed(t)
	srv := d.start(t, "payreq", nil)
	c := httpClient("127.0.0.1", 60*time.Second)
	tok := token(t, c, srv.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, srv.URL, tok)

	_, path := payable(t, c, srv.URL, tok, mid, "UNSETTLED-1")
	customer := httpClient("127.0.0.120", 60*time.Second)
	r, err := pay(customer, srv.URL, path, "15.00")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("pay with the processor unreachable: %v", r)
	}
	if strings.Contains(string(r.Body), "nothing was charged") {
		t.Errorf("the page says nothing was charged, yet the charge stands at the processor: %s", r.Body)
	}
	if n := len(g.captured()); n != 1 {
		t.Fatalf("%d charges stand at the processor, want the one whose void failed", n)
	}
	// The processor answers voids again; the charge is voided without the customer.
	voidsFail.Store(false)
	eventually(t, 30*time.Second, "the charge is voided", func() bool { return len(g.captured()) == 0 })

	// The customer tries again and pays.
	r, err = pay(customer, srv.URL, path, "15.00")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusSeeOther {
		t.Fatalf("pay again: %v", r)
	}
	db := openDB(t, dsn)
	var payments []string
	if err := db.Select(&payments, `SELECT id::text FROM card_payments WHERE status = 'approved'`); err != nil {
		t.Fatal(err)
	}
	ledger := g.captured()
	if len(payments) != 1 || len(ledger) != 1 || ledger[payments[0]] == (charge{}) {
		t.Errorf("payments %v, charges standing %v: want the same one", payments, ledger)
	}
}

// refundsMade is every refund the gateway made (order id → amount), and
// how many refund requests it got.
func (g *gateway) refundsMade() (map[string]string, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for id, a := range g.refunds {
		out[id] = a
	}
	return out, g.asked
}
