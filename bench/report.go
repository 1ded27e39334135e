package main

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// cell is one measured run: a scenario against one target.
type cell struct {
	res result
	rss int64
}

// Targets of the runs, as runNames says; and echo (c), open70 (payreq at
// 70 % of peak) and pgbench70.
type report struct {
	o         options
	sizes     []*sizeRuns // each size's runs, in the order measured
	*sizeRuns             // the size measured now
	elapsed   time.Duration
	loadStart string
}

// sizeRuns are the runs made at one size (invoices of the organization
// under test).
type sizeRuns struct {
	invoices  int
	loadStart string                       // the load average when its first round began
	cells     map[string]map[string][]cell // each round's
	delivered map[string][]int64           // webhook deliveries received in the events runs
	drained   map[string][]time.Duration   // and how long the deliveries left after each took
}

func newSizeRuns(invoices int) *sizeRuns {
	return &sizeRuns{invoices: invoices, loadStart: loadAverage(), cells: map[string]map[string][]cell{},
		delivered: map[string][]int64{}, drained: map[string][]time.Duration{}}
}

func newReport(o options) *report {
	// Runs made before any size begins (profiles) go to a size of their own.
	return &report{o: o, sizeRuns: newSizeRuns(o.sizes[len(o.sizes)-1]), loadStart: loadAverage()}
}

// begin makes the runs from now on those of a size of invoices.
func (r *report) begin(invoices int) {
	r.sizeRuns = newSizeRuns(invoices)
	r.sizes = append(r.sizes, r.sizeRuns)
}

// loadAverage is the machine's 1-minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

func (r *sizeRuns) add(key, target string, res result, rss int64) {
	if r.cells[key] == nil {
		r.cells[key] = map[string][]cell{}
	}
	r.cells[key][target] = append(r.cells[key][target], cell{res: res, rss: rss})
	msg := fmt.Sprintf("          %-12s %-10s %8.0f/s  p50 %s  p99 %s", key, target, res.rate(), ms(res.p50), ms(res.p99))
	if rss > 0 {
		msg += "  peak RSS " + mb(rss)
	}
	if res.requests > 0 && (res.cpu > 0 || res.dbCPU > 0) {
		msg += fmt.Sprintf("  CPU/req: database %s (sessions %s), server %s, load %s; statements' exec/req %s",
			us(res.perRequest(res.dbCPU)), us(res.perRequest(res.sessionsCPU)), us(res.perRequest(res.cpu)), us(res.perRequest(res.loadCPU)), us(res.perRequest(res.stmts.exec)))
	}
	if res.errors > 0 {
		msg += fmt.Sprintf("  %d ERRORS, first: %s", res.errors, res.firstErr)
	}
	logf("%s", strings.TrimSpace(msg))
}

// runOrder are the closed-loop runs in the order the tables show them.
var runOrder = []string{"pgbench", "payreq", "novalidate", "unprepared", "events", "pgbench-pinned", "pinned", "small", "high"}

var runNames = map[string]string{
	"pgbench": "(a) pgbench", "payreq": "payreq", "novalidate": "(b) no validation",
	"unprepared": "unnamed statements", "events": "events on", "pgbench-pinned": "(a) pgbench, database on CPU 0",
	"pinned": "payreq, database on CPU 0", "small": "1,000 invoices", "high": "256 connections",
}

// costPerRequest is the server's and the database's CPU per request (the
// database's alone for pgbench).
func costPerRequest(c cell) time.Duration { return c.res.perRequest(c.res.cpu + c.res.dbCPU) }

