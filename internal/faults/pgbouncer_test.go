package faults

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startPgBouncer runs deploy/pgbouncer.ini (Debian's pgbouncer) in front of
// the database of dsn, with its addresses, files and authentication made
// local; it returns the DSN of the pooled database.
func startPgBouncer(t *testing.T, dsn string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		t.Fatal("pgbouncer is not installed: make test installs it (apt-get install pgbouncer)")
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "pgbouncer.ini"))
	if err != nil {
		t.Fatal(err)
	}
	// The database's address and name, from the test's DSN.
	host, rest, _ := strings.Cut(strings.TrimPrefix(dsn, "postgres://postgres@"), "/")
	dbHost, dbPort, _ := net.SplitHostPort(host)
	dbName, _, _ := strings.Cut(rest, "?")

	dir, err := os.MkdirTemp(workDir, "pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	override := map[string]string{
		"listen_port": port, "unix_socket_dir": "", "auth_type": "trust", "auth_file": filepath.Join(dir, "userlist.txt"),
		"logfile": "", "pidfile": "",
	}
	var conf strings.Builder
	sawTransaction := false
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		line := sc.Text()
		key, _, _ := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		switch v, ok := override[key]; {
		case key == "payreq":
			line = fmt.Sprintf("payreq = host=%s port=%s dbname=%s", dbHost, dbPort, dbName)
		case key == "pool_mode":
			sawTransaction = strings.TrimSpace(strings.SplitN(line, "=", 2)[1]) == "transaction"
		case ok:
			line = key + " = " + v
		}
		conf.WriteString(line + "\n")
	}
	if !sawTransaction {
		t.Fatal("deploy/pgbouncer.ini does not pool by transaction")
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	for path, content := range map[string]string{ini: conf.String(), override["auth_file"]: `"postgres" ""` + "\n"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{ini}
	if os.Geteuid() == 0 { // pgbouncer does not run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, ini, override["auth_file"]} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		args = []string{"-u", "postgres", ini}
	}
	cmd := exec.Command(bin, args...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("pgbouncer log:\n%s", tail(logs.String(), 4<<10))
		}
	})
	eventually(t, 10*time.Second, "pgbouncer listens", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/payreq?sslmode=disable", port)
}

