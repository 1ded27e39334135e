// Command lighthouse measures the portal's pages with Lighthouse on its
// mobile form factor (make lighthouse, which make bench runs first): it
// starts `payreq serve` on a private cluster of its own under -data, seeds
// a demo as `make run` does (payreq demo) and fills its merchant as a busy
// one is (invoices with lines, card sales, recorded payments, a deposit),
// signs the merchant's Owner in through the portal's sign-in form (its
// second step too when -totp-secret is given), and runs Lighthouse's
// performance category on each page with the session's cookie. It writes
// the table to -out (bench/lighthouse.md), which bench/results.md takes in.
//
// Lighthouse is a timing measurement: it belongs here, never in make test.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pquerna/otp/totp"
)

type options struct {
	payreq, data, lighthouse, chrome, out, totpSecret string
	runs                                              int
}

func main() {
	var o options
	flag.StringVar(&o.payreq, "payreq", "bin/payreq", "the payreq binary")
	flag.StringVar(&o.data, "data", ".data/lighthouse", "the data directory of the private cluster it starts (PAYREQ_DATA_DIR)")
	flag.StringVar(&o.lighthouse, "lighthouse", ".tools/lighthouse/node_modules/.bin/lighthouse", "the lighthouse command (12.2.3, make lighthouse installs it)")
	flag.StringVar(&o.chrome, "chrome", "/usr/bin/chromium", "Chromium, for CHROME_PATH")
	flag.StringVar(&o.out, "out", "bench/lighthouse.md", "the Markdown table it writes")
	flag.StringVar(&o.totpSecret, "totp-secret", "", "the member's second-factor secret, when it has one")
	flag.IntVar(&o.runs, "runs", 3, "Lighthouse runs per page; the table shows the median by score, then by LCP")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "lighthouse:", err)
		os.Exit(1)
	}
}

// page is one page measured: its name and path.
type page struct{ name, path string }

// result is what Lighthouse measured of a page.
type result struct {
	page
	score              float64 // 0 to 100
	fcp, lcp, tbt, cls float64 // ms, ms, ms, unitless
	bytes              float64 // transfer size
	benchmarkIndex     float64 // Lighthouse's measure of the machine's speed at the time
	fcpText, lcpText   string
	tbtText, clsText   string
	opportunities      []string
}

