package faults

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The process is killed (SIGKILL) in the middle of a recurring invoice's
// automatic charge: the processor charged the stored card and has not
// answered. What is left is the pending charge, by the occurrence's order
// id, and no payment. The next process voids it once it is due, then
// charges the occurrence again: one charge standing, one approved payment,
// the invoice paid.
func TestKilledMidAutoCharge(t *testing.T) {
	t.Parallel() // waits for the settlement more than it works
	g := startGateway(t, func(n int) authPlan {
		if n == 1 {
			return authPlan{slow: true} // charged, and the answer never comes
		}
		return authPlan{}
	})
	dsn := newDatabase(t)
	d := newDeployment(t, dsn)
	d.Env["PAYREQ_PROCESSOR"] = "cardpointe"
	d.Env["PAYREQ_CARDPOINTE_URL"] = g.url()
	d.Env["PAYREQ_SCHEDULE_POLL_INTERVAL"] = "200ms"
	d.Env["PAYREQ_PENDING_POLL_INTERVAL"] = "200ms"
	keys := d.seed(t)
	first := d.start(t, "first", nil)
	c := httpClient("127.0.0.1", 60*time.Second)
	tok := token(t, c, first.URL, keys.Merchant.KeyID, keys.Merchant.Secret)
	mid := firstMID(t, c, first.URL, tok)

	a := send(c, "POST", first.URL+"/customers", tok, map[string]any{"email": "autopay@example.com", "name": "Pat Doe"}, nil)
	if a.Status != http.StatusCreated {
		t.Fatalf("customer: %v", a)
	}
	customer := created(t, a)
	db := openDB(t, dsn)
	// A card saved with consent to future charges (the gateway stand-in
	// keeps no profiles, so it is written as the pay page writes it).
	card := uuid.NewString()
	if _, err := db.Exec(`INSERT INTO saved_cards (id, organization_id, merchant_account_id, customer_id, profile_id, account_id,
			card_brand, last_four, expiry, saved_at, saved_by_name, charge_consent_at, charge_consent)
		VALUES ($1, $2, $3, $4, '16392957743216541111', '1', 'Visa', '1111', '1239', now(), 'Pat Doe', now(),
			'Let the business charge this card for future invoices')`, card, keys.Merchant.OrganizationID, mid, customer); err != nil {
		t.Fatal(err)
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	a = send(c, "POST", first.URL+"/recurring-invoices", tok, map[string]any{
		"merchantAccountId": mid, "customerId": customer, "invoiceNumberPrefix": "AUTO", "amount": "30.00", "lines": nil,
		"memo": nil, "poNumber": nil, "delivery": nil, "reminders": nil, "interval": "month", "intervalCount": 1,
		"startOn": time.Now().In(la).Format(time.DateOnly), "endAfter": nil, "endOn": nil, "dueDays": 14, "send": true,
		"autoPay": map[string]any{"savedCardId": card},
	}, nil)
	if a.Status != http.StatusCreated {
		t.Fatalf("recurring invoice: %v", a)
	}
	series := uuid.MustParse(created(t, a))
	order := uuid.NewSHA1(series, []byte("occurrence 0")).String()

	eventually(t, 20*time.Second, "the processor has charged the stored card", func() bool {
		_, ok := g.captured()[order]
		return ok
	})
	first.kill()

	count := func(query string) int {
		var n int
		if err := db.Get(&n, query); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM card_payments WHERE status = 'approved'`); n != 0 {
		t.Errorf("%d payments after the kill, want none", n)
	}
	var pending []string
	if err := db.Select(&pending, `SELECT order_id::text FROM pending_charges`); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0] != order {
		t.Fatalf("pending charges %v, want the occurrence's order %s", pending, order)
	}

	d.start(t, "second", nil)
	// Stands in for time passing: the pending charge falls due 3 minutes
	// after it was written, and the automatic charge is looked at again.
	if _, err := db.Exec(`UPDATE pending_charges SET void_after = now() WHERE order_id = $1`, order); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pending charge is voided", func() bool {
		return count(`SELECT count(*) FROM pending_charges WHERE order_id = '`+order+`'`) == 0
	})
	if _, err := db.Exec(`UPDATE auto_charges SET next_at = now()`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the occurrence is charged again and paid", func() bool {
		return count(`SELECT count(*) FROM auto_charges`) == 0
	})
	if v := g.voidRequests(); v[order] != 1 {
		t.Errorf("void requests %v, want one for order %s", v, order)
	}
	if ledger := g.captured(); len(ledger) != 1 {
		t.Errorf("charges standing %v, want one", ledger)
	}
	if n := count(`SELECT count(*) FROM card_payments WHERE status = 'approved'`); n != 1 {
		t.Errorf("%d approved payments, want one", n)
	}
	if n := count(`SELECT count(*) FROM invoices i JOIN recurring_occurrences o ON o.invoice_id = i.id WHERE i.status = 'paid'`); n != 1 {
		t.Errorf("%d paid invoices of the series, want one", n)
	}
}
