// Command bench is payreq's performance harness (make bench): it starts the
// private bench cluster, loads 1,000,000 invoices, and measures each
// scenario through `payreq serve` over loopback beside three baselines run on
// the same machine in the same run: (a) pgbench running the scenario's SQL,
// (b) the same server with request validation off, (c) a bare Echo handler.
// It prints the table and writes it to bench/results.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/terminal"
)

type options struct {
	dataDir, payreqBin, echoBin, benchDir, out, explainOut, profileDir string
	invoices, others, otherInvoices, smallInvoices, repeat             int
	sizes                                                              []int // invoices of the organization under test, one database each
	clients, highClients                                               int
	warmup, window                                                     time.Duration
	pgbenchMode                                                        string
	only, runs                                                         string
}

func main() {
	var o options
	flag.StringVar(&o.dataDir, "data", ".data/bench", "bench cluster and server secrets (not the dev/test cluster)")
	flag.StringVar(&o.payreqBin, "payreq", "bin/payreq", "payreq binary")
	flag.StringVar(&o.echoBin, "echo", "bin/bench-echo", "bare Echo baseline binary (bench/echo)")
	flag.StringVar(&o.benchDir, "dir", "bench", "folder of load.sql and pgbench/")
	flag.StringVar(&o.out, "out", "bench/results.md", "results table (Markdown)")
	flag.StringVar(&o.explainOut, "explain", "bench/explain.txt", "EXPLAIN of the list pages")
	flag.StringVar(&o.profileDir, "profile", "", "instead of the table: CPU and allocation profiles of each scenario into this folder")
	sizes := flag.String("sizes", "100000,1000000", "comma-separated invoice counts of the organization under test: each its own database, measured in turn")
	flag.IntVar(&o.invoices, "invoices", 0, "one size only (as -sizes with one value)")
	flag.IntVar(&o.others, "others", 50, "other organizations")
	flag.IntVar(&o.otherInvoices, "other-invoices", 1000, "invoices of each other organization")
	flag.IntVar(&o.smallInvoices, "small", 1000, "invoices of the small database (get by id at 1,000)")
	flag.IntVar(&o.repeat, "repeat", 1, "rounds of the whole sequence; each figure is then the median of its rounds")
	flag.IntVar(&o.clients, "clients", 32, "concurrent connections (HTTP and pgbench)")
	flag.IntVar(&o.highClients, "high-clients", 256, "connections of the peak-RSS run")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured start of each run")
	flag.DurationVar(&o.window, "duration", 12*time.Second, "measured part of each run")
	flag.StringVar(&o.pgbenchMode, "pgbench-mode", "prepared", "pgbench -M: the protocol payreq's driver speaks (prepared: internal/postgres prepares every statement)")
	flag.StringVar(&o.only, "only", "", "comma-separated scenarios to run (default: all)")
	flag.StringVar(&o.runs, "runs", "", "comma-separated runs to make, of pgbench, payreq, portal (the portal's pages, in the payreq run), events, pinned, echo "+
		"(at every size) and open, high, novalidate, unprepared, small (at the largest only) (default: all)")
	flag.Parse()
	var err error
	if o.sizes, err = parseSizes(*sizes, o.invoices); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.repeat < 1 || o.clients < 1 || o.window <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -repeat and -clients must be at least 1, -duration above 0")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseSizes reads -sizes (or -invoices when given), smallest first.
func parseSizes(list string, invoices int) ([]int, error) {
	if invoices > 0 {
		return []int{invoices}, nil
	}
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1000 {
			return nil, fmt.Errorf("-sizes: %q is no number of invoices of at least 1,000", f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// dbName is the database of a size: bench_1m for 1,000,000 (the name it
// had when there was one size, so a loaded database is kept), bench_100k.
func dbName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("bench_%dm", n/1_000_000)
	case n%1000 == 0:
		return fmt.Sprintf("bench_%dk", n/1000)
	}
	return fmt.Sprintf("bench_%d", n)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// harness holds what every phase shares.
type harness struct {
	o       options
	sets    []sized  // each size's database, smallest first
	largest bool     // the size measured now is the largest (the runs of earlier rounds are made there only)
	big     *dataset // the size measured now
	small   *dataset
	key     auth.NewKey // of the organization under test, in big
	keySm   auth.NewKey // and in bench_1k
	member  string      // the password of the portal's bench member in big
	cursor  string      // of page 1,000, walked through the API
	body    string      // a get answer, for the bare Echo
	run     string      // unique per run: invoice numbers and idempotency keys
	addrSeq atomic.Int64
	report  *report
	// What the scenarios that use up rows were given (prepareScenario).
	drafts    []uuid.UUID // finalize's drafts
	tills     []till      // terminal's terminals, each with its invoice
	customers []uuid.UUID // recurring's customers
	today     string      // and the day its series start, in the MIDs' time zone
	batch     atomic.Int64
}

// sized is one size's database, its key and its portal member's password.
type sized struct {
	ds     *dataset
	key    auth.NewKey
	member string
}

// use makes set the size measured from now on.
func (h *harness) use(i int) {
	h.big, h.key, h.member = h.sets[i].ds, h.sets[i].key, h.sets[i].member
	h.largest = i == len(h.sets)-1
	h.cursor, h.body = "", ""
}

func run(ctx context.Context, o options) error {
	t0 := time.Now()
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return err
	}
	admin, err := startCluster(ctx, o.dataDir)
	if err != nil {
		return err
	}
	// The bench servers share one set of secrets, made once.
	if _, err := os.Stat(filepath.Join(o.dataDir, app.PepperName)); errors.Is(err, fs.ErrNotExist) {
		if _, err := app.InitSecrets(o.dataDir); err != nil {
			return err
		}
	}
	h := &harness{o: o, run: fmt.Sprintf("%x", time.Now().UnixNano()), report: newReport(o)}
	load := filepath.Join(o.benchDir, "load.sql")
	for _, n := range o.sizes {
		name := dbName(n)
		if name == "bench_1k" {
			name = "bench_1k_sized" // bench_1k is the small database's, without the other organizations
		}
		ds, err := ensureData(ctx, admin, name, load, n, o.others, o.otherInvoices)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		s := sized{ds: ds}
		if s.key, s.member, err = h.prepare(ctx, ds); err != nil {
			return err
		}
		h.sets = append(h.sets, s)
	}
	if h.small, err = ensureData(ctx, admin, "bench_1k", load, o.smallInvoices, 0, 0); err != nil {
		return err
	}
	if h.keySm, _, err = h.prepare(ctx, h.small); err != nil {
		return err
	}
	// The plans and the profiles are the largest size's.
	h.use(len(h.sets) - 1)
	if err := h.explain(ctx); err != nil {
		return err
	}
	if o.profileDir != "" {
		return h.profile(ctx)
	}

	for s := range h.sets {
		h.use(s)
		h.report.begin(h.big.invoices)
		for i := range o.repeat {
			logf("%s invoices: round %d of %d", thousands(h.big.invoices), i+1, o.repeat)
			if err := h.round(ctx); err != nil {
				return err
			}
		}
	}

	h.report.elapsed = time.Since(t0)
	text := h.report.markdown()
	fmt.Println(text)
	if err := os.WriteFile(filepath.Join(filepath.Dir(o.out), "statements.txt"), []byte(h.report.statementsText()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(o.out, []byte(text), 0o644)
}

// round makes every run of the sequence once.
func (h *harness) round(ctx context.Context) error {
	o := h.o
	// (a) pgbench, with no server running; the soak's mix only for its
	// answer times at 70 % of its peak.
	for _, sc := range append(h.scenarios(), scenario{key: "mixed"}) {
		if !h.wanted(sc.key) || !h.runs("pgbench") || !hasPgbench(sc.key) {
			continue
		}
		res, err := h.pgbench(ctx, sc.key, "pgbench", 0, "")
		if err != nil {
			return err
		}
		if (sc.key != "create" && sc.key != "get" && sc.key != "mixed") || res.requests == 0 || !h.runs("open") {
			continue
		}
		// The database's own answer times at 70 % of its peak, for payreq's.
		if _, err := h.pgbench(ctx, sc.key, "pgbench70", 0.7*res.rate(), ""); err != nil {
			return err
		}
	}

	// The server as it runs in service, then (b) without request
	// validation, then with unnamed statements (as behind PgBouncer's
	// transaction pooling), then with events delivered to a webhook
	// endpoint subscribed to every type.
	for _, variant := range []string{"payreq", "novalidate", "unprepared", "events"} {
		if !h.runs(variant) {
			continue
		}
		var extra []string
		switch variant {
		case "unprepared":
			extra = append(extra, "PAYREQ_DB_PREPARED_STATEMENTS=false")
		case "events":
			extra = append(extra, "PAYREQ_WEBHOOK_ALLOW_PRIVATE=true")
		}
		p, err := h.startPayreq(h.big, variant, variant != "novalidate", "", extra...)
		if err != nil {
			return err
		}
		if variant == "events" {
			err = h.eventsPhase(ctx, p)
		} else {
			err = h.serverPhase(ctx, p, variant)
		}
		p.stop()
		if err != nil {
			return err
		}
		if err := h.quiesce(ctx, h.big); err != nil {
			return err
		}
	}

	// The database on a core of its own: PostgreSQL on CPU 0; pgbench, or
	// payreq and this load program, on CPU 1.
	if h.runs("pinned") && runtime.NumCPU() >= 2 {
		if err := h.pinnedPhase(ctx); err != nil {
			return err
		}
	}

	// Get by id with 1,000 invoices in the database.
	if h.wanted("get") && h.runs("small") {
		p, err := h.startPayreq(h.small, "small", true, "")
		if err != nil {
			return err
		}
		tok, err := h.token(ctx, p.url, h.keySm)
		if err == nil {
			sc := h.scenario("get", h.small, p.url, tok)
			logf("payreq    get at %d invoices", o.smallInvoices)
			var res result
			var rss int64
			res, rss, err = h.measure(ctx, p, h.small, func() result { return closedLoop(ctx, p.url, o.clients, o.warmup, o.window, sc.next) })
			h.report.add("get", "small", res, rss)
		}
		p.stop()
		if err != nil {
			return err
		}
	}

	// (c) a bare Echo handler answering a get's bytes.
	if h.wanted("get") && h.body != "" && h.runs("echo") {
		bodyFile := filepath.Join(o.dataDir, "get-answer.json")
		if err := os.WriteFile(bodyFile, []byte(h.body), 0o644); err != nil {
			return err
		}
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		p, err := start("echo", o.echoBin, []string{"-addr", addr, "-body", bodyFile}, nil, addr, "", filepath.Join(o.dataDir, "echo.log"), "/payment-requests/x")
		if err != nil {
			return err
		}
		sc := h.scenario("get", h.big, p.url, "x")
		logf("echo      get (fixed body of %d bytes)", len(h.body))
		res, rss, _ := h.measure(ctx, p, nil, func() result { return closedLoop(ctx, p.url, o.clients, o.warmup, o.window, sc.next) })
		h.report.add("get", "echo", res, rss)
		p.stop()
	}

	return nil
}

// everySize are the runs the third round's targets need, made at every
// size; the others are made at the largest only.
var everySize = []string{"pgbench", "payreq", "portal", "events", "pinned", "echo"}

// everySizeScenarios are the scenarios of the third round's targets,
// measured at every size; the others at the largest only.
var everySizeScenarios = []string{"get", "create", "list_first", "deposits", "portal_list", "portal_get", "portal_deposits"}

// runs says whether -runs asks for this kind of run (portal: the portal's
// pages, measured against the payreq run's server) at the size measured now.
func (h *harness) runs(name string) bool {
	if !h.largest && !slices.Contains(everySize, name) {
		return false
	}
	return h.o.runs == "" || slices.Contains(strings.Split(h.o.runs, ","), name)
}

// wanted says whether -only asks for this scenario at the size measured now.
func (h *harness) wanted(key string) bool {
	if !h.largest && !slices.Contains(everySizeScenarios, key) {
		return false
	}
	if h.o.only == "" {
		return true
	}
	for _, k := range strings.Split(h.o.only, ",") {
		if strings.TrimSpace(k) == key {
			return true
		}
	}
	return false
}

// serverPhase runs every scenario against one payreq server; the server as
// in service also runs the open-loop, high-connection and soak runs.
func (h *harness) serverPhase(ctx context.Context, p *process, variant string) error {
	o := h.o
	tok, err := h.token(ctx, p.url, h.key)
	if err != nil {
		return err
	}
	if h.cursor == "" && h.wanted("list_deep") {
		logf("walking to page 1,000 of the list")
		if h.cursor, err = walk(ctx, p.url, tok, 1000); err != nil {
			return err
		}
	}
	for _, sc := range h.scenarios() {
		if !h.wanted(sc.key) || (isPortal(sc.key) && (variant != "payreq" || !h.runs("portal"))) {
			continue
		}
		if sc, err = h.scenarioFor(ctx, sc.key, p.url); err != nil {
			return err
		}
		// As before each pgbench run: what the last scenario left to
		// the background (dirty pages, autovacuum) is done before this
		// one is measured.
		if err := h.quiesce(ctx, h.big); err != nil {
			return err
		}
		logf("%-9s %-12s %d clients", variant, sc.key, o.clients)
		res, rss, err := h.measure(ctx, p, h.big, func() result { return closedLoop(ctx, p.url, o.clients, o.warmup, o.window, sc.next) })
		if err != nil {
			return err
		}
		h.report.add(sc.key, variant, res, rss)
		if variant != "payreq" || (sc.key != "create" && sc.key != "get") || res.requests == 0 || !h.runs("open") {
			continue
		}
		// At 70 % of the peak rate, the answer times are what a client sees.
		rate := 0.7 * res.rate()
		logf("%-9s %-12s open loop at %.0f/s", variant, sc.key, rate)
		open := openLoop(ctx, p.url, 4*o.clients, rate, o.warmup, o.window, sc.next)
		h.report.add(sc.key, "open70", open, 0)
	}
	if variant != "payreq" {
		return nil
	}
	if h.wanted("mixed") && h.runs("open") {
		// The soak's mix: its peak, then 70 % of it in an open loop.
		if tok, err = h.token(ctx, p.url, h.key); err != nil {
			return err
		}
		sc := h.scenario("mixed", h.big, p.url, tok)
		if err := h.quiesce(ctx, h.big); err != nil {
			return err
		}
		logf("%-9s mixed        %d clients", variant, o.clients)
		res, rss, err := h.measure(ctx, p, h.big, func() result { return closedLoop(ctx, p.url, o.clients, o.warmup, o.window, sc.next) })
		if err != nil {
			return err
		}
		h.report.add("mixed", variant, res, rss)
		logf("%-9s mixed        open loop at %.0f/s", variant, 0.7*res.rate())
		h.report.add("mixed", "open70", openLoop(ctx, p.url, 4*o.clients, 0.7*res.rate(), o.warmup, o.window, sc.next), 0)
	}
	if !h.wanted("get") {
		return nil
	}
	if tok, err = h.token(ctx, p.url, h.key); err != nil {
		return err
	}
	sc := h.scenario("get", h.big, p.url, tok)
	if h.body, err = h.getBody(ctx, p.url, sc.next(0)); err != nil {
		return err
	}
	if h.runs("high") {
		if err := h.quiesce(ctx, h.big); err != nil {
			return err
		}
		logf("%-9s get          %d clients (peak RSS)", variant, o.highClients)
		res, rss, err := h.measure(ctx, p, h.big, func() result { return closedLoop(ctx, p.url, o.highClients, o.warmup, o.window, sc.next) })
		if err != nil {
			return err
		}
		h.report.add("get", "high", res, rss)
	}
	return nil
}

// scenarioFor is scenario key against the server at base with a fresh
// token (they live 10 minutes), or for a portal page a fresh session, and
// the rows it uses up made (prepareScenario).
func (h *harness) scenarioFor(ctx context.Context, key, base string) (scenario, error) {
	if isPortal(key) {
		cookie, err := h.signIn(ctx, base, h.member)
		if err != nil {
			return scenario{}, err
		}
		return h.scenario(key, h.big, base, cookie), nil
	}
	tok, err := h.token(ctx, base, h.key)
	if err != nil {
		return scenario{}, err
	}
	if err := h.prepareScenario(ctx, key, base, tok); err != nil {
		return scenario{}, fmt.Errorf("%s: %w", key, err)
	}
	return h.scenario(key, h.big, base, tok), nil
}

// getBody is the bytes of a get's answer, for the bare Echo to send.
func (h *harness) getBody(ctx context.Context, base string, rq request) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, rq.method, base+rq.path, nil)
	req.Header = rq.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("get: %d %s", resp.StatusCode, b)
	}
	return string(b), err
}

// startPayreq starts `payreq serve` on ds, rate limits out of the way, the
// loopback trusted as a proxy (token requests each come from their own
// X-Forwarded-For address, under the 30/minute/address limit); pprof on a
// loopback port when profiling; on cpus (taskset) unless empty.
func (h *harness) startPayreq(ds *dataset, name string, validate bool, cpus string, extra ...string) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	debug, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := []string{
		"DATABASE_URL=" + ds.dsn,
		"PAYREQ_ADDR=" + addr,
		"PAYREQ_PUBLIC_URL=http://" + addr,
		"PAYREQ_DATA_DIR=" + h.o.dataDir,
		"PAYREQ_RATE_LIMIT=1000000000",
		"PAYREQ_RATE_BURST=1000000000",
		"PAYREQ_TRUSTED_PROXIES=127.0.0.1/32",
		"PAYREQ_LOG_LEVEL=info",
		// The recurring worker looks for due occurrences every second (not
		// every 10), so that the recurring scenario's series are issued
		// within a second of their creation.
		"PAYREQ_SCHEDULE_POLL_INTERVAL=1s",
		fmt.Sprintf("PAYREQ_VALIDATE_REQUESTS=%t", validate),
	}
	env = append(env, extra...)
	if h.o.profileDir != "" {
		env = append(env, "PAYREQ_DEBUG_ADDR="+debug)
	}
	bin, args := h.o.payreqBin, []string{"serve"}
	if cpus != "" {
		bin, args = "taskset", []string{"-c", cpus, h.o.payreqBin, "serve"}
	}
	return start(name, bin, args, env, addr, debug, filepath.Join(h.o.dataDir, "server-"+name+".log"), "/healthz")
}

