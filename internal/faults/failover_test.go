package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/smtpfake"
)

// haCluster is deploy/ha's three-member cluster, started by the same
// script as make ha (deploy/ha/local.sh) on the loopback addresses
// prefix10-13; its members are pg1-pg3 on prefix11-13.
type haCluster struct {
	t      *testing.T
	dir    string
	prefix string
	DSN    string // payreq's role, through HAProxy's leader port
}

func startHA(t *testing.T, prefix string) *haCluster {
	t.Helper()
	for _, tool := range []string{"patroni", "etcd", "haproxy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make test installs it: apt-get install patroni etcd-server haproxy)", tool)
		}
	}
	dir, err := os.MkdirTemp(workDir, "ha-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &haCluster{t: t, dir: dir, prefix: prefix}
	t.Cleanup(func() {
		if out, err := h.script("stop"); err != nil {
			t.Errorf("stop the cluster: %v\n%s", err, out)
		}
		if t.Failed() {
			for i := 1; i <= 3; i++ {
				b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("patroni%d.log", i)))
				t.Logf("patroni%d.log (last 4 KiB):\n%s", i, tail(string(b), 4<<10))
			}
		}
		os.RemoveAll(dir)
	})
	out, err := h.script("start")
	if err != nil {
		t.Fatalf("start the cluster: %v\n%s", err, out)
	}
	last := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	h.DSN = strings.TrimSpace(strings.TrimPrefix(last, "DATABASE_URL="))
	return h
}

func (h *haCluster) script(command string) (string, error) {
	cmd := exec.Command("deploy/ha/local.sh", command, h.dir, h.prefix)
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "PAYREQ="+binary)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// member is one Patroni member as its REST API describes it.
type member struct {
	Name  string `json:"name"`
	Role  string `json:"role"`  // leader, sync_standby, replica
	State string `json:"state"` // running, streaming, starting, …
}

// whole waits until the cluster has a leader, a synchronous standby and
// a third member replicating: what a failure may then take away.
func (h *haCluster) whole(d time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		roles := map[string]int{}
		for _, m := range h.members() {
			if m.State == "running" || m.State == "streaming" {
				roles[m.Role]++
			}
		}
		if roles["leader"] == 1 && roles["sync_standby"] == 1 && roles["replica"] == 1 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.t.Fatalf("the cluster is not whole after %v: %+v", d, h.members())
}

func (h *haCluster) members() []member {
	for i := 1; i <= 3; i++ {
		resp, err := http.Get(fmt.Sprintf("http://%s1%d:8008/cluster", h.prefix, i))
		if err != nil {
			continue
		}
		var c struct{ Members []member }
		err = json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if err == nil {
			return c.Members
		}
	}
	return nil
}

// withRole waits for a member of role and returns its number (1-3).
func (h *haCluster) withRole(role string, d time.Duration) int {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, m := range h.members() {
			if m.Role == role {
				n, _ := strconv.Atoi(strings.TrimPrefix(m.Name, "pg"))
				return n
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.t.Fatalf("no %s within %v: %+v", role, d, h.members())
	return 0
}

// killPostmaster SIGKILLs member n's PostgreSQL, as a crashed host would
// lose it (Patroni, on primary_start_timeout 0, fails over rather than
// restart it in place).
func (h *haCluster) killPostmaster(n int) {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, fmt.Sprintf("pg%d", n), "data", "postmaster.pid"))
	if err != nil {
		h.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		h.t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		h.t.Fatal(err)
	}
}

// killMember SIGKILLs member n's Patroni and PostgreSQL, as a host lost
// with its power.
func (h *haCluster) killMember(n int) {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, fmt.Sprintf("patroni%d.pid", n)))
	if err != nil {
		h.t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		h.t.Fatal(err)
	}
	h.killPostmaster(n)
}

// stopMember stops member n's Patroni, which stops its PostgreSQL.
func (h *haCluster) stopMember(n int) {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, fmt.Sprintf("patroni%d.pid", n)))
	if err != nil {
		h.t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		h.t.Fatal(err)
	}
	for range 300 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.t.Fatalf("patroni of pg%d did not stop", n)
}

