package api_test

import (
	"context"
	"database/sql"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/web"
)

// A database that does not answer within the request timeout (every table
// locked by another session) gets every operation that needs it a 503
// problem, as openapi.yaml documents, within the timeout; the pay page a 503
// page. (internal/faults stops PostgreSQL itself under load.)
func TestDatabaseTooSlowAnswers503(t *testing.T) {
	const timeout = 300 * time.Millisecond
	dsn := pgtest.NewDatabase(t)
	env := apitest.New(t, dsn, apitest.Options{Configure: func(c *config.Config) { c.RequestTimeout = timeout }})
	m := apitest.NewMerchant(t, env)
	seed := env.Seed()
	reseller := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	inv := m.MustCreate(t, m.Body("SLOW-1", "10.00"))
	// Tokens are checked against the database again after this interval;
	// the requests below come well within it.
	someID := uuid.NewString()

	db, err := postgres.Open(context.Background(), dsn, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock := lockEveryTable(t, db)
	defer lock()

	requests := []apitest.Request{
		{Method: "POST", Path: "/oauth/token", Body: map[string]string{"grant_type": "client_credentials",
			"client_id": seed.Merchant.KeyID, "client_secret": seed.Merchant.Secret}},
		{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: m.Body("SLOW-2", "10.00"),
			Header: http.Header{"Idempotency-Key": {"slow-2"}}},
		{Method: "GET", Path: "/payment-requests", Token: m.Token},
		{Method: "GET", Path: "/payment-requests/" + inv.Id.String(), Token: m.Token},
		{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/send", Token: m.Token},
		{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/cancel", Token: m.Token},
		{Method: "DELETE", Path: "/saved-cards/" + someID, Token: m.Token},
		{Method: "GET", Path: "/locations", Token: m.Token},
		{Method: "GET", Path: "/locations/" + m.Locs[0].Id.String(), Token: m.Token},
		{Method: "GET", Path: "/accounts", Token: m.Token},
		{Method: "GET", Path: "/organizations/" + seed.Reseller.OrganizationID.String() + "/portfolio", Token: reseller},
		{Method: "GET", Path: "/applications", Token: reseller},
		{Method: "GET", Path: "/applications/" + someID, Token: reseller},
	}
	for _, r := range requests {
		start := time.Now()
		resp := env.Do(r) // checked against openapi.yaml
		took := time.Since(start)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d %s, want 503", r.Method, r.Path, resp.StatusCode, resp.Body)
			continue
		}
		p := resp.Problem(t)
		apitest.Want(t, r.Method+" "+r.Path+": type is unavailable", strings.HasSuffix(p.Type, "/problems/unavailable"), true)
		apitest.Want(t, r.Method+" "+r.Path+": title", p.Title, "Service unavailable")
		apitest.Want(t, r.Method+" "+r.Path+": Retry-After set", resp.Header.Get("Retry-After") != "", true)
		if took > timeout+time.Second {
			t.Errorf("%s %s took %v with a request timeout of %v", r.Method, r.Path, took, timeout)
		}
	}
	if strings.Contains(env.Log.String(), `"status":500`) {
		t.Errorf("a request was answered 500: %s", env.Log.String())
	}

	// The pay page, too.
	page := env.Visit(t, "GET", apitest.PayPath(t, inv), nil, nil)
	if page.StatusCode != http.StatusServiceUnavailable || page.Header.Get("Retry-After") == "" {
		t.Errorf("pay page: %d, want 503 with Retry-After", page.StatusCode)
	}

	// Once the database answers, so does the service.
	// (A few tries: on a loaded machine one read can still outlast the
	// 300 ms request timeout just after the lock ends.)
	lock()
	var resp *apitest.Response
	for range 5 {
		if resp = env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + inv.Id.String(), Token: m.Token}); resp.StatusCode == http.StatusOK {
			break
		}
		time.Sleep(time.Second)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after the lock: %d %s", resp.StatusCode, resp.Body)
	}
}

