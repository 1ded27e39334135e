package faults

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/devdb"
)

// countByNumber counts the invoices per number, of the numbers starting with prefix.
func countByNumber(t *testing.T, db *sqlx.DB) func(prefix string) map[string]int {
	return func(prefix string) map[string]int {
		var rows []struct {
			Number string `db:"invoice_number"`
			N      int    `db:"n"`
		}
		if err := db.Select(&rows, `SELECT invoice_number, count(*) AS n FROM invoices
			WHERE starts_with(invoice_number, $1) GROUP BY invoice_number`, prefix); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, r := range rows {
			out[r.Number] = r.N
		}
		return out
	}
}

// PostgreSQL stops under load and starts again: requests meanwhile answer a
// 503 problem within the request timeout, /readyz fails, the same process
// serves again once the database is back, and clients that retry their
// creates with their Idempotency-Key end with exactly one invoice each.
func TestPostgresStopsAndStartsUnderLoad(t *testing.T) {
	t.Parallel()
	dsn, clusterDir := newCluster(t)
	d := newDeployment(t, dsn)
	const requestTimeout = 2 * time.Second
	d.Env["PAYREQ_REQUEST_TIMEOUT"] = requestTimeout.String()
	d.Env["PAYREQ_REVOCATION_CHECK_INTERVAL"] = "1s" // authentication reads the database too
	keys := d.seed(t)
	srv := d.start(t, "payreq", nil)

	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, srv.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, srv.URL, tok)

	load := newCreates(t, mid, tok, "OUT", false, func() string { return srv.URL })
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	hardDeadline := time.Now().Add(90 * time.Second)
	creators := load.run(ctx, 6, "127.0.0.1", hardDeadline)

	// Readers: the invoice list and readiness, all along.
	type probe struct {
		at     time.Time
		answer answer
	}
	var mu sync.Mutex
	var lists, readies []probe
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		for ctx.Err() == nil {
			a := send(c, "GET", srv.URL+"/payment-requests?limit=5", tok, nil, nil)
			mu.Lock()
			lists = append(lists, probe{time.Now(), a})
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() {
		defer readers.Done()
		for ctx.Err() == nil {
			a := send(c, "GET", srv.URL+"/readyz", "", nil, nil)
			mu.Lock()
			readies = append(readies, probe{time.Now(), a})
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()

	time.Sleep(2 * time.Second)
	_, before, _, _ := load.summary()
	if before[http.StatusCreated] == 0 {
		t.Fatalf("no invoice created before the outage: %v", before)
	}

	down := time.Now()
	if err := devdb.Stop(clusterDir); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Logf("PostgreSQL stopped in %v", stopped.Sub(down).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	restart := time.Now()
	startCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if _, err := devdb.Ensure(startCtx, clusterDir); err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	up := time.Now()
	t.Logf("PostgreSQL down for %v", up.Sub(down).Round(time.Millisecond))

	// The same process serves again.
	eventually(t, 20*time.Second, "/readyz answers 200 again", func() bool {
		return send(c, "GET", srv.URL+"/readyz", "", nil, nil).Status == http.StatusOK
	})
	recovered := time.Now()
	t.Logf("ready again %v after the database", recovered.Sub(up).Round(time.Millisecond))
	_, during, _, _ := load.summary()
	time.Sleep(2 * time.Second)
	stopLoad()
	creators.Wait()
	readers.Wait()

	ids, statuses, errs, slowest := load.summary()
	t.Logf("creates: %d keys, answers %v, transport errors %d, slowest %v", len(ids), statuses, len(errs), slowest)
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no create was answered 503 during the outage: %v", statuses)
	}
	if statuses[http.StatusCreated] <= during[http.StatusCreated] {
		t.Errorf("no invoice created after the database came back: %v then %v", during, statuses)
	}
	for status := range statuses {
		if status != http.StatusCreated && status != http.StatusOK && status != http.StatusServiceUnavailable {
			t.Errorf("creates answered %d: %v", status, statuses)
		}
	}
	if len(errs) > 0 {
		t.Errorf("%d creates got no answer (the server must answer through the outage), first: %v", len(errs), errs[0])
	}
	// The slack is for a machine busy with other tests.
	const slack = 3 * time.Second
	if slowest > requestTimeout+slack {
		t.Errorf("slowest create took %v, more than the request timeout %v (and %v)", slowest, requestTimeout, slack)
	}

	// Readers: 503 problems within the timeout while the database was
	// away, and /readyz failed then.
	mu.Lock()
	defer mu.Unlock()
	var list503, ready503, readyOK int
	for _, p := range lists {
		switch {
		case p.answer.Err != nil:
			t.Errorf("list got no answer: %v", p.answer.Err)
		case p.answer.Status == http.StatusServiceUnavailable:
			wantUnavailable(t, p.answer)
			list503++
		case p.answer.Status != http.StatusOK:
			t.Errorf("list answered %v", p.answer)
		}
		if p.answer.Took > requestTimeout+slack {
			t.Errorf("list took %v", p.answer.Took)
		}
	}
	for _, p := range readies {
		if p.answer.Err != nil {
			t.Errorf("/readyz got no answer: %v", p.answer.Err)
			continue
		}
		if p.at.After(stopped.Add(500*time.Millisecond)) && p.at.Before(restart) {
			if p.answer.Status != http.StatusServiceUnavailable {
				t.Errorf("/readyz answered %d while the database was stopped", p.answer.Status)
			}
			ready503++
		}
		if p.at.After(recovered) && p.answer.Status == http.StatusOK {
			readyOK++
		}
	}
	if list503 == 0 || ready503 == 0 || readyOK == 0 {
		t.Errorf("lists answered 503 %d times, /readyz 503 %d times during the outage and 200 %d times after", list503, ready503, readyOK)
	}
	t.Logf("lists: %d (503: %d); /readyz: %d (503 during the outage: %d)", len(lists), list503, len(readies), ready503)

	// Every 201 exists, every key made exactly one invoice, nothing is half-written.
	db := openDB(t, dsn)
	load.checkExactlyOne(t, countByNumber(t, db))
	for key, id := range load.first201 {
		if a := send(c, "GET", srv.URL+"/payment-requests/"+id, tok, nil, nil); a.Status != http.StatusOK {
			t.Errorf("invoice %s of key %s answered 201, now: %v", id, key, a)
		}
	}
	checkInvoicesWhole(t, db)
}
