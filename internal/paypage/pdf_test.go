package paypage_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
)

// The pay page's PDF of an invoice is drawn once per version of the
// invoice: asked again unchanged, the kept document is sent; after a
// payment changes what it shows, it is drawn anew, once. Anyone holding
// the link asks at most 20 documents a minute from one address: the 21st
// is a 429 with Retry-After, and a minute later the link answers again.
func TestInvoicePDFDrawnOncePerVersionAndLimited(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("PDF-1", "80.00"))
	path := apitest.PayPath(t, inv) + "/invoice.pdf"
	get := func() apitest.Page { return env.Visit(t, "GET", path, nil, nil) }
	draws := env.App.PDFs.Draws

	first := get()
	apitest.WantStatus(t, first, http.StatusOK)
	if again := get(); again.Body != first.Body || draws() != 1 {
		t.Fatalf("an unchanged invoice asked twice: drawn %d times, same document %v", draws(), again.Body == first.Body)
	}
	r := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "30.00", "method": "cash"}})
	if r.StatusCode != http.StatusCreated && r.StatusCode != http.StatusOK {
		t.Fatalf("record a payment: %d %s", r.StatusCode, r.Body)
	}
	changed := get()
	if changed.Body == first.Body || draws() != 2 {
		t.Fatalf("after a payment: drawn %d times in all, want 2; a new document %v", draws(), changed.Body != first.Body)
	}
	for n := 4; n <= 20; n++ {
		apitest.WantStatus(t, get(), http.StatusOK)
	}
	if draws() != 2 {
		t.Errorf("20 requests of 2 versions drew %d documents", draws())
	}
	limited := get()
	apitest.WantStatus(t, limited, http.StatusTooManyRequests)
	if limited.Header.Get("Retry-After") == "" {
		t.Error("the 429 has no Retry-After")
	}
	env.Clock.Advance(time.Minute)
	apitest.WantStatus(t, get(), http.StatusOK)
}