func run(o options) error {
	for _, f := range []string{o.payreq, o.lighthouse, o.chrome} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%s: %w (make lighthouse builds and installs what it needs)", f, err)
		}
	}
	if err := os.MkdirAll(o.data, 0o755); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	l.Close()
	base := "http://" + addr
	env := append(os.Environ(), "PAYREQ_DATA_DIR="+o.data, "PAYREQ_ADDR="+addr, "PAYREQ_PUBLIC_URL="+base, "DATABASE_URL=")
	defer func() {
		// The cluster stays on disk for the next run, stopped.
		cmd := exec.Command(o.payreq, "db-stop")
		cmd.Env = env
		cmd.Run()
	}()

	logFile, err := os.Create(filepath.Join(o.data, "serve.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	serve := exec.Command(o.payreq, "serve")
	serve.Env, serve.Stdout, serve.Stderr = env, logFile, logFile
	if err := serve.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	defer func() {
		serve.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	if err := waitReady(base+"/portal/sign-in", exited); err != nil {
		return fmt.Errorf("payreq serve (log in %s): %w", logFile.Name(), err)
	}

	demo := exec.Command(o.payreq, "demo", "--json")
	demo.Env, demo.Stderr = env, os.Stderr
	out, err := demo.Output()
	if err != nil {
		return fmt.Errorf("payreq demo: %w", err)
	}
	var seed struct {
		Merchant struct {
			OrganizationID, KeyID, Secret, OwnerEmail, OwnerPassword string
		}
	}
	if err := json.Unmarshal(out, &seed); err != nil {
		return fmt.Errorf("payreq demo --json: %w", err)
	}
	m := seed.Merchant
	c := newClient()
	invoice, err := fill(c, base, m.KeyID, m.Secret)
	if err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	settle := exec.Command(o.payreq, "settle", "--org", m.OrganizationID)
	settle.Env, settle.Stderr = env, os.Stderr
	if err := settle.Run(); err != nil {
		return fmt.Errorf("payreq settle: %w", err)
	}
	cookie, err := signIn(c, base, m.OwnerEmail, m.OwnerPassword, o.totpSecret)
	if err != nil {
		return fmt.Errorf("signing in: %w", err)
	}

	pages := []page{
		{"home", "/portal/"},
		{"invoices", "/portal/invoices"},
		{"invoice", "/portal/invoices/" + invoice},
		{"new invoice", "/portal/invoices/new"},
		{"card payments", "/portal/card-payments"},
		{"deposits", "/portal/deposits"},
	}
	headers, _ := json.Marshal(map[string]string{"Cookie": cookie})
	var results []result
	for _, p := range pages {
		var runs []result
		for i := 0; i < o.runs; i++ {
			r, err := lighthouse(o, base+p.path, string(headers))
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			r.page = p
			runs = append(runs, r)
		}
		sort.Slice(runs, func(i, j int) bool {
			if runs[i].score != runs[j].score {
				return runs[i].score < runs[j].score
			}
			return runs[i].lcp > runs[j].lcp
		})
		r := runs[len(runs)/2]
		fmt.Printf("%-14s performance %3.0f  FCP %s  LCP %s  TBT %s  CLS %s  %.0f bytes\n", r.name, r.score, r.fcpText, r.lcpText, r.tbtText, r.clsText, r.bytes)
		for _, s := range r.opportunities {
			fmt.Println("    " + s)
		}
		results = append(results, r)
	}
	return os.WriteFile(o.out, []byte(report(o, results)), 0o644)
}

func waitReady(u string, exited chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("it ended: %v", err)
		default:
		}
		if resp, err := http.Get(u); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("not ready within 2 minutes")
}

func newClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// call sends a JSON request to the API and decodes its answer into v.
func call(c *http.Client, method, u, token string, body, v any, want int) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, u, resp.StatusCode, data)
	}
	if v != nil {
		return json.Unmarshal(data, v)
	}
	return nil
}