// haLoad is the load of both tests: invoice creations with their
// Idempotency-Keys (each sent by email when sendIt), sent again with the
// same key after a 503, spread over the instances.
func haLoad(t *testing.T, c *http.Client, tok, mid, prefix string, sendIt bool, instances ...*instance) (*creates, context.CancelFunc, *sync.WaitGroup) {
	var next atomic.Uint64
	load := newCreates(t, mid, tok, prefix, sendIt, func() string {
		return instances[next.Add(1)%uint64(len(instances))].URL
	})
	ctx, stop := context.WithCancel(context.Background())
	return load, stop, load.run(ctx, 4, "127.0.0.1", time.Now().Add(3*time.Minute))
}

// logErrors logs the first lines of each instance's log that say what a
// 500 was.
func logErrors(t *testing.T, instances ...*instance) {
	for _, in := range instances {
		n := 0
		for _, line := range strings.Split(in.logs.String(), "\n") {
			if strings.Contains(line, `"status":500`) || strings.Contains(line, "panic") {
				if n++; n <= 5 {
					t.Logf("%s: %s", in.name, line)
				}
			}
		}
	}
}

// checkHALoad: every answer was 201, 200 or 503 (never a 500, never none),
// some 503s came, every 201 exists exactly once.
func checkHALoad(t *testing.T, load *creates, dsn string) {
	t.Helper()
	ids, statuses, errs, _ := load.summary()
	t.Logf("creates: %d keys, answers %v, transport errors %d", len(ids), statuses, len(errs))
	for status := range statuses {
		if status != http.StatusCreated && status != http.StatusOK && status != http.StatusServiceUnavailable {
			t.Errorf("creates answered %d: %v", status, statuses)
		}
	}
	if len(errs) > 0 {
		t.Errorf("%d creates got no answer, first: %v", len(errs), errs[0])
	}
	db := openDB(t, dsn)
	load.checkExactlyOne(t, countByNumber(t, db))
	checkInvoicesWhole(t, db)
}