// prepare makes a key of the organization under test, with the bench
// server's pepper (app.Open reads the same secrets as payreq serve), and
// the portal's bench member (portalMember), whose password it returns.
func (h *harness) prepare(ctx context.Context, ds *dataset) (auth.NewKey, string, error) {
	cfg, err := config.FromEnv()
	if err != nil {
		return auth.NewKey{}, "", err
	}
	cfg.DatabaseURL, cfg.DataDir = ds.dsn, h.o.dataDir
	cfg.PepperFile = filepath.Join(h.o.dataDir, "pepper")
	cfg.SigningKeyFile = filepath.Join(h.o.dataDir, "signing-key.pem")
	cfg.EncryptionKeyFile = filepath.Join(h.o.dataDir, "encryption-key")
	a, err := app.Open(ctx, cfg, app.Options{})
	if err != nil {
		return auth.NewKey{}, "", err
	}
	defer a.Close()
	if _, err := a.DB.ExecContext(ctx, `DELETE FROM api_keys WHERE name = 'bench load'`); err != nil {
		return auth.NewKey{}, "", err
	}
	owner, err := a.People.Owner(ctx, ds.org)
	if err != nil {
		return auth.NewKey{}, "", fmt.Errorf("the owner of the organization under test: %w", err)
	}
	key, _, err := a.Auth.CreateKey(ctx, nil, owner.ID, "bench load", auth.PermissionsFor(auth.KindMerchant), nil)
	if err != nil {
		return auth.NewKey{}, "", fmt.Errorf("bench key: %w", err)
	}
	member, err := portalMember(ctx, a, ds)
	if err != nil {
		return auth.NewKey{}, "", fmt.Errorf("portal member: %w", err)
	}
	// A SIM-OK terminal a client of the terminal scenario (the reset
	// removed the last run's).
	ds.terminals = nil
	for i := range h.o.clients {
		t, err := a.Terminals.Add(ctx, terminal.NewTerminal{MerchantAccountID: ds.mids[i%len(ds.mids)],
			HSN: fmt.Sprintf("%sBENCH-%d", processor.SimTerminalOK, i), Name: fmt.Sprintf("Bench %d", i)})
		if err != nil {
			return auth.NewKey{}, "", fmt.Errorf("bench terminal: %w", err)
		}
		ds.terminals = append(ds.terminals, t)
	}
	return key, member, nil
}

