package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/server"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// HEAD works on every GET route, of every front: the GET's status and
// headers, no body.
func TestHeadOnEveryGetRoute(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("HEAD-1", "10.00"))
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml", "/openapi.json", "/docs", "/locations",
		"/payment-requests/" + inv.Id.String(), apitest.PayPath(t, inv)} {
		header := http.Header{"Authorization": {"Bearer " + m.Token}}
		get := env.Visit(t, "GET", path, nil, header)
		head := env.Visit(t, "HEAD", path, nil, header)
		apitest.Want(t, "HEAD "+path+": status", head.StatusCode, get.StatusCode)
		apitest.Want(t, "HEAD "+path+": GET's status", get.StatusCode, http.StatusOK)
		apitest.Want(t, "HEAD "+path+": Content-Type", head.Header.Get("Content-Type"), get.Header.Get("Content-Type"))
		apitest.Want(t, "HEAD "+path+": body", head.Body, "")
	}
	// A route with no GET has no HEAD either.
	apitest.Want(t, "HEAD /oauth/token", env.Visit(t, "HEAD", "/oauth/token", nil, nil).StatusCode, http.StatusMethodNotAllowed)
}

// With PAYREQ_HSTS on, every front (the API, the pay page, the portal, the
// sign-up page, the docs) sends Strict-Transport-Security for a year,
// subdomains included; off, none does.
func TestStrictTransportSecurityFromEveryFront(t *testing.T) {
	for _, on := range []bool{true, false} {
		env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) { c.HSTS = on }})
		seed := env.Seed()
		m := apitest.NewMerchant(t, env)
		inv := m.MustCreate(t, m.Body("HSTS-1", "10.00"))
		want := ""
		if on {
			want = "max-age=31536000; includeSubDomains"
		}
		for _, path := range []string{"/locations", "/no-such-path", apitest.PayPath(t, inv), "/portal/sign-in",
			"/apply/" + seed.Reseller.Slug, "/docs", "/openapi.yaml"} {
			got := env.Visit(t, "GET", path, nil, http.Header{"Authorization": {"Bearer " + m.Token}})
			apitest.Want(t, fmt.Sprintf("HSTS %v: GET %s: Strict-Transport-Security", on, path), got.Header.Get("Strict-Transport-Security"), want)
		}
	}
}

// Run runs every worker and loop on the intervals of the configuration,
// and returns once each has stopped after its context ends, as payreq
// serve waits for them before it exits.
func TestRunStopsWithItsContext(t *testing.T) {
	cfg, err := config.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg.DatabaseURL, cfg.DataDir = testDSN, dir
	cfg.SigningKeyFile, cfg.PepperFile, cfg.EncryptionKeyFile = dir+"/signing-key.pem", dir+"/pepper", dir+"/encryption-key"
	cfg.PendingPollInterval, cfg.DepositPollInterval, cfg.HousekeepingInterval = 100*time.Millisecond, time.Second, time.Second
	svc, err := server.New(context.Background(), cfg, app.Options{GenerateSecrets: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { svc.Run(ctx); close(ran) }()
	time.Sleep(300 * time.Millisecond) // every loop through at least once
	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10 s after its context ended")
	}
}