// The leader's postmaster is killed twice under a load of creations (each
// sent by email) and pay-page payments on two instances: each time the
// service answers again within 30 s, 503s meanwhile; afterwards every
// created invoice answered 2xx exists exactly once, its pay link (and each
// payment's receipt) arrived once at the mail server, a send scheduled
// into the first failover and a reminder due after it went out once, and
// the gateway's charges are exactly the approved card payments.
func TestLeaderKilledUnderLoad(t *testing.T) {
	t.Parallel()
	g := startGateway(t, func(int) authPlan { return authPlan{} })
	mail := smtpfake.Start(t, smtpfake.Accept)
	h := startHA(t, "127.0.7.")
	d := newDeployment(t, h.DSN)
	d.Env["PAYREQ_PROCESSOR"] = "cardpointe"
	d.Env["PAYREQ_CARDPOINTE_URL"] = g.url()
	d.Env["PAYREQ_REQUEST_TIMEOUT"] = "3s"
	d.Env["PAYREQ_REVOCATION_CHECK_INTERVAL"] = "1s"
	d.Env["PAYREQ_WEBHOOK_ALLOW_PRIVATE"] = "true"
	d.Env["PAYREQ_SCHEDULE_POLL_INTERVAL"] = "1s"
	d.Env["PAYREQ_SMTP_URL"] = mail.URL("billing@example.com")
	// A message whose claim or outcome a failover broke is tried again
	// once its lease ends: within the test, and longer than a failover.
	d.Env["PAYREQ_DELIVERY_LEASE"] = "20s"
	d.Env["PAYREQ_DELIVERY_BACKOFF"] = "100ms"
	keys := d.seed(t)
	remindMID, today := remindableMID(t, d, keys.Merchant.OrganizationID)
	a := d.start(t, "a", nil)
	b := d.start(t, "b", map[string]string{"PAYREQ_ADDR": freeAddr(t)})
	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, a.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, a.URL, tok)
	// The workers go on across failovers: every invoice's invoice.created
	// reaches this receiver (at least once) once the load ends.
	var hookMu sync.Mutex
	announced := map[string]bool{} // invoice ids
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e struct{ Data struct{ ID string } }
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		hookMu.Lock()
		announced[e.Data.ID] = true
		hookMu.Unlock()
	}))
	defer receiver.Close()
	if made := send(c, "POST", a.URL+"/webhook-endpoints", tok, map[string]any{"url": receiver.URL, "eventTypes": []string{"invoice.created"}}, nil); made.Status != http.StatusCreated {
		t.Fatalf("create endpoint: %v", made)
	}

	// Payers: one invoice of 30.00 each, paid in full, tried again on the
	// same invoice after a 503 until its page says it is paid.
	const payers = 3
	paths := make([][]string, payers)
	for p := range payers {
		for i := range 12 {
			_, path := payable(t, c, a.URL, tok, mid, fmt.Sprintf("HAPAY-%d-%d", p, i))
			paths[p] = append(paths[p], path)
		}
	}
	var series string    // a recurring series due today, made after the first failover
	var scheduled string // an invoice whose send comes due in the first failover
	var reminded string  // an invoice whose reminder is due after it
	load, stopLoad, creators := haLoad(t, c, tok, mid, "HA", true, a, b)
	defer stopLoad()
	var paying sync.WaitGroup
	var payMu sync.Mutex
	payStatuses := map[int]int{}
	paid := 0
	for p := range payers {
		paying.Add(1)
		go func() {
			defer paying.Done()
			base := []*instance{a, b}[p%2].URL
			for i, path := range paths[p] {
				// A customer an invoice, each from an address of its own.
				customer := httpClient(fmt.Sprintf("127.0.0.%d", 120+p*12+i), 30*time.Second)
				for try := 0; try < 40; try++ {
					r, err := pay(customer, base, path, "30.00")
					payMu.Lock()
					payStatuses[r.Status]++
					payMu.Unlock()
					if err == nil && r.Status == http.StatusSeeOther {
						payMu.Lock()
						paid++
						payMu.Unlock()
						break
					}
					if r.Status == http.StatusOK && err != nil && strings.Contains(string(r.Body), "paid") {
						break // paid by the try whose answer was a 503
					}
					time.Sleep(500 * time.Millisecond)
				}
				time.Sleep(300 * time.Millisecond)
			}
		}()
	}

	for kill := 1; kill <= 2; kill++ {
		time.Sleep(3 * time.Second)
		h.whole(90 * time.Second)
		leader := h.withRole("leader", 30*time.Second)
		if kill == 1 {
			body := invoiceBody(mid, "HASCHED", true)
			body["sendAt"] = time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
			r := send(c, "POST", a.URL+"/payment-requests", tok, body, nil)
			if r.Status != http.StatusCreated {
				t.Fatalf("scheduled send: %v", r)
			}
			scheduled = created(t, r)
		}
		h.killPostmaster(leader)
		killed := time.Now()
		eventually(t, 30*time.Second, "a create answered 201 on both instances after the kill", func() bool {
			for _, in := range []*instance{a, b} {
				a := send(c, "POST", in.URL+"/payment-requests", tok, invoiceBody(mid, fmt.Sprintf("HAPROBE-%d-%s-%d", kill, in.name, time.Now().UnixNano()), false), nil)
				if a.Status != http.StatusCreated {
					return false
				}
			}
			return true
		})
		t.Logf("kill %d (pg%d): serving again after %v", kill, leader, time.Since(killed).Round(100*time.Millisecond))
		eventually(t, 30*time.Second, "/readyz 200 on both instances", func() bool {
			return send(c, "GET", a.URL+"/readyz", "", nil, nil).Status == http.StatusOK &&
				send(c, "GET", b.URL+"/readyz", "", nil, nil).Status == http.StatusOK
		})
		if kill == 1 {
			series = dueSeries(t, c, a.URL, tok, mid, h.DSN)
			body := invoiceBody(remindMID, "HAREMIND", true)
			body["dueDate"], body["reminders"] = today, true
			r := send(c, "POST", b.URL+"/payment-requests", tok, body, nil)
			if r.Status != http.StatusCreated {
				t.Fatalf("invoice to remind: %v", r)
			}
			reminded = created(t, r)
		}
	}
	time.Sleep(2 * time.Second)
	stopLoad()
	creators.Wait()
	paying.Wait()
	checkHALoad(t, load, h.DSN)
	logErrors(t, a, b)
	_, statuses, _, _ := load.summary()
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no create was answered 503 across two failovers: %v", statuses)
	}
	t.Logf("payments: %d paid, answers %v", paid, payStatuses)
	// The recurring worker went on too: its occurrence due today issued
	// once, whichever instance and leader took it.
	eventually(t, 60*time.Second, "the recurring series' first invoice issued", func() bool {
		var s struct{ IssuedCount int }
		r := send(c, "GET", a.URL+"/recurring-invoices/"+series, tok, nil, nil)
		return r.Status == http.StatusOK && json.Unmarshal(r.Body, &s) == nil && s.IssuedCount == 1
	})
	var issued int
	if err := openDB(t, h.DSN).Get(&issued, `SELECT count(*) FROM invoices WHERE invoice_number LIKE 'HAREC-%'`); err != nil || issued != 1 {
		t.Errorf("the recurring series made %d invoices (%v), want 1", issued, err)
	}
	var invoices []string
	if err := openDB(t, h.DSN).Select(&invoices, `SELECT id::text FROM invoices`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, fmt.Sprintf("invoice.created of each of the %d invoices delivered", len(invoices)), func() bool {
		hookMu.Lock()
		defer hookMu.Unlock()
		for _, id := range invoices {
			if !announced[id] {
				return false
			}
		}
		return true
	})
	if payStatuses[http.StatusInternalServerError] > 0 {
		t.Errorf("a payment was answered 500: %v", payStatuses)
	}
	checkMailOnce(t, openDB(t, h.DSN), mail, scheduled, reminded)

	// The gateway's ledger and the database agree, payment for payment.
	db := openDB(t, h.DSN)
	var payments []struct {
		OrderID string `db:"order_id"`
		Amount  string `db:"amount"`
	}
	if err := db.Select(&payments, `SELECT id::text AS order_id, amount::text AS amount FROM card_payments WHERE status = 'approved'`); err != nil {
		t.Fatal(err)
	}
	charged := map[string]string{}
	for id, ch := range g.captured() {
		if !ch.Voided {
			charged[id] = ch.Amount
		}
	}
	// A charge whose record the failover broke stays pending, to be voided
	// (or found) by the pending charges' settlement.
	var pending []string
	if err := db.Select(&pending, `SELECT order_id::text FROM pending_charges`); err != nil {
		t.Fatal(err)
	}
	for _, p := range payments {
		if amount, ok := charged[p.OrderID]; !ok || !sameAmount(amount, p.Amount) {
			t.Errorf("payment %s of %s: the gateway charged %q", p.OrderID, p.Amount, amount)
		}
		delete(charged, p.OrderID)
	}
	for _, id := range pending {
		delete(charged, id)
	}
	for id, amount := range charged {
		t.Errorf("order %s charged %s at the gateway with neither a payment nor a pending charge", id, amount)
	}
	t.Logf("%d approved card payments, %d pending charges", len(payments), len(pending))
	var overpaid int
	if err := db.Get(&overpaid, `SELECT count(*) FROM (SELECT invoice_id FROM card_payments WHERE status = 'approved'
		GROUP BY invoice_id HAVING count(*) > 1) x`); err != nil {
		t.Fatal(err)
	}
	if overpaid > 0 {
		t.Errorf("%d invoices were charged twice", overpaid)
	}
}