// quiesce leaves the database as the next run should find it: no message
// waiting for a worker (pgbench's and the last server's sends), no webhook
// endpoint (the events run's), no files, and what the last run wrote
// vacuumed, analyzed and checkpointed, so that no autovacuum or checkpoint
// it set off is counted in the next run's database CPU. (Between a
// server's scenarios there was none: its first list page after a create
// run counted 57–87 µs a request of background processes, pgbench's 1 µs.)
func (h *harness) quiesce(ctx context.Context, ds *dataset) error {
	db, err := sqlx.Open("postgres", ds.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `UPDATE outbox SET cancelled_at = now()
		WHERE delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL;
		DELETE FROM webhook_endpoints`)
	if err != nil {
		return fmt.Errorf("quiesce: %w", err)
	}
	_, err = db.ExecContext(ctx, `VACUUM (ANALYZE) invoices, invoice_lines, idempotency_keys, events, outbox,
		token_requests, webhook_deliveries`)
	if err != nil {
		return fmt.Errorf("quiesce: %w", err)
	}
	_, err = db.ExecContext(ctx, `CHECKPOINT`)
	if err != nil {
		return fmt.Errorf("quiesce: %w", err)
	}
	return os.RemoveAll(filepath.Join(h.o.dataDir, "outbox"))
}

// token exchanges the key for an access token.
func (h *harness) token(ctx context.Context, base string, key auth.NewKey) (string, error) {
	rq := h.tokenRequest(key)
	req, _ := http.NewRequestWithContext(ctx, rq.method, base+rq.path, strings.NewReader(string(rq.body)))
	req.Header = rq.header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("token: %d %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.AccessToken, nil
}

// walk follows the list's Link headers to page n and returns its cursor.
func walk(ctx context.Context, base, token string, n int) (string, error) {
	next := base + "/payment-requests?limit=25"
	cursor := ""
	for page := 1; page < n; page++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", next, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		link := resp.Header.Get("Link")
		start, end := strings.IndexByte(link, '<'), strings.IndexByte(link, '>')
		if resp.StatusCode != http.StatusOK || start < 0 || end < start {
			return "", fmt.Errorf("list page %d: status %d, Link %q", page, resp.StatusCode, link)
		}
		next = link[start+1 : end]
		u, err := url.Parse(next)
		if err != nil {
			return "", err
		}
		cursor = u.Query().Get("cursor")
		next = base + u.RequestURI()
	}
	return cursor, nil
}

func mustBin(name string) string {
	p, err := pgBin(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	return p
}