// lockEveryTable takes an exclusive lock on every table until the returned
// function is called.
func lockEveryTable(t *testing.T, db *sqlx.DB) (release func()) {
	t.Helper()
	var tables []string
	if err := db.Select(&tables, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`); err != nil {
		t.Fatal(err)
	}
	for i, name := range tables {
		tables[i] = pq.QuoteIdentifier(name)
	}
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`LOCK TABLE ` + strings.Join(tables, ", ") + ` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := false
	return func() {
		if !done {
			done = true
			_ = tx.Rollback()
		}
	}
}

// A request waiting for a pooled connection waits no longer than the
// request time limit: with every connection of the pool held elsewhere, it
// gets a 503 problem, not an answer when one comes free.
func TestPoolExhaustedAnswers503(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Configure: func(c *config.Config) {
		c.RequestTimeout, c.DBMaxOpenConns, c.DBMaxIdleConns = 300*time.Millisecond, 2, 2
	}})
	m := apitest.NewMerchant(t, env)
	seed := env.Seed()
	var held []*sql.Conn
	for range 2 {
		conn, err := env.App.DB.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	for _, r := range []apitest.Request{
		{Method: "POST", Path: "/oauth/token", Body: map[string]string{"grant_type": "client_credentials",
			"client_id": seed.Merchant.KeyID, "client_secret": seed.Merchant.Secret}},
		{Method: "GET", Path: "/payment-requests", Token: m.Token},
		{Method: "POST", Path: "/payment-requests", Token: m.Token, Body: m.Body("POOL-1", "10.00")},
		{Method: "GET", Path: "/locations", Token: m.Token},
	} {
		p := apitest.WantProblem(t, env.Do(r), http.StatusServiceUnavailable, "Service unavailable")
		apitest.Want(t, r.Method+" "+r.Path+": type", strings.HasSuffix(p.Type, "/problems/unavailable"), true)
	}
	for _, c := range held {
		c.Close()
	}
	apitest.Want(t, "with the pool free again", env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: m.Token}).StatusCode, http.StatusOK)
}

// A database that takes no writes (a replica, or set read-only) makes the
// instance not ready: 503 from /readyz, so the balancer sends it nothing.
func TestReadinessFailsOnAReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	env := apitest.New(t, dsn, apitest.Options{})
	apitest.Want(t, "ready", env.Do(apitest.Request{Method: "GET", Path: "/readyz"}).StatusCode, http.StatusOK)
	var name string
	if err := env.App.DB.Get(&name, `SELECT current_database()`); err != nil {
		t.Fatal(err)
	}
	if _, err := env.App.DB.Exec(`ALTER DATABASE ` + pq.QuoteIdentifier(name) + ` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	env.App.DB.SetMaxIdleConns(0) // new connections take the database's setting
	p := apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/readyz"}), http.StatusServiceUnavailable, "Service unavailable")
	apitest.Want(t, "detail", strings.Contains(p.Detail, "read-only"), true)
	apitest.Want(t, "alive all the same", env.Do(apitest.Request{Method: "GET", Path: "/healthz"}).StatusCode, http.StatusOK)
}

// A database that does not answer gets every front the same answer: 503
// with one Retry-After (web.RetryAfter), on the API, the portal, the pay
// page and the sign-up page alike.
func TestUnavailableDatabaseRetryAfterOnEveryFront(t *testing.T) {
	const timeout = time.Second // the setup signs a member in within it, on a loaded machine too
	dsn := pgtest.NewDatabase(t)
	env := apitest.New(t, dsn, apitest.Options{Configure: func(c *config.Config) { c.RequestTimeout = timeout }})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("FRONTS-1", "10.00"))
	member, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView)
	applicant := env.NewApplicant()
	slug := env.Seed().Reseller.Slug

	db, err := postgres.Open(context.Background(), dsn, postgres.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock := lockEveryTable(t, db)
	defer lock()

	want := strconv.Itoa(web.RetryAfter)
	type answer struct {
		status     int
		retryAfter string
	}
	answers := map[string]answer{}
	api := env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/" + inv.Id.String(), Token: m.Token})
	answers["API"] = answer{api.StatusCode, api.Header.Get("Retry-After")}
	portal := member.Get("/portal/invoices")
	answers["portal"] = answer{portal.Status, portal.Header.Get("Retry-After")}
	pay := env.Visit(t, "GET", apitest.PayPath(t, inv), nil, nil)
	answers["pay page"] = answer{pay.StatusCode, pay.Header.Get("Retry-After")}
	apply := applicant.Visit(t, "GET", "/apply/"+slug, nil)
	answers["sign-up page"] = answer{apply.StatusCode, apply.Header.Get("Retry-After")}
	for front, a := range answers {
		if a.status != http.StatusServiceUnavailable || a.retryAfter != want {
			t.Errorf("%s: %d with Retry-After %q, want 503 with %s", front, a.status, a.retryAfter, want)
		}
	}
}