// The synchronous standby stops, then the leader is killed: the one member
// left leads with no standby, and in strict synchronous mode takes no
// commit until another member holds it. The load sees 503s then, never a
// 201 that is lost; once the stopped member is back, creations go on.
// The simulator's workers go on too: a terminal payment whose terminal
// answers during the kill ends approved, charged once, and the batch
// closing that comes due after it deposits each payment once.
func TestSynchronousStandbyStoppedThenLeaderKilled(t *testing.T) {
	t.Parallel()
	h := startHA(t, "127.0.8.")
	d := newDeployment(t, h.DSN)
	d.Env["PAYREQ_REQUEST_TIMEOUT"] = "2s"
	d.Env["PAYREQ_REVOCATION_CHECK_INTERVAL"] = "1s"
	d.Env["PAYREQ_TERMINAL_POLL_INTERVAL"] = "100ms"
	d.Env["PAYREQ_DEPOSIT_POLL_INTERVAL"] = "1s"
	keys := d.seed(t)
	srv := d.start(t, "payreq", nil)
	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, srv.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	db := openDB(t, h.DSN)
	// The demo's terminal that approves, and its MID: the payments made
	// on it are the batch that closes after the failover.
	var terminal struct {
		ID  string `db:"id"`
		MID string `db:"merchant_account_id"`
	}
	if err := db.Get(&terminal, `SELECT id::text, merchant_account_id::text FROM terminals WHERE hsn LIKE 'SIM-OK-%'`); err != nil {
		t.Fatal(err)
	}
	mid := terminal.MID
	for i := range 2 {
		_, path := payable(t, c, srv.URL, tok, mid, fmt.Sprintf("SYNCPAY-%d", i))
		if r, err := pay(httpClient(fmt.Sprintf("127.0.0.%d", 200+i), 30*time.Second), srv.URL, path, "30.00"); err != nil || r.Status != http.StatusSeeOther {
			t.Fatalf("pay SYNCPAY-%d: %v, %v", i, r, err)
		}
	}
	load, stopLoad, creators := haLoad(t, c, tok, mid, "SYNC", false, srv)
	defer stopLoad()

	time.Sleep(2 * time.Second)
	h.whole(60 * time.Second)
	standby := h.withRole("sync_standby", 30*time.Second)
	h.stopMember(standby)
	// The replica left becomes the synchronous standby.
	deadline := time.Now().Add(30 * time.Second)
	var leader, next int
	for next == 0 || next == standby {
		if time.Now().After(deadline) {
			t.Fatalf("no new synchronous standby: %+v", h.members())
		}
		leader, next = h.withRole("leader", 30*time.Second), h.withRole("sync_standby", 30*time.Second)
	}
	// The terminal is asked just before the kill, and answers (in 2 s)
	// while no commit can be made.
	termInvoice, _ := payable(t, c, srv.URL, tok, mid, "SYNCTERM")
	r := send(c, "POST", srv.URL+"/terminal-payments", tok, map[string]any{"terminalId": terminal.ID, "invoiceId": termInvoice}, nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("terminal payment: %v", r)
	}
	termPayment := created(t, r)
	eventually(t, 10*time.Second, "the terminal is asked", func() bool {
		var asked bool
		return db.Get(&asked, `SELECT asked_at IS NOT NULL FROM terminal_payments WHERE id = $1`, termPayment) == nil && asked
	})
	h.killMember(leader)
	// The last member leads once Patroni promotes it (after the lost
	// leader's lock expires), and commits wait for a standby: readiness
	// says so, and the creates are 503s.
	deadline = time.Now().Add(60 * time.Second)
	for h.withRole("leader", 60*time.Second) != next {
		if time.Now().After(deadline) {
			t.Fatalf("pg%d was not promoted: %+v", next, h.members())
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	_, before, _, _ := load.summary()
	time.Sleep(3 * time.Second)
	_, during, _, _ := load.summary()
	if during[http.StatusCreated] != before[http.StatusCreated] {
		t.Errorf("invoices were created while no standby held their commits: %v then %v", before, during)
	}
	if a := send(c, "GET", srv.URL+"/readyz", "", nil, nil); a.Status != http.StatusServiceUnavailable {
		t.Errorf("/readyz answered %d while no commit could be made", a.Status)
	}

	// The stopped member comes back, the killed one rejoins: writes go on.
	if out, err := h.script("start"); err != nil {
		t.Fatalf("restart the members: %v\n%s", err, out)
	}
	eventually(t, 60*time.Second, "a create answered 201 once a standby is back", func() bool {
		_, now, _, _ := load.summary()
		return now[http.StatusCreated] > during[http.StatusCreated]
	})
	stopLoad()
	creators.Wait()
	checkHALoad(t, load, h.DSN)
	logErrors(t, srv)
	checkTerminalPayment(t, db, srv, termPayment, termInvoice)
	checkBatchClosed(t, db, mid, 3)
}

// checkTerminalPayment waits for the terminal payment to be resolved and
// checks that it was approved, with one approved card payment paying the
// invoice, and that no charge of the simulator was voided.
func checkTerminalPayment(t *testing.T, db *sqlx.DB, in *instance, id, invoiceID string) {
	t.Helper()
	eventually(t, 40*time.Second, "the terminal payment resolved", func() bool { return status(t, db, id) != "pending" })
	if got := status(t, db, id); got != "approved" {
		t.Errorf("the terminal payment asked before the kill ended %s, want approved", got)
	}
	var sales int
	var invoice string
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM card_payments WHERE invoice_id = i.id AND status = 'approved'), i.status
		FROM invoices i WHERE i.id = $1`, invoiceID).Scan(&sales, &invoice); err != nil || sales != 1 || invoice != "paid" {
		t.Errorf("the terminal's invoice: %d approved card payments, %s (%v); want one, paid", sales, invoice, err)
	}
	if strings.Contains(in.logs.String(), "terminal: charge voided") {
		t.Error("a terminal charge was voided")
	}
}

// checkBatchClosed stands in for a day passing (the MID's approved
// payments made and its batch last closed a day earlier), so that its
// batch comes due now, after the failover; then waits for the deposits
// worker to close it, and checks that the payments, n of them, went into
// one deposit, announced once.
func checkBatchClosed(t *testing.T, db *sqlx.DB, mid string, n int) {
	t.Helper()
	if _, err := db.Exec(`WITH p AS (UPDATE card_payments SET created_at = created_at - interval '1 day'
			WHERE merchant_account_id = $1 AND status = 'approved' RETURNING 1)
		UPDATE batch_closings SET closed_until = closed_until - interval '1 day' WHERE merchant_account_id = $1`, mid); err != nil {
		t.Fatal(err)
	}
	var deposits []string
	eventually(t, 30*time.Second, "the batch closed after the failover", func() bool {
		if err := db.Select(&deposits, `SELECT id::text FROM deposits WHERE merchant_account_id = $1`, mid); err != nil {
			t.Fatal(err)
		}
		return len(deposits) > 0
	})
	var d struct {
		Deposits  int `db:"deposits"`
		Sales     int `db:"sales_count"`
		Deposited int `db:"deposited"`
		Events    int `db:"events"`
	}
	err := db.Get(&d, `SELECT (SELECT count(*) FROM deposits WHERE merchant_account_id = $1) AS deposits,
			(SELECT sum(sales_count) FROM deposits WHERE merchant_account_id = $1) AS sales_count,
			(SELECT count(*) FROM card_payments WHERE merchant_account_id = $1 AND deposit_id = $2) AS deposited,
			(SELECT count(*) FROM events WHERE type = 'deposit.created' AND data->>'id' = $2::text) AS events`, mid, deposits[0])
	if err != nil || d.Deposits != 1 || d.Sales != n || d.Deposited != n || d.Events != 1 {
		t.Errorf("after the failover the batch of %d payments made %+v (%v); want one deposit of them all, announced once", n, d, err)
	}
}

// dueSeries makes a monthly recurring series on mid starting today in the
// MID's location's zone (so due since 00:00) and returns its id.
func dueSeries(t *testing.T, c *http.Client, baseURL, tok, mid, dsn string) string {
	t.Helper()
	var zone string
	if err := openDB(t, dsn).Get(&zone, `SELECT l.time_zone FROM merchant_accounts m JOIN locations l ON l.id = m.location_id WHERE m.id = $1`, mid); err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	cust := send(c, "POST", baseURL+"/customers", tok, map[string]any{"email": "ha-recurring@example.com", "name": "Dana Whitfield"}, nil)
	var cu struct{ ID string }
	if cust.Status != http.StatusCreated || json.Unmarshal(cust.Body, &cu) != nil {
		t.Fatalf("customer: %v", cust)
	}
	made := send(c, "POST", baseURL+"/recurring-invoices", tok, map[string]any{
		"merchantAccountId": mid, "customerId": cu.ID, "invoiceNumberPrefix": "HAREC", "amount": "25.00",
		"lines": nil, "memo": nil, "poNumber": nil, "delivery": nil, "reminders": nil,
		"interval": "month", "intervalCount": 1, "startOn": time.Now().In(loc).Format("2006-01-02"),
		"endAfter": nil, "endOn": nil, "dueDays": 14, "send": false,
	}, nil)
	var s struct{ ID string }
	if made.Status != http.StatusCreated || json.Unmarshal(made.Body, &s) != nil {
		t.Fatalf("recurring series: %v", made)
	}
	return s.ID
}

// checkMailOnce waits until every message of the outbox is delivered, and
// checks that each arrived exactly once at mail, that no invoice's pay
// link was queued twice, and that the scheduled send and the reminder went
// out once each.
func checkMailOnce(t *testing.T, db *sqlx.DB, mail *smtpfake.Server, scheduled, reminded string) {
	t.Helper()
	var left int
	eventually(t, 60*time.Second, "every message delivered", func() bool {
		if err := db.Get(&left, `SELECT count(*) FROM outbox WHERE delivered_at IS NULL`); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
	var messages []struct {
		ID   string `db:"message_id"`
		Kind string `db:"kind"`
	}
	if err := db.Select(&messages, `SELECT '<' || id || '@payreq>' AS message_id, kind FROM outbox`); err != nil {
		t.Fatal(err)
	}
	arrived := mail.ByMessageID()
	kinds := map[string]int{}
	for _, m := range messages {
		kinds[m.Kind]++
		if arrived[m.ID] != 1 {
			t.Errorf("%s message %s arrived %d times, want once", m.Kind, m.ID, arrived[m.ID])
		}
	}
	t.Logf("%d messages delivered once each: %v", len(messages), kinds)
	var twice int
	if err := db.Get(&twice, `SELECT count(*) FROM (SELECT invoice_id FROM outbox WHERE kind = 'pay_link' AND invoice_id IS NOT NULL
		GROUP BY invoice_id HAVING count(*) > 1) x`); err != nil || twice > 0 {
		t.Errorf("%d invoices have more than one pay link queued (%v)", twice, err)
	}
	var sched struct {
		Links  int        `db:"links"`
		SentAt *time.Time `db:"sent_at"`
		Due    *time.Time `db:"scheduled_send_at"`
	}
	if err := db.Get(&sched, `SELECT (SELECT count(*) FROM outbox WHERE invoice_id = i.id) AS links, sent_at, scheduled_send_at
		FROM invoices i WHERE id = $1`, scheduled); err != nil || sched.Links != 1 || sched.SentAt == nil || sched.Due != nil {
		t.Errorf("the send scheduled into the failover: %d messages, sent at %v, still scheduled at %v (%v); want one, sent",
			sched.Links, sched.SentAt, sched.Due, err)
	}
	var rem struct {
		Messages int `db:"messages"`
		Sent     int `db:"reminders_sent"`
	}
	if err := db.Get(&rem, `SELECT (SELECT count(*) FROM outbox WHERE invoice_id = i.id AND kind = 'reminder') AS messages, reminders_sent
		FROM invoices i WHERE id = $1`, reminded); err != nil || rem.Messages != 1 || rem.Sent != 1 {
		t.Errorf("the reminder due after the failover: %d messages, remindersSent %d (%v); want one", rem.Messages, rem.Sent, err)
	}
}