// get is a run's cell: over several rounds, each figure is its median,
// and the statements are those of the round of the median rate.
func (r *sizeRuns) get(key, target string) (cell, bool) {
	rounds := r.cells[key][target]
	if len(rounds) == 0 {
		return cell{}, false
	}
	med := func(f func(c cell) float64) float64 {
		v := make([]float64, len(rounds))
		for i, c := range rounds {
			v[i] = f(c)
		}
		return median(v)
	}
	byRate := slices.Clone(rounds)
	slices.SortFunc(byRate, func(a, b cell) int { return cmp.Compare(a.res.rate(), b.res.rate()) })
	c := byRate[(len(byRate)-1)/2]
	dur := func(f func(c cell) time.Duration) time.Duration {
		return time.Duration(med(func(c cell) float64 { return float64(f(c)) }))
	}
	// CPU times stay totals over the median run's requests.
	perReq := func(f func(c cell) time.Duration) time.Duration {
		return time.Duration(med(func(x cell) float64 { return float64(x.res.perRequest(f(x))) }) * float64(c.res.requests))
	}
	c.res.p50 = dur(func(c cell) time.Duration { return c.res.p50 })
	c.res.p99 = dur(func(c cell) time.Duration { return c.res.p99 })
	c.res.cpu = perReq(func(c cell) time.Duration { return c.res.cpu })
	c.res.dbCPU = perReq(func(c cell) time.Duration { return c.res.dbCPU })
	c.res.sessionsCPU = perReq(func(c cell) time.Duration { return c.res.sessionsCPU })
	c.res.loadCPU = perReq(func(c cell) time.Duration { return c.res.loadCPU })
	c.rss = int64(med(func(c cell) float64 { return float64(c.rss) }))
	return c, c.res.requests > 0
}

// median of v (the lower middle one of an even count).
func median(v []float64) float64 {
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
func mb(b int64) string         { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1000) }

func ratio(a, b cell) string { return fmt.Sprintf("%.2f", a.res.rate()/b.res.rate()) }

// fourthRound says how the fourth round's paths are measured.
const fourthRound = "The fourth round's paths (decisions.md, \"Performance after the third round\"): PATCH changes the memo " +
	"of one of the 25,000 newest open invoices with nothing paid; the customer search asks `GET " +
	"/customers?q=` for a name one customer holds; finalize opens one of the drafts made for its run " +
	"(copies of an open invoice's three lines, `send: false`). Two wait on a worker after their answer, " +
	"the client sending its next request once the outcome is there (read every 200 ms with a GET, which " +
	"the server CPU and the statements count; the answer times are the 202's or 201's alone): a terminal " +
	"payment of 1.00 at the client's own `SIM-OK-` terminal (the simulator approves after 2 s; the worker " +
	"records the approval), and a recurring invoice created to issue once, today, its invoice issued and " +
	"sent by the worker (which the bench's servers run every second, `PAYREQ_SCHEDULE_POLL_INTERVAL=1s`, " +
	"not every 10). Their rates are bounded by that wait, not by the server. The recurring invoice's " +
	"automatic charge is not measured (it is not built yet)."

// markdown is the results page: the third round's targets at every size,
// then each size's tables and the earlier rounds' targets.
func (r *report) markdown() string {
	var b strings.Builder
	o := r.o
	sizes := make([]string, len(r.sizes))
	for i, s := range r.sizes {
		sizes[i] = thousands(s.invoices)
	}
	fmt.Fprintf(&b, "# payreq benchmark results\n\n")
	fmt.Fprintf(&b, "Written by `make bench` on %s. Machine: %s. Server, load and database on this one machine.\n\n",
		time.Now().UTC().Format("2006-01-02"), machine())
	fmt.Fprintf(&b, "Data: at each size (%s invoices of 1–5 lines across 20 MIDs for the organization under test; a database each), "+
		"%d other organizations with %s invoices each. Each run: %d connections over loopback, %s warm-up, %s measured; the tables a run "+
		"starts empty (events, deliveries, idempotency keys, the outbox) are analysed as the warm-up ends, as autovacuum would in a running "+
		"system, so that no plan made while they were empty is kept; rates are requests (or pgbench "+
		"transactions) per second; p50/p99 are answer times; peak RSS is the server's VmHWM during that run. "+
		"The runs the third round's targets need are made at every size, the others at the largest only.\n\n",
		strings.Join(sizes, " and "), o.others, thousands(o.otherInvoices), o.clients, o.warmup, o.window)
	b.WriteString(fourthRound + "\n\n")
	if o.repeat > 1 {
		fmt.Fprintf(&b, "Every run was made %d times, in %d rounds of the whole sequence at each size; each figure is the median of its %d "+
			"(the rate's and each CPU time's separately; the statements are those of the round of the median rate).\n\n",
			o.repeat, o.repeat, o.repeat)
	}
	fmt.Fprintf(&b, "Load average (1 min) at the start %s, at the end %s: anything else running on the machine takes from these figures. "+
		"The whole run took %s.\n\n", r.loadStart, loadAverage(), r.elapsed.Round(time.Second))
	r.thirdRound(&b)
	for _, s := range r.sizes {
		fmt.Fprintf(&b, "\n## At %s invoices\n\n", thousands(s.invoices))
		s.details(&b, o)
	}
	fmt.Fprintf(&b, "\nThe SQL of (a) is in bench/pgbench/; the list pages' plans (at %s invoices) are in bench/explain.txt.\n", thousands(o.sizes[len(o.sizes)-1]))
	// What was found by hand, kept from one run to the next: the list
	// page's database time (findings.md), the portal's pages in a browser
	// (lighthouse.md).
	for _, name := range []string{"findings.md", "lighthouse.md"} {
		if text, err := os.ReadFile(filepath.Join(o.benchDir, name)); err == nil {
			b.WriteString("\n")
			b.Write(text)
		}
	}
	return b.String()
}

