package paypage_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/payreq/payreq/internal/apitest"
)

// One pay form posted ten times at once, over two instances (a network
// retry, a double click): one charge, and ten identical answers.
func TestOneFormPostedTenTimesChargesOnce(t *testing.T) {
	t.Parallel()
	rec := &apitest.Recorder{}
	deployment := apitest.Options{DataDir: t.TempDir(), PublicURL: "http://payreq.test", WrapProcessor: apitest.Recording(rec)}
	one := apitest.New(t, testDSN, deployment)
	two := apitest.New(t, testDSN, deployment)
	m := apitest.NewMerchant(t, one)
	inv := m.MustCreate(t, m.Body("ONCE-1", "10.00"))
	path := apitest.PayPath(t, inv)
	token := apitest.FormToken(t, one.Visit(t, "GET", path, nil, nil))

	answers := make([]apitest.Page, 10)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := []*apitest.Env{one, two}[i%2]
			answers[i] = env.Post(t, path, token, apitest.Payment{Card: apitest.CardApprove, Amount: "4.00"})
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.StatusCode != http.StatusSeeOther {
			t.Errorf("answer %d: status %d, want 303", i, a.StatusCode)
		}
		if got, want := a.Header.Get("Location"), answers[0].Header.Get("Location"); got != want {
			t.Errorf("answer %d: Location %q, want the first's %q", i, got, want)
		}
	}
	if charges := len(rec.Charges()); charges != 1 {
		t.Errorf("%d charges at the processor, want 1", charges)
	}
	got, raw := m.Read(t, inv.Id)
	if len(*got.Payments) != 1 {
		t.Errorf("%d payments recorded, want 1: %s", len(*got.Payments), raw)
	}
	if got.AmountPaid.Text('f') != "4.00" {
		t.Errorf("amountPaid %s, want 4.00", got.AmountPaid.Text('f'))
	}
	// Posted again a while later, with other card details: the same receipt.
	late := two.Post(t, path, token, apitest.Payment{Card: apitest.CardDecline, Amount: "6.00"})
	if late.Header.Get("Location") != answers[0].Header.Get("Location") {
		t.Errorf("a later repeat: %d %q, want the first receipt", late.StatusCode, late.Header.Get("Location"))
	}
}

func TestDeclinedFormPostedTwiceAnswersTheSameDecline(t *testing.T) {
	t.Parallel()
	rec := &apitest.Recorder{}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: apitest.Recording(rec)})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("ONCE-2", "10.00"))
	path := apitest.PayPath(t, inv)
	token := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
	first := env.Post(t, path, token, apitest.Payment{Card: apitest.CardDecline, Amount: "10.00"})
	second := env.Post(t, path, token, apitest.Payment{Card: apitest.CardDecline, Amount: "10.00"})
	for i, p := range []apitest.Page{first, second} {
		apitest.WantStatus(t, p, http.StatusPaymentRequired)
		if !strings.Contains(p.Body, "The payment did not go through: Card declined by the issuer") {
			t.Errorf("answer %d does not say the card was declined", i)
		}
	}
	if len(rec.Charges()) != 1 {
		t.Errorf("%d charges at the processor, want 1", len(rec.Charges()))
	}
	got, _ := m.Read(t, inv.Id)
	if got.FailedAttempts != 1 {
		t.Errorf("failedAttempts %d, want 1", got.FailedAttempts)
	}
}

// A suspended organization's pay page shows the invoice and no form, and
// a POST charges nothing.
func TestSuspendedOrganizationTakesNoPayment(t *testing.T) {
	t.Parallel()
	rec := &apitest.Recorder{}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: apitest.Recording(rec)})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("SUSP-1", "10.00"))
	path := apitest.PayPath(t, inv)
	token := apitest.FormToken(t, env.Visit(t, "GET", path, nil, nil))
	if err := env.App.Directory.SetOrganizationStatus(context.Background(), uuid.MustParse(m.Org), "suspended"); err != nil {
		t.Fatal(err)
	}
	shown := env.Visit(t, "GET", path, nil, nil)
	apitest.WantStatus(t, shown, http.StatusOK)
	if strings.Contains(shown.Body, "<form") {
		t.Error("the suspended organization's page has a form")
	}
	if !strings.Contains(shown.Body, "SUSP-1") {
		t.Error("the page does not show the invoice")
	}
	apitest.WantStatus(t, env.Post(t, path, token, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"}), http.StatusUnprocessableEntity)
	if len(rec.Charges()) != 0 {
		t.Errorf("%d charges at the processor, want none", len(rec.Charges()))
	}
}

// Only what finds a link is stored: no token of a link is in the database,
// and a link made before tokens were enciphered works by its digest.
func TestPayLinksAreNotStored(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("LINK-1", "10.00"))
	token := (*inv.Link)[strings.LastIndex(*inv.Link, "/")+1:]
	var n int
	if err := env.App.DB.Get(&n, `SELECT count(*) FROM invoices i WHERE i::text LIKE '%' || $1 || '%'`, token); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the invoices table holds the pay link's token")
	}
	apitest.WantStatus(t, env.Visit(t, "GET", apitest.PayPath(t, inv), nil, nil), http.StatusOK)

	legacy := "an-old-random-token-0123456789abcdef"
	sum := sha256.Sum256([]byte(legacy))
	if _, err := env.App.DB.Exec(`UPDATE invoices SET legacy_pay_token_digest = $2 WHERE id = $1`, inv.Id, sum[:]); err != nil {
		t.Fatal(err)
	}
	old := env.Visit(t, "GET", "/pay/"+legacy, nil, nil)
	apitest.WantStatus(t, old, http.StatusOK)
	if !strings.Contains(old.Body, "LINK-1") {
		t.Error("the old link does not show its invoice")
	}
	apitest.WantStatus(t, env.Visit(t, "GET", "/pay/"+legacy[:len(legacy)-1]+"x", nil, nil), http.StatusNotFound)
}
