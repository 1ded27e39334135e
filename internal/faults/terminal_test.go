package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// terminals is a fake of CardPointe's Integrated Terminal API (/api/v2)
// and of its gateway's inquireByOrderid and voidByOrderId
// (/cardconnect/rest), with a ledger: each authCard is held (the customer
// at the terminal) until the test says whether the customer paid; the
// gateway then has the sale, whether or not anyone is still listening.
type terminals struct {
	srv *httptest.Server

	mu      sync.Mutex
	asked   map[string]int    // authCard requests per order id
	sales   map[string]string // order id → retref, each sale the gateway made
	voided  map[string]bool
	cancels int
	release chan bool // true: the customer pays; false: nobody does
}

func startTerminals(t *testing.T) *terminals {
	t.Helper()
	f := &terminals{asked: map[string]int{}, sales: map[string]string{}, voided: map[string]bool{}, release: make(chan bool)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &req)
		answer := func(status int, body any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(body)
		}
		order, _ := req["orderId"].(string)
		switch {
		case r.URL.Path == "/api/v2/connect":
			w.Header().Set("X-CardConnect-SessionKey", "key1;expires="+time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"))
			w.WriteHeader(http.StatusOK)
		case r.URL.Path == "/api/v2/ping":
			answer(http.StatusOK, map[string]bool{"connected": true})
		case r.URL.Path == "/api/v2/cancel":
			f.mu.Lock()
			f.cancels++
			f.mu.Unlock()
			w.WriteHeader(http.StatusOK)
		case r.URL.Path == "/api/v2/authCard":
			f.mu.Lock()
			f.asked[order]++
			f.mu.Unlock()
			paid := <-f.release // whoever asked may be gone by now
			if !paid {
				answer(http.StatusInternalServerError, map[string]any{"errorCode": 8, "errorMessage": "Command cancelled"})
				return
			}
			retref := fmt.Sprintf("%012d", 343005000000+len(order))
			f.mu.Lock()
			f.sales[order] = retref
			f.mu.Unlock()
			answer(http.StatusOK, map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": retref,
				"token": "9411111111111111", "entrymode": "Contactless"})
		case strings.HasPrefix(r.URL.Path, "/cardconnect/rest/inquireByOrderid/"):
			id := strings.Split(strings.TrimPrefix(r.URL.Path, "/cardconnect/rest/inquireByOrderid/"), "/")[0]
			f.mu.Lock()
			retref, made := f.sales[id]
			f.mu.Unlock()
			if !made {
				answer(http.StatusOK, map[string]string{"respstat": "C", "respcode": "29", "resptext": "Txn not found"})
				return
			}
			answer(http.StatusOK, map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval", "retref": retref,
				"account": "9411111111111111", "entrymode": "Contactless", "orderid": id})
		case r.URL.Path == "/cardconnect/rest/voidByOrderId":
			f.mu.Lock()
			f.voided[fmt.Sprint(req["orderid"])] = true
			f.mu.Unlock()
			answer(http.StatusOK, map[string]string{"respstat": "A", "respcode": "00", "resptext": "Approval"})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		close(f.release) // frees held authCards (as unpaid)
		f.srv.Close()
	})
	return f
}

func (f *terminals) askedOf(order string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[order]
}

// A payreq killed (SIGKILL) while a terminal waits for the customer: the
// next start never asks the terminal again; it tells it to cancel and asks
// the gateway for the order. The sale the gateway made is recorded once;
// a sale it never made is timed_out, with nothing charged.
func TestKilledDuringAuthCard(t *testing.T) {
	t.Parallel()
	f := startTerminals(t)
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	base := strings.TrimPrefix(f.srv.URL, "http://")
	d.Env["PAYREQ_PROCESSOR"] = "cardpointe"
	d.Env["PAYREQ_CARDPOINTE_URL"] = "http://testing:testing123@" + base + "/cardconnect/rest"
	d.Env["PAYREQ_TERMINAL_URL"] = "http://apikey@" + base + "/api/v2"
	d.Env["PAYREQ_TERMINAL_POLL_INTERVAL"] = "100ms"
	keys := d.seed(t)
	// The terminal is registered before payreq starts, whose first ping
	// then finds it.
	c := httpClient("127.0.0.1", 60*time.Second)
	first := d.start(t, "first", nil)
	tok := token(t, c, first.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, first.URL, tok)
	first.kill()
	var terminal struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(d.cli(t, "terminals", "add", "--mid", mid, "--hsn", "C032UQ03960148", "--name", "Counter", "--json")), &terminal); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dsn)

	for i, paid := range []bool{true, false} {
		in := d.start(t, fmt.Sprintf("run %d", i), nil)
		eventually(t, 30*time.Second, "the terminal is online", func() bool {
			a := send(c, "GET", in.URL+"/terminals/"+terminal.ID, tok, nil, nil)
			return a.Status == http.StatusOK && strings.Contains(string(a.Body), `"online"`)
		})
		invoiceID, _ := payable(t, c, in.URL, tok, mid, fmt.Sprintf("TERM-KILLED-%d", i))
		a := send(c, "POST", in.URL+"/terminal-payments", tok, map[string]any{"terminalId": terminal.ID, "invoiceId": invoiceID}, nil)
		if a.Status != http.StatusAccepted {
			t.Fatalf("terminal payment: %v", a)
		}
		var p struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(a.Body, &p)
		var order string
		if err := db.Get(&order, `SELECT order_id FROM terminal_payments WHERE id = $1`, p.ID); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the terminal is asked", func() bool { return f.askedOf(order) == 1 })
		in.kill()
		f.release <- paid // the customer taps (or walks away) after payreq is gone

		// Stands in for time passing: the dead instance's lease runs out.
		if _, err := db.Exec(`UPDATE terminal_payments SET claimed_until = now() WHERE id = $1`, p.ID); err != nil {
			t.Fatal(err)
		}
		next := d.start(t, fmt.Sprintf("run %d, restarted", i), nil)
		want := map[bool]string{true: "approved", false: "timed_out"}[paid]
		eventually(t, 30*time.Second, "the payment is resolved", func() bool {
			return status(t, db, p.ID) != "pending"
		})
		if got := status(t, db, p.ID); got != want {
			t.Fatalf("payment %s, want %s", got, want)
		}
		if n := f.askedOf(order); n != 1 {
			t.Errorf("the terminal was asked %d times for order %s", n, order)
		}
		var sales int
		if err := db.Get(&sales, `SELECT count(*) FROM card_payments WHERE invoice_id = $1 AND status = 'approved'`, invoiceID); err != nil {
			t.Fatal(err)
		}
		inv := send(c, "GET", next.URL+"/payment-requests/"+invoiceID, tok, nil, nil)
		if paid && (sales != 1 || !strings.Contains(string(inv.Body), `"status":"paid"`)) {
			t.Errorf("%d sales recorded, invoice %s; want one sale and the invoice paid", sales, inv.Body)
		}
		if !paid && (sales != 0 || !strings.Contains(string(inv.Body), `"status":"open"`)) {
			t.Errorf("%d sales recorded, invoice %s; want none and the invoice open", sales, inv.Body)
		}
		f.mu.Lock()
		cancels := f.cancels
		f.mu.Unlock()
		if cancels < i+1 {
			t.Errorf("the terminal was told to cancel %d times by run %d", cancels, i)
		}
		next.kill()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.voided) != 0 {
		t.Errorf("voids %v: a sale recorded must stand", f.voided)
	}
}

func status(t *testing.T, db *sqlx.DB, id string) string {
	t.Helper()
	var s string
	if err := db.Get(&s, `SELECT status FROM terminal_payments WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return s
}