// Two instances through PgBouncer in transaction pooling mode, started at
// once (so their migrations meet in the pool): tokens, invoices created,
// sent, read, listed and cancelled, a payment and a refund, a deposit, a
// webhook delivered, with every background worker running; no request
// fails and no instance logs an error.
func TestThroughPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	pooled := startPgBouncer(t, newDatabase(t))
	d := newDeployment(t, pooled)
	d.Env["PAYREQ_DB_PREPARED_STATEMENTS"] = "false"
	d.Env["PAYREQ_DB_MAX_OPEN_CONNS"] = "8"
	d.Env["PAYREQ_WEBHOOK_ALLOW_PRIVATE"] = "true"
	var a, b *instance
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = d.start(t, "a", nil) }()
	go func() { defer wg.Done(); b = d.start(t, "b", map[string]string{"PAYREQ_ADDR": freeAddr(t)}) }()
	wg.Wait()
	keys := d.seed(t)

	var mu sync.Mutex
	hooks := 0
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hooks++
		mu.Unlock()
	}))
	defer receiver.Close()

	c := httpClient("127.0.0.1", 30*time.Second)
	tok := token(t, c, a.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, b.URL, tok)
	if r := send(c, "POST", a.URL+"/webhook-endpoints", tok, map[string]any{"url": receiver.URL, "eventTypes": []string{"*"}}, nil); r.Status != http.StatusCreated {
		t.Fatalf("webhook endpoint: %v", r)
	}
	var fails []string
	check := func(what string, r answer, want int) {
		if r.Status != want {
			fails = append(fails, fmt.Sprintf("%s: %v", what, r))
		}
	}
	var load sync.WaitGroup
	for w := range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := range 10 {
				in := []*instance{a, b}[(w+i)%2]
				r := send(c, "POST", in.URL+"/payment-requests", tok, invoiceBody(mid, fmt.Sprintf("PGB-%d-%d", w, i), i%2 == 0),
					http.Header{"Idempotency-Key": {fmt.Sprintf("pgb-%d-%d", w, i)}})
				mu.Lock()
				check("create", r, http.StatusCreated)
				mu.Unlock()
				id := created(t, r)
				for _, q := range []struct{ method, path string }{{"GET", "/payment-requests/" + id}, {"GET", "/payment-requests?limit=5"},
					{"POST", "/payment-requests/" + id + "/send"}, {"GET", "/card-payments?limit=5"}, {"GET", "/events?limit=5"}} {
					r := send(c, q.method, in.URL+q.path, tok, nil, nil)
					mu.Lock()
					check(q.method+" "+q.path, r, http.StatusOK)
					mu.Unlock()
				}
			}
		}()
	}
	load.Wait()
	invoiceID, path := payable(t, c, a.URL, tok, mid, "PGB-PAY")
	if r, err := pay(httpClient("127.0.0.123", 30*time.Second), b.URL, path, "30.00"); err != nil || r.Status != http.StatusSeeOther {
		t.Fatalf("pay: %v %v", r, err)
	}
	var inv struct {
		Payments []struct{ ID string } `json:"payments"`
	}
	r := send(c, "GET", a.URL+"/payment-requests/"+invoiceID, tok, nil, nil)
	if err := json.Unmarshal(r.Body, &inv); err != nil || len(inv.Payments) != 1 {
		t.Fatalf("paid invoice: %v", r)
	}
	check("refund", send(c, "POST", b.URL+"/card-payments/"+inv.Payments[0].ID+"/refund", tok, map[string]any{"amount": "5.00"},
		http.Header{"Idempotency-Key": {"pgb-refund"}}), http.StatusCreated)
	check("cancel", send(c, "POST", a.URL+"/payment-requests/"+created(t, send(c, "POST", a.URL+"/payment-requests", tok, invoiceBody(mid, "PGB-C", false), nil))+"/cancel", tok, nil, nil), http.StatusOK)
	if out := d.cli(t, "settle", "--org", keys.Merchant.OrganizationID); !strings.Contains(out, `"salesCount":1`) {
		t.Errorf("settle printed %q", out)
	}
	for _, f := range fails {
		t.Error(f)
	}
	// The workers: pay links written, webhooks delivered.
	eventually(t, 30*time.Second, "webhooks delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hooks >= 40
	})
	eventually(t, 30*time.Second, "pay links delivered", func() bool {
		return strings.Count(a.logs.String()+b.logs.String(), "message written to file") >= 20
	})
	time.Sleep(2 * time.Second) // a few rounds of every background loop
	for _, in := range []*instance{a, b} {
		for _, line := range strings.Split(in.logs.String(), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "prepared statement") {
				t.Errorf("%s logged: %s", in.name, line)
			}
		}
	}
}

// deploy/haproxy.cfg is a configuration HAProxy takes (with a certificate
// where PAYREQ_TLS_CERT says), that terminates TLS and sends plain http
// only to https.
func TestHAProxyConfigurationIsValid(t *testing.T) {
	bin := "/usr/sbin/haproxy"
	if _, err := os.Stat(bin); err != nil {
		t.Fatal("haproxy is not installed: make test installs it (apt-get install haproxy)")
	}
	path := filepath.Join(repoRoot(), "deploy", "haproxy.cfg")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`bind :443 ssl crt "${PAYREQ_TLS_CERT}"`, "ssl-min-ver TLSv1.2",
		"http-request redirect scheme https code 308 unless { ssl_fc }", "http-request set-header X-Forwarded-Proto https"} {
		if !strings.Contains(string(cfg), line) {
			t.Errorf("deploy/haproxy.cfg lacks %q", line)
		}
	}
	cmd := exec.Command(bin, "-c", "-f", path)
	cmd.Env = append(os.Environ(), "PAYREQ_TLS_CERT="+selfSignedPEM(t))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

// selfSignedPEM is a file holding a throwaway certificate and its key, as
// HAProxy's crt takes them.
func selfSignedPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pay.example.com"},
		DNSNames: []string{"pay.example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	file := filepath.Join(t.TempDir(), "payreq.pem")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