// form gets from (for its token, named tokenField) and posts values to
// action with it; it answers the response's status and Location.
func form(c *http.Client, from, action, tokenField string, values url.Values) (int, string, error) {
	resp, err := c.Get(from)
	if err != nil {
		return 0, "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="` + tokenField + `" value="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		return 0, "", fmt.Errorf("no %s on %s (%d)", tokenField, from, resp.StatusCode)
	}
	values.Set(tokenField, string(m[1]))
	resp, err = c.PostForm(action, values)
	if err != nil {
		return 0, "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// fill makes the merchant's day through the API and the pay pages: 30
// invoices of a few lines, 12 of them paid by card, 5 paid in part by
// check, and one invoice of 40 lines paid by card and by check. It
// answers that invoice's id.
func fill(c *http.Client, base, keyID, secret string) (string, error) {
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := call(c, "POST", base+"/oauth/token", "", map[string]string{"grant_type": "client_credentials", "client_id": keyID, "client_secret": secret}, &tok, 200); err != nil {
		return "", err
	}
	var mids []struct{ Id string }
	if err := call(c, "GET", base+"/accounts", tok.AccessToken, nil, &mids, 200); err != nil {
		return "", err
	}
	customers := []string{"Ada Park", "Bo Chen", "Carmen Díaz", "Dev Patel", "Eun-ji Seo", "Farah Haddad"}
	line := func(d string, q, cost string) map[string]any {
		return map[string]any{"description": d, "quantity": q, "unitCost": cost, "uom": "EA", "commodityCode": nil, "upc": nil}
	}
	create := func(n int, lines []map[string]any, amount string) (id, link string, err error) {
		body := map[string]any{"merchantAccountId": mids[0].Id, "invoiceNumber": fmt.Sprintf("INV-%04d", n), "amount": amount,
			"poNumber": nil, "customerName": customers[n%len(customers)], "customerCompany": "Harbor & Finch Interiors",
			"customerEmail": fmt.Sprintf("ap+%d@harborfinch.example.com", n), "customerPhone": nil, "delivery": nil,
			"memo": "Deliver to the loading dock.", "dueDate": time.Now().AddDate(0, 0, 10*(n%3-1)).Format(time.DateOnly), "lines": lines, "send": false}
		var inv struct{ Id, Link string }
		err = call(c, "POST", base+"/payment-requests", tok.AccessToken, body, &inv, 201)
		return inv.Id, inv.Link, err
	}
	pay := func(link, amount string) error {
		u, err := url.Parse(link)
		if err != nil {
			return err
		}
		t := time.Now().AddDate(2, 0, 0)
		status, _, err := form(c, base+u.Path, base+u.Path, "csrfToken", url.Values{"cardNumber": {"4111111111111111"}, "amount": {amount},
			"cardholderName": {"Dana Whitfield"}, "expiry": {fmt.Sprintf("%02d%02d", int(t.Month()), t.Year()%100)}, "cvv": {"9317"}})
		if err == nil && status != http.StatusSeeOther {
			err = fmt.Errorf("pay %s: %d", link, status)
		}
		return err
	}
	record := func(id, amount string) error {
		return call(c, "POST", base+"/payment-requests/"+id+"/payments", tok.AccessToken,
			map[string]any{"amount": amount, "method": "check", "reference": "Check 1042"}, nil, 201)
	}
	for n := range 30 {
		id, link, err := create(n, []map[string]any{line("Walnut side table", "2", "45.00"), line("Delivery", "1", "30.00")}, "120.00")
		if err != nil {
			return "", err
		}
		switch {
		case n%5 == 0:
			err = record(id, "50.00")
		case n%5 < 3:
			err = pay(link, "120.00")
		}
		if err != nil {
			return "", err
		}
	}
	var lines []map[string]any
	for i := range 40 {
		lines = append(lines, line(fmt.Sprintf("Walnut side table, oiled finish, 45 × 45 cm (room %d)", i+1), "1", "45.50"))
	}
	id, link, err := create(100, lines, "1820.00")
	if err == nil {
		err = pay(link, "500.00")
	}
	if err == nil {
		err = record(id, "250.00")
	}
	return id, err
}

// signIn signs the member in through the portal's form (and its second
// step when the member has one) and answers the session's Cookie header.
func signIn(c *http.Client, base, email, password, secret string) (string, error) {
	status, loc, err := form(c, base+"/portal/sign-in", base+"/portal/sign-in", "csrf", url.Values{"email": {email}, "password": {password}})
	if err != nil {
		return "", err
	}
	if status == http.StatusSeeOther && strings.HasPrefix(loc, "/portal/sign-in/two-factor") {
		if secret == "" {
			return "", errors.New("the member has a second factor: give its secret with -totp-secret")
		}
		code, err := totp.GenerateCode(secret, time.Now())
		if err != nil {
			return "", err
		}
		if status, loc, err = form(c, base+loc, base+"/portal/sign-in/two-factor", "csrf", url.Values{"code": {code}}); err != nil {
			return "", err
		}
	}
	if status != http.StatusSeeOther || loc != "/portal/" {
		return "", fmt.Errorf("sign-in answered %d to %q", status, loc)
	}
	u, _ := url.Parse(base + "/portal/")
	var parts []string
	for _, ck := range c.Jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return strings.Join(parts, "; "), nil
}

// lighthouse runs Lighthouse's performance category on u, mobile (its
// default form factor and throttling), in headless Chromium.
func lighthouse(o options, u, headers string) (result, error) {
	cmd := exec.Command(o.lighthouse, u, "--only-categories=performance", "--output=json", "--output-path=stdout", "--quiet",
		"--chrome-flags=--headless=new --no-sandbox", "--extra-headers="+headers)
	cmd.Env = append(os.Environ(), "CHROME_PATH="+o.chrome)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	var lhr struct {
		FinalDisplayedURL string `json:"finalDisplayedUrl"`
		RuntimeError      *struct{ Code, Message string }
		Environment       struct{ BenchmarkIndex float64 }
		Categories        struct {
			Performance struct{ Score *float64 }
		}
		Audits map[string]struct {
			Title            string
			Score            *float64
			ScoreDisplayMode string
			NumericValue     float64
			DisplayValue     string
			Details          struct{ Type string }
		}
	}
	if err := json.Unmarshal(out, &lhr); err != nil {
		return result{}, err
	}
	if lhr.RuntimeError != nil {
		return result{}, fmt.Errorf("%s: %s", lhr.RuntimeError.Code, lhr.RuntimeError.Message)
	}
	if !strings.HasSuffix(lhr.FinalDisplayedURL, strings.TrimPrefix(u, strings.SplitN(u, "/portal", 2)[0])) {
		return result{}, fmt.Errorf("lighthouse ended on %s, not %s (the session was refused?)", lhr.FinalDisplayedURL, u)
	}
	if lhr.Categories.Performance.Score == nil {
		return result{}, errors.New("no performance score")
	}
	a := lhr.Audits
	r := result{score: *lhr.Categories.Performance.Score * 100,
		fcp: a["first-contentful-paint"].NumericValue, lcp: a["largest-contentful-paint"].NumericValue,
		tbt: a["total-blocking-time"].NumericValue, cls: a["cumulative-layout-shift"].NumericValue,
		bytes: a["total-byte-weight"].NumericValue, benchmarkIndex: lhr.Environment.BenchmarkIndex,
		fcpText: a["first-contentful-paint"].DisplayValue, lcpText: a["largest-contentful-paint"].DisplayValue,
		tbtText: a["total-blocking-time"].DisplayValue, clsText: a["cumulative-layout-shift"].DisplayValue}
	for id, x := range a {
		if x.Score != nil && *x.Score < 0.9 && (x.ScoreDisplayMode == "metricSavings" || x.ScoreDisplayMode == "numeric" || x.ScoreDisplayMode == "binary") {
			r.opportunities = append(r.opportunities, fmt.Sprintf("%s: %s %s", id, x.Title, x.DisplayValue))
		}
	}
	sort.Strings(r.opportunities)
	return r, nil
}

func report(o options, results []result) string {
	var b strings.Builder
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "## Lighthouse, the portal on mobile\n\n")
	fmt.Fprintf(&b, "Written by `make lighthouse` (bench/lighthouse) on %s, on %s (%s, %d CPUs), load average %s.\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), host, cpuModel(), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintf(&b, "Lighthouse %s, performance only, its mobile form factor and simulated throttling, Chromium %s headless;\n", lighthouseVersion(o), chromeVersion(o))
	fmt.Fprintf(&b, "the median of %d runs per page, signed in as the demo merchant's Owner (a busy day seeded). Target: 100 (decisions.md).\n\n", o.runs)
	fmt.Fprintf(&b, "| page | performance score | FCP | LCP | TBT | CLS | transfer bytes | benchmark index |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s (`%s`) | %.0f | %.0f ms | %.0f ms | %.0f ms | %.3f | %.0f | %.0f |\n", r.name, uuidPattern.ReplaceAllString(r.path, "{id}"), r.score, r.fcp, r.lcp, r.tbt, r.cls, r.bytes, r.benchmarkIndex)
	}
	fmt.Fprintf(&b, "\nThe benchmark index is Lighthouse's own measure of the machine's speed during the page's run (higher is\n"+
		"faster; it falls on a loaded machine, whose slow main thread the simulation then multiplies by 4 into TBT).\n"+
		"Below 100: read the load average and the index before the page.\n")
	for _, r := range results {
		if len(r.opportunities) > 0 {
			fmt.Fprintf(&b, "\n%s, below 90 in: %s.\n", r.name, strings.Join(r.opportunities, "; "))
		}
	}
	return b.String()
}

// uuidPattern is an id in a path, which the table shows as {id}.
var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`)

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return runtime.GOARCH
}

func lighthouseVersion(o options) string {
	out, _ := exec.Command(o.lighthouse, "--version").Output()
	return strings.TrimSpace(string(out))
}

func chromeVersion(o options) string {
	out, _ := exec.Command(o.chrome, "--version").Output()
	return strings.TrimSpace(strings.TrimPrefix(string(out), "Chromium "))
}