// thirdRound is the table of the third round's targets (decisions:
// "Performance targets (third round)"), a column per size: each with its
// measured value, its limit, and met or not.
func (r *report) thirdRound(b *strings.Builder) {
	type target struct {
		name, limit string
		value       func(s *sizeRuns) (text string, met, ok bool)
	}
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	// server CPU per request of key ÷ the bare Echo handler's.
	serverVsEcho := func(key string, limit float64) func(s *sizeRuns) (string, bool, bool) {
		return func(s *sizeRuns) (string, bool, bool) {
			c, ok1 := s.get(key, "payreq")
			e, ok2 := s.get("get", "echo")
			if !ok1 || !ok2 || c.res.cpu == 0 || e.res.cpu == 0 {
				return "", false, false
			}
			x := float64(c.res.cpuPerRequest()) / float64(e.res.cpuPerRequest())
			return fmt.Sprintf("%s / %s = %.1f ×", us(c.res.cpuPerRequest()), us(e.res.cpuPerRequest()), x), x <= limit, true
		}
	}
	dbVsPgbench := func(key string) func(s *sizeRuns) (string, bool, bool) {
		return func(s *sizeRuns) (string, bool, bool) {
			c, ok1 := s.get(key, "payreq")
			a, ok2 := s.get(key, "pgbench")
			if !ok1 || !ok2 || c.res.dbCPU == 0 || a.res.dbCPU == 0 {
				return "", false, false
			}
			pc, pa := c.res.perRequest(c.res.dbCPU), a.res.perRequest(a.res.dbCPU)
			x := float64(pc) / float64(pa)
			return fmt.Sprintf("%s / %s = %.2f", us(pc), us(pa), x), x <= 1.15, true
		}
	}
	pinned := func(key string) func(s *sizeRuns) (string, bool, bool) {
		return func(s *sizeRuns) (string, bool, bool) {
			c, ok1 := s.get(key, "pinned")
			a, ok2 := s.get(key, "pgbench-pinned")
			if !ok1 || !ok2 {
				return "", false, false
			}
			x := c.res.rate() / a.res.rate()
			return fmt.Sprintf("%.0f / %.0f req/s = %.2f ×", c.res.rate(), a.res.rate(), x), x >= 0.85, true
		}
	}
	events := func(s *sizeRuns) (string, bool, bool) {
		c, ok1 := s.get("create", "payreq")
		e, ok2 := s.get("create", "events")
		if !ok1 || !ok2 {
			return "", false, false
		}
		loss := 1 - e.res.rate()/c.res.rate()
		return fmt.Sprintf("%.0f / %.0f req/s: loses %.0f %%", e.res.rate(), c.res.rate(), 100*loss), loss <= 0.10, true
	}
	portal := func(page, api string) func(s *sizeRuns) (string, bool, bool) {
		return func(s *sizeRuns) (string, bool, bool) {
			p, ok1 := s.get(page, "payreq")
			a, ok2 := s.get(api, "payreq")
			if !ok1 || !ok2 || p.res.cpu == 0 || a.res.cpu == 0 {
				return "", false, false
			}
			x := float64(p.res.cpuPerRequest()) / float64(a.res.cpuPerRequest())
			return fmt.Sprintf("%s / %s = %.2f ×", us(p.res.cpuPerRequest()), us(a.res.cpuPerRequest()), x), x <= 2, true
		}
	}
	targets := []target{
		{"server CPU per get / bare Echo answer (c)", "≤ 6 ×", serverVsEcho("get", 6)},
		{"server CPU per first list page / bare Echo", "≤ 12 ×", serverVsEcho("list_first", 12)},
		{"server CPU per create / bare Echo", "≤ 20 ×", serverVsEcho("create", 20)},
		{"database CPU per get, payreq / pgbench (a)", "≤ 1.15", dbVsPgbench("get")},
		{"database CPU per create, payreq / pgbench", "≤ 1.15", dbVsPgbench("create")},
		{"database CPU per first list page, payreq / pgbench", "≤ 1.15", dbVsPgbench("list_first")},
		{"get, database on its own core: payreq / pgbench rate", "≥ 0.85 ×", pinned("get")},
		{"create, database on its own core: payreq / pgbench rate", "≥ 0.85 ×", pinned("create")},
		{"events on: create's rate, on / off", "loses ≤ 10 %", events},
	}
	for _, pp := range portalPairs {
		targets = append(targets, target{fmt.Sprintf("server CPU, %s / %s", title(pp.page), pp.api), "≤ 2 ×", portal(pp.page, pp.api)})
	}
	b.WriteString("## Targets (third round)\n\n(../shared/decisions.md, \"Performance targets (third round)\": each side against its own limit, " +
		"in the same run, at each size. CPU times are per request over the measured window; the database's is every process of the cluster; " +
		"a portal page is asked for as a signed-in member's browser does, gzip accepted.)\n\n| Target | limit |")
	for _, s := range r.sizes {
		fmt.Fprintf(b, " %s invoices |", thousands(s.invoices))
	}
	b.WriteString("\n|---|---|")
	for range r.sizes {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, t := range targets {
		fmt.Fprintf(b, "| %s | %s |", t.name, t.limit)
		for _, s := range r.sizes {
			if text, met, ok := t.value(s); ok {
				fmt.Fprintf(b, " %s — %s |", text, check(met))
			} else {
				b.WriteString(" not measured |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| load average (1 min) when the size's runs began | – |")
	for _, s := range r.sizes {
		fmt.Fprintf(b, " %s |", s.loadStart)
	}
	b.WriteString("\n")
}

// details are the tables of one size's runs.
func (r *sizeRuns) details(b *strings.Builder, o options) {
	b.WriteString("| Scenario | req/s | p50 | p99 | × pgbench (a) | × no validation (b) | peak RSS | server CPU/req |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range scenarioTitles {
		c, ok := r.get(t.key, "payreq")
		if !ok {
			continue
		}
		xa, xb := "–", "–"
		if a, ok := r.get(t.key, "pgbench"); ok {
			xa = ratio(c, a)
		}
		if v, ok := r.get(t.key, "novalidate"); ok {
			xb = ratio(c, v)
		}
		fmt.Fprintf(b, "| %s | %.0f | %s | %s | %s | %s | %s | %s |\n", t.title, c.res.rate(), ms(c.res.p50), ms(c.res.p99), xa, xb, mb(c.rss), us(c.res.cpuPerRequest()))
	}
	if c, ok := r.get("get", "small"); ok {
		fmt.Fprintf(b, "| get invoice by id, %s invoices in the database | %.0f | %s | %s | – | – | %s | %s |\n",
			thousands(o.smallInvoices), c.res.rate(), ms(c.res.p50), ms(c.res.p99), mb(c.rss), us(c.res.cpuPerRequest()))
	}
	if c, ok := r.get("get", "high"); ok {
		fmt.Fprintf(b, "| get invoice by id, %d connections | %.0f | %s | %s | – | – | %s | %s |\n",
			o.highClients, c.res.rate(), ms(c.res.p50), ms(c.res.p99), mb(c.rss), us(c.res.cpuPerRequest()))
	}
	if c, ok := r.get("get", "echo"); ok {
		fmt.Fprintf(b, "| (c) bare Echo handler, a get's answer as a fixed body | %.0f | %s | %s | – | – | %s | %s |\n",
			c.res.rate(), ms(c.res.p50), ms(c.res.p99), mb(c.rss), us(c.res.cpuPerRequest()))
	}

	unprepared := false
	for _, t := range scenarioTitles {
		_, ok := r.get(t.key, "unprepared")
		unprepared = unprepared || ok
	}
	if unprepared {
		b.WriteString("\nWith `PAYREQ_DB_PREPARED_STATEMENTS=false` (every statement unnamed, as PgBouncer's transaction " +
			"pooling needs) beside the default (prepared per connection):\n\n| Scenario | prepared req/s | unnamed req/s | unnamed p99 | × prepared |\n|---|---:|---:|---:|---:|\n")
		for _, t := range scenarioTitles {
			c, okC := r.get(t.key, "payreq")
			u, okU := r.get(t.key, "unprepared")
			if !okC || !okU {
				continue
			}
			fmt.Fprintf(b, "| %s | %.0f | %.0f | %s | %s |\n", t.title, c.res.rate(), u.res.rate(), ms(u.res.p99), ratio(u, c))
		}
	}

	fmt.Fprintf(b, "\nBaselines of the same run:\n\n| Scenario | (a) pgbench tx/s | p50 | p99 | (b) no validation req/s | p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range scenarioTitles {
		a, okA := r.get(t.key, "pgbench")
		v, okV := r.get(t.key, "novalidate")
		if !okA && !okV {
			continue
		}
		cols := func(c cell, ok bool) string {
			if !ok {
				return "– | – | –"
			}
			return fmt.Sprintf("%.0f | %s | %s", c.res.rate(), ms(c.res.p50), ms(c.res.p99))
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", t.title, cols(a, okA), cols(v, okV))
	}

	fmt.Fprintf(b, "\nCPU time per request, read from /proc over the measured window (the warm-up, new connections' first plans included, left out): PostgreSQL (every process of the cluster), "+
		"the server, and the load program (pgbench itself for (a)); and what pg_stat_statements counted in the run "+
		"(statements per request, PostgreSQL's execution and planning time per request; the server's background "+
		"workers included; each statement in bench/statements.txt). The cost ratio is (server + database) under "+
		"payreq over the database under pgbench.\n\n"+
		"| Scenario | run | database | server | load | statements | exec | plan | cost ratio |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range scenarioTitles {
		a, okA := r.get(t.key, "pgbench")
		for _, target := range []string{"pgbench", "payreq", "unprepared", "events"} {
			c, ok := r.get(t.key, target)
			if !ok || c.res.dbCPU == 0 {
				continue
			}
			res := c.res
			server, cost := "–", "–"
			if res.cpu > 0 {
				server = us(res.perRequest(res.cpu))
				if okA && a.res.dbCPU > 0 {
					cost = fmt.Sprintf("%.2f", float64(costPerRequest(c))/float64(costPerRequest(a)))
				}
			}
			st := res.stmts
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %.2f | %s | %s | %s |\n", t.title, runNames[target],
				us(res.perRequest(res.dbCPU)), server, us(res.perRequest(res.loadCPU)),
				float64(st.calls)/float64(max(res.requests, 1)), us(res.perRequest(st.exec)), us(res.perRequest(st.plan)), cost)
		}
	}

	// The open-loop table, when a run made one of its rows.
	var open strings.Builder
	for _, key := range []string{"mixed", "create", "get"} {
		_, opened := r.get(key, "open70")
		if c, ok := r.get(key, "payreq"); ok && opened && key == "mixed" {
			fmt.Fprintf(&open, "| %s | payreq, peak (closed loop) | %.0f/s | %s | %s | %.1f |\n", title(key),
				c.res.rate(), ms(c.res.p50), ms(c.res.p99), float64(c.res.p99)/float64(max(c.res.p50, 1)))
		}
		for _, target := range []string{"open70", "pgbench70"} {
			if c, ok := r.get(key, target); ok {
				fmt.Fprintf(&open, "| %s | %s | %.0f/s | %s | %s | %.1f |\n", title(key), map[string]string{"open70": "payreq", "pgbench70": "(a) pgbench"}[target],
					c.res.rate(), ms(c.res.p50), ms(c.res.p99), float64(c.res.p99)/float64(max(c.res.p50, 1)))
			}
		}
	}
	if open.Len() > 0 {
		fmt.Fprintf(b, "\nOpen loop at 70 %% of the peak rate, requests falling due at random (Poisson) as with pgbench -R; "+
			"latency counted from when each request was due:\n\n| Scenario | run | rate | p50 | p99 | p99 / p50 |\n|---|---|---:|---:|---:|---:|\n%s", open.String())
	}

	if len(r.cells["get"]["pinned"])+len(r.cells["create"]["pinned"])+len(r.cells["list_first"]["pinned"]) > 0 {
		b.WriteString("\nThe database on a core of its own (taskset: PostgreSQL on CPU 0; pgbench, or payreq and this load program, on CPU 1):\n\n" +
			"| Scenario | (a) pgbench tx/s | database CPU/tx | payreq req/s | database CPU/req | server CPU/req | load CPU/req | × pgbench |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, key := range []string{"get", "create", "list_first"} {
			a, okA := r.get(key, "pgbench-pinned")
			c, okC := r.get(key, "pinned")
			if okA && okC {
				fmt.Fprintf(b, "| %s | %.0f | %s | %.0f | %s | %s | %s | %s |\n", title(key), a.res.rate(), us(a.res.perRequest(a.res.dbCPU)),
					c.res.rate(), us(c.res.perRequest(c.res.dbCPU)), us(c.res.cpuPerRequest()), us(c.res.perRequest(c.res.loadCPU)), ratio(c, a))
			}
		}
	}

	if _, ok := r.get("create", "events"); ok {
		b.WriteString("\nWith events on (one webhook endpoint subscribed to every type, on a receiver in the load program answering 204; " +
			"the server's delivery worker sends them during the run; what it has not sent by the run's end is delivered before the next run, in the time shown):\n\n" +
			"| Scenario | events off req/s | events on req/s | × off | requests in the run | deliveries received in it | left, delivered in | p99 on |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, key := range []string{"create", "get"} {
			c, okC := r.get(key, "payreq")
			e, okE := r.get(key, "events")
			if okC && okE {
				delivered := make([]float64, len(r.delivered[key]))
				for i, d := range r.delivered[key] {
					delivered[i] = float64(d)
				}
				drained := make([]float64, len(r.drained[key]))
				for i, d := range r.drained[key] {
					drained[i] = d.Seconds()
				}
				fmt.Fprintf(b, "| %s | %.0f | %.0f | %s | %d | %.0f | %.1f s | %s |\n", title(key), c.res.rate(), e.res.rate(), ratio(e, c),
					e.res.all, median(delivered), median(drained), ms(e.res.p99))
			}
		}
	}

	b.WriteString("\nEarlier rounds' targets (the cost ratio is the second round's, replaced by the third round's above):\n\n")
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	for _, t := range []struct {
		key   string
		limit float64
	}{{"get", 2.0}, {"create", 1.6}, {"list_first", 1.3}} {
		c, ok1 := r.get(t.key, "payreq")
		a, ok2 := r.get(t.key, "pgbench")
		if ok1 && ok2 && a.res.dbCPU > 0 {
			x := float64(costPerRequest(c)) / float64(costPerRequest(a))
			fmt.Fprintf(b, "- cost ratio, %s: %.2f (%s server + %s database against %s) ≤ %.1f — %s\n", t.key, x,
				us(c.res.cpuPerRequest()), us(c.res.perRequest(c.res.dbCPU)), us(costPerRequest(a)), t.limit, check(x <= t.limit))
		}
	}
	for _, key := range []string{"get", "create"} {
		c, ok1 := r.get(key, "pinned")
		a, ok2 := r.get(key, "pgbench-pinned")
		if ok1 && ok2 {
			x := c.res.rate() / a.res.rate()
			fmt.Fprintf(b, "- %s with the database on a core of its own: %.2f × pgbench ≥ 0.85 — %s\n", key, x, check(x >= 0.85))
		}
	}
	if c, ok := r.get("mixed", "open70"); ok {
		fmt.Fprintf(b, "- p99 of the soak's mix at 70 %% of its peak: %s ≤ 10 ms — %s", ms(c.res.p99), check(c.res.p99 <= 10*time.Millisecond))
		if a, ok := r.get("mixed", "pgbench70"); ok {
			fmt.Fprintf(b, " (pgbench running the same mix's SQL at 70 %% of its own peak: p99 %s)", ms(a.res.p99))
		}
		b.WriteString("\n")
	}
	for _, t := range []struct {
		key  string
		loss float64
		what string
	}{{"create", 0.10, "at most 10 %"}, {"get", 0.05, "nothing (within 5 %, the runs' noise)"}} {
		c, ok1 := r.get(t.key, "payreq")
		e, ok2 := r.get(t.key, "events")
		if ok1 && ok2 {
			loss := 1 - e.res.rate()/c.res.rate()
			fmt.Fprintf(b, "- with events on, %s loses %s: %.0f %% — %s\n", t.key, t.what, 100*loss, check(loss <= t.loss))
		}
	}
	worst, worstKey := 0.0, ""
	for _, t := range scenarioTitles {
		c, ok1 := r.get(t.key, "payreq")
		v, ok2 := r.get(t.key, "novalidate")
		if ok1 && ok2 {
			if cost := 1 - c.res.rate()/v.res.rate(); cost > worst || worstKey == "" {
				worst, worstKey = cost, t.key
			}
		}
	}
	if worstKey != "" {
		fmt.Fprintf(b, "- validator cost < 15 %% of throughput: at most %.0f %% (%s) — %s\n", 100*worst, worstKey, check(worst < 0.15))
	}
	if p1, ok1 := r.get("list_first", "payreq"); ok1 {
		if pk, ok2 := r.get("list_deep", "payreq"); ok2 {
			x := p1.res.rate() / pk.res.rate()
			fmt.Fprintf(b, "- list page 1,000 within 1.5 × page 1: page 1 is %.2f × page 1,000 — %s\n", x, check(x <= 1.5))
		}
	}
	if big, ok1 := r.get("get", "payreq"); ok1 {
		if sm, ok2 := r.get("get", "small"); ok2 {
			x := sm.res.rate() / big.res.rate()
			fmt.Fprintf(b, "- get at %s within 1.2 × its rate at %s: %.2f × — %s\n", thousands(r.invoices), thousands(o.smallInvoices), x, check(x <= 1.2))
		}
	}
	if c, ok := r.get("get", "high"); ok {
		fmt.Fprintf(b, "- peak RSS < 150 MB with %d connections: %s — %s\n", o.highClients, mb(c.rss), check(c.rss < 150<<20))
	}
	b.WriteString("- no growth in goroutines or heap over a 5-minute run: checked by `make soak` (internal/faults TestSoak), not here\n")
	for key, targets := range r.cells {
		for target, rounds := range targets {
			for _, c := range rounds {
				if c.res.errors > 0 {
					fmt.Fprintf(b, "\nErrors: %s against %s: %d, first: %s\n", key, target, c.res.errors, c.res.firstErr)
				}
			}
		}
	}
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// machine describes this computer: CPU, cores, memory, PostgreSQL and Go.
func machine() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
		f.Close()
	}
	mem := ""
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
				mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
			}
		}
		f.Close()
	}
	pg := "PostgreSQL"
	if p, err := pgBin("postgres"); err == nil {
		if out, err := exec.Command(p, "--version").Output(); err == nil {
			pg = strings.TrimSpace(strings.TrimPrefix(string(out), "postgres (PostgreSQL) "))
			pg = "PostgreSQL " + pg
		}
	}
	return fmt.Sprintf("%d cores (%s)%s, %s, %s", runtime.NumCPU(), cpu, mem, pg, runtime.Version())
}
