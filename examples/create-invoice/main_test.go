package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	payreq "github.com/payreq/payreq/client"
	"github.com/payreq/payreq/gen/client"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

func TestCreatesAnInvoiceAndReadsItBack(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	var out strings.Builder
	err := run(context.Background(), settings{URL: env.URL, KeyID: seed.Merchant.KeyID, Secret: seed.Merchant.Secret}, &out,
		payreq.WithHTTPClient(apitest.ClientFrom(apitest.SourceAddress())))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	if !strings.Contains(text, "recorded a check of 50.00: status part_paid, balance 53.30") ||
		!strings.Contains(text, "read back: status part_paid, amount 103.30, balance 53.30, 2 lines") {
		t.Errorf("output:\n%s", text)
	}
	var inv client.Invoice
	if err := json.Unmarshal([]byte(text[strings.Index(text, "{"):]), &inv); err != nil {
		t.Fatalf("the printed invoice: %v\n%s", err, text)
	}
	if inv.LineItems == nil || len(*inv.LineItems) != 2 || (*inv.LineItems)[0].UnitCost.String() != "45.5" || inv.PoNumber == nil || *inv.PoNumber != "PO-7781" {
		t.Errorf("invoice read back: %s", text)
	}
	if inv.Payments == nil || len(*inv.Payments) != 1 || (*inv.Payments)[0].Method != client.PaymentMethodCheck ||
		(*inv.Payments)[0].Reference == nil || *(*inv.Payments)[0].Reference != "Check 1042" {
		t.Errorf("the recorded check read back: %s", text)
	}
}

func TestSettingsFromTheDemoFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "demo.json")
	if err := os.WriteFile(file, []byte(`{"merchant":{"organizationId":"0194f1a2-0000-7000-8000-000000000000","keyId":"mk_a","secret":"ms_b"},"reseller":{"keyId":"mk_r","secret":"ms_r"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PAYREQ_URL", "")
	t.Setenv("PAYREQ_KEY_ID", "")
	t.Setenv("PAYREQ_SECRET", "")
	t.Setenv("PAYREQ_DEMO_FILE", file)
	s, err := settingsFromEnv()
	if err != nil || s != (settings{URL: "http://127.0.0.1:8080", KeyID: "mk_a", Secret: "ms_b"}) {
		t.Errorf("settings %+v, %v", s, err)
	}
	t.Setenv("PAYREQ_KEY_ID", "mk_env")
	t.Setenv("PAYREQ_SECRET", "ms_env")
	t.Setenv("PAYREQ_URL", "https://payreq.example.com")
	if s, err := settingsFromEnv(); err != nil || s != (settings{URL: "https://payreq.example.com", KeyID: "mk_env", Secret: "ms_env"}) {
		t.Errorf("settings %+v, %v", s, err)
	}
}
