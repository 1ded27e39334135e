package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/invoicepdf/pdftest"
)

func record(t *testing.T, m apitest.Merchant, id uuid.UUID, body any, header http.Header) *apitest.Response {
	t.Helper()
	return m.Env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + id.String() + "/payments", Token: m.Token,
		Body: body, Header: header})
}

func removePayment(t *testing.T, m apitest.Merchant, id, payment uuid.UUID) *apitest.Response {
	t.Helper()
	return m.Env.Do(apitest.Request{Method: "DELETE", Path: "/payment-requests/" + id.String() + "/payments/" + payment.String(), Token: m.Token})
}

// eventsOf lists the organization's events of type typ about the invoice
// (its data, or its data's invoice), oldest first.
func eventsOf(t *testing.T, m apitest.Merchant, typ string, invoiceID uuid.UUID) []json.RawMessage {
	t.Helper()
	var list []struct {
		Data json.RawMessage `json:"data"`
	}
	m.Env.Do(apitest.Request{Method: "GET", Path: "/events?limit=100&type=" + typ, Token: m.Token}).JSON(t, &list)
	var out []json.RawMessage
	for i := len(list) - 1; i >= 0; i-- {
		var d struct {
			ID      uuid.UUID `json:"id"`
			Invoice struct {
				ID uuid.UUID `json:"id"`
			} `json:"invoice"`
		}
		if err := json.Unmarshal(list[i].Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.ID == invoiceID || d.Invoice.ID == invoiceID {
			out = append(out, list[i].Data)
		}
	}
	return out
}

// Payments made outside the card move the invoice as a card payment does,
// in exact decimals; they are among the invoice's payments with their
// method and reference, never card payments; removing one moves the
// invoice back.
func TestRecordedPayments(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("REC-1", "100.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "40.00"}), http.StatusSeeOther)

	// 0.1 + 0.2 is 0.30 here: no float on the way.
	for _, amount := range []any{0.1, "0.2"} {
		resp := record(t, m, inv.Id, map[string]any{"amount": amount, "method": "cash"}, nil)
		apitest.Want(t, "record cash", resp.StatusCode, http.StatusCreated)
	}
	received := env.Clock.Now().Add(-26 * time.Hour).UTC().Truncate(time.Second)
	resp := record(t, m, inv.Id, map[string]any{"amount": "59.69", "method": "check", "reference": "Check 1042",
		"receivedAt": received.Format(time.RFC3339)}, nil)
	apitest.Want(t, "record check", resp.StatusCode, http.StatusCreated)
	var got models.Invoice
	resp.JSON(t, &got)
	apitest.Want(t, "amountPaid", got.AmountPaid.Text('f'), "99.99")
	apitest.Want(t, "balance", got.Balance.Text('f'), "0.01")
	apitest.Want(t, "status", got.Status, models.InvoiceStatusPartPaid)
	payments := *got.Payments
	if len(payments) != 4 {
		t.Fatalf("payments %d, want 4: %s", len(payments), resp.Body)
	}
	// Oldest first, by when the money came: the check received yesterday first.
	check := payments[0]
	apitest.Want(t, "check method", check.Method, models.PaymentMethodCheck)
	apitest.WantText(t, "check reference", check.Reference, "Check 1042")
	apitest.Want(t, "check paidAt", check.PaidAt.Equal(received), true)
	apitest.Want(t, "check retRef", check.RetRef == nil && check.LastFour == nil && !check.SavedCard, true)
	apitest.Want(t, "card method", payments[1].Method, models.PaymentMethodCard)
	apitest.Want(t, "card reference", payments[1].Reference == nil, true)
	apitest.Want(t, "cash amounts", payments[2].Amount.Text('f')+" "+payments[3].Amount.Text('f'), "0.10 0.20")

	// More than the balance, then an amount of no cents: refused, stating the balance.
	p := apitest.WantProblem(t, record(t, m, inv.Id, map[string]any{"amount": "0.02", "method": "other"}, nil),
		http.StatusUnprocessableEntity, "Payment amount not allowed")
	if !strings.Contains(p.Detail, "0.01") {
		t.Errorf("detail %q does not state the balance 0.01", p.Detail)
	}
	resp = record(t, m, inv.Id, map[string]any{"amount": "0.01", "method": "bank_transfer", "reference": nil}, nil)
	resp.JSON(t, &got)
	apitest.Want(t, "paid", got.Status, models.InvoiceStatusPaid)
	apitest.Want(t, "paidAt set", got.PaidAt != nil, true)
	p = apitest.WantProblem(t, record(t, m, inv.Id, map[string]any{"amount": "1", "method": "cash"}, nil),
		http.StatusUnprocessableEntity, "Invoice cannot be paid")
	if !strings.Contains(p.Detail, "paid") || !strings.Contains(p.Detail, "0.00") {
		t.Errorf("detail %q does not say paid, balance 0.00", p.Detail)
	}

	// Recorded payments are no card payments.
	var cards []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &cards)
	apitest.Want(t, "card payments of the invoice", len(cards), 1)
	if r := env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + check.Id.String(), Token: m.Token}); r.StatusCode != http.StatusNotFound {
		t.Errorf("a recorded payment read as a card payment: %d", r.StatusCode)
	}

	// Events: each recorded payment, then part_paid or paid, as a card's.
	recorded := eventsOf(t, m, "invoice.payment_recorded", inv.Id)
	apitest.Want(t, "invoice.payment_recorded events", len(recorded), 4)
	var change models.RecordedPaymentChange
	if err := json.Unmarshal(recorded[2], &change); err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "event's payment", change.Payment.Id, check.Id)
	apitest.Want(t, "event's invoice amountPaid", change.Invoice.AmountPaid.Text('f'), "99.99")
	apitest.Want(t, "invoice.paid events", len(eventsOf(t, m, "invoice.paid", inv.Id)), 1)
	apitest.Want(t, "invoice.part_paid events", len(eventsOf(t, m, "invoice.part_paid", inv.Id)), 4) // the card's and three

	// Removing the check: paid → part_paid, paidAt cleared; the card
	// payment cannot be removed; a second removal finds nothing.
	resp = removePayment(t, m, inv.Id, check.Id)
	apitest.Want(t, "remove", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &got)
	apitest.Want(t, "status after removal", got.Status, models.InvoiceStatusPartPaid)
	apitest.Want(t, "balance after removal", got.Balance.Text('f'), "59.69")
	apitest.Want(t, "paidAt after removal", got.PaidAt == nil, true)
	apitest.Want(t, "payments after removal", len(*got.Payments), 4)
	apitest.WantProblem(t, removePayment(t, m, inv.Id, check.Id), http.StatusNotFound, "")
	apitest.WantProblem(t, removePayment(t, m, inv.Id, payments[1].Id), http.StatusUnprocessableEntity, "Card payments cannot be removed")
	apitest.WantProblem(t, removePayment(t, m, inv.Id, uuid.New()), http.StatusNotFound, "")
	removed := eventsOf(t, m, "invoice.payment_removed", inv.Id)
	if len(removed) != 1 {
		t.Fatalf("invoice.payment_removed events: %d", len(removed))
	}
	if err := json.Unmarshal(removed[0], &change); err != nil {
		t.Fatal(err)
	}
	apitest.WantText(t, "removed event's payment", change.Payment.Reference, "Check 1042")
	apitest.Want(t, "removed event's invoice", change.Invoice.Status, models.InvoiceStatusPartPaid)

	// All of it removed: open again.
	for _, pay := range (*got.Payments)[1:] {
		if pay.Method != models.PaymentMethodCard {
			removePayment(t, m, inv.Id, pay.Id)
		}
	}
	after, _ := m.Read(t, inv.Id)
	apitest.Want(t, "amountPaid with the card's only", after.AmountPaid.Text('f'), "40.00")

	// A cancelled invoice keeps its payments.
	other := m.MustCreate(t, m.Body("REC-2", "10.00"))
	record(t, m, other.Id, map[string]any{"amount": "5", "method": "cash"}, nil).JSON(t, &got)
	env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + other.Id.String() + "/cancel", Token: m.Token})
	apitest.WantProblem(t, removePayment(t, m, other.Id, (*got.Payments)[0].Id), http.StatusUnprocessableEntity, "Payment cannot be removed")
}

// Bad input is a 400 keyed by the field and records nothing.
func TestRecordedPaymentRules(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("RULES-1", "10.00"))
	future := env.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		field string
		body  map[string]any
	}{
		{"amount", map[string]any{"amount": "1.005", "method": "cash"}},
		{"amount", map[string]any{"amount": 0, "method": "cash"}},
		{"amount", map[string]any{"amount": "-1", "method": "cash"}},
		{"method", map[string]any{"amount": "1", "method": "bitcoin"}},
		{"method", map[string]any{"amount": "1"}},
		{"receivedAt", map[string]any{"amount": "1", "method": "cash", "receivedAt": future}},
		{"reference", map[string]any{"amount": "1", "method": "check", "reference": strings.Repeat("é", 101)}},
		{"amout", map[string]any{"amout": "1", "amount": "1", "method": "cash"}},
	} {
		resp := record(t, m, inv.Id, c.body, nil)
		p := apitest.WantProblem(t, resp, http.StatusBadRequest, "")
		if p.Errors == nil || len((*p.Errors)[c.field]) == 0 {
			t.Errorf("%v: errors %v, want one keyed %s", c.body, p.Errors, c.field)
		}
	}
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "payments after refusals", len(*got.Payments), 0)
	apitest.WantProblem(t, record(t, m, uuid.New(), map[string]any{"amount": "1", "method": "cash"}, nil), http.StatusNotFound, "")
}

// An Idempotency-Key records once: a replay answers 200 with the invoice
// as it is, another body with the key is a 422, and eight requests at
// once with one key record one payment.
func TestRecordedPaymentIdempotency(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("IDEM-REC-1", "50.00"))
	key := http.Header{"Idempotency-Key": {uuid.NewString()}}
	body := map[string]any{"amount": "10", "method": "check", "reference": "Check 7"}
	apitest.Want(t, "first", record(t, m, inv.Id, body, key).StatusCode, http.StatusCreated)
	replay := record(t, m, inv.Id, map[string]any{"reference": "Check 7", "method": "check", "amount": 10.00}, key)
	apitest.Want(t, "replay", replay.StatusCode, http.StatusOK)
	apitest.Want(t, "Idempotent-Replayed", replay.Header.Get("Idempotent-Replayed"), "true")
	var got models.Invoice
	replay.JSON(t, &got)
	apitest.Want(t, "amountPaid after replay", got.AmountPaid.Text('f'), "10.00")
	apitest.WantProblem(t, record(t, m, inv.Id, map[string]any{"amount": "11", "method": "check", "reference": "Check 7"}, key),
		http.StatusUnprocessableEntity, "Idempotency key reused")
	other := m.MustCreate(t, m.Body("IDEM-REC-2", "50.00"))
	apitest.WantProblem(t, record(t, m, other.Id, body, key), http.StatusUnprocessableEntity, "Idempotency key reused")

	// Eight at once with one key.
	key = http.Header{"Idempotency-Key": {uuid.NewString()}}
	created := apitest.AtOnce(t, 8, func() int {
		return record(t, m, inv.Id, map[string]any{"amount": "5", "method": "cash"}, key).StatusCode
	})
	apitest.Want(t, "201s among 8 with one key", created, 1)
	got, _ = m.Read(t, inv.Id)
	apitest.Want(t, "amountPaid after 8 with one key", got.AmountPaid.Text('f'), "15.00")
	apitest.Want(t, "payments", len(*got.Payments), 2)
}

// The invoice as a PDF, from the API and from the pay page, reads back
// with its number, lines, payments and balance, and its QR code is the
// pay link; each card payment's receipt is a PDF too.
func TestInvoicePDF(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	a, b := apitest.Line(2, "12.50"), apitest.Line(1, "5")
	a["description"], b["description"] = "Chafing dish rental", "Delivery and setup"
	body := m.Body("PDF-1", "30.00", a, b)
	d := "2026-04-30"
	body["dueDate"] = d
	inv := m.MustCreate(t, body)
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"}), http.StatusSeeOther)
	record(t, m, inv.Id, map[string]any{"amount": "5.25", "method": "check", "reference": "Check 1042"}, nil)

	path := "/payment-requests/" + inv.Id.String()
	for _, accept := range []string{"application/pdf", "application/json;q=0.5, application/pdf", "application/pdf, */*;q=0.1"} {
		resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: m.Token, Header: http.Header{"Accept": {accept}}})
		apitest.Want(t, accept+": status", resp.StatusCode, http.StatusOK)
		apitest.Want(t, accept+": Content-Type", resp.Header.Get("Content-Type"), "application/pdf")
		apitest.Want(t, accept+": Content-Disposition", resp.Header.Get("Content-Disposition"), `attachment; filename="invoice-PDF-1.pdf"`)
		doc := pdftest.Read(t, resp.Body)
		for _, want := range []string{"PDF-1", "Chafing dish rental", "Delivery and setup", "$25.00", "$5.00", "$30.00",
			"Balance due", "$14.75", "April 30, 2026", "Visa ending in 1111", "Check, reference Check 1042"} {
			if !strings.Contains(doc.Text, want) {
				t.Errorf("%s: the PDF lacks %q:\n%s", accept, want, doc.Text)
			}
		}
		apitest.Want(t, accept+": QR code", doc.QR(t), *inv.Link)
	}
	for _, accept := range []string{"", "*/*", "application/json", "application/json, application/pdf;q=0.9", "text/html"} {
		resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: m.Token, Header: http.Header{"Accept": {accept}}})
		apitest.Want(t, "Accept "+accept, resp.Header.Get("Content-Type"), "application/json")
	}
	// Errors stay problems; another organization's invoice is a 404.
	theirs := apitest.NewMerchant(t, env)
	resp := env.Do(apitest.Request{Method: "GET", Path: path, Token: theirs.Token, Header: http.Header{"Accept": {"application/pdf"}}})
	apitest.WantProblem(t, resp, http.StatusNotFound, "")

	// The pay page offers the same document, and each receipt's.
	payPath := apitest.PayPath(t, inv)
	page := env.Visit(t, "GET", payPath, nil, nil)
	if !strings.Contains(page.Body, `href="`+payPath+`/invoice.pdf"`) {
		t.Errorf("the pay page has no link to its PDF:\n%s", page.Body)
	}
	fromPage := env.Visit(t, "GET", payPath+"/invoice.pdf", nil, nil)
	apitest.Want(t, "pay page PDF type", fromPage.Header.Get("Content-Type"), "application/pdf")
	doc := pdftest.Read(t, []byte(fromPage.Body))
	apitest.Want(t, "pay page PDF's QR code", doc.QR(t), *inv.Link)
	got, _ := m.Read(t, inv.Id)
	card := (*got.Payments)[0]
	receipt := env.Visit(t, "GET", payPath+"/receipt/"+card.Id.String(), nil, nil)
	if !strings.Contains(receipt.Body, card.Id.String()+`.pdf"`) {
		t.Errorf("the receipt has no link to its PDF:\n%s", receipt.Body)
	}
	receiptPDF := env.Visit(t, "GET", payPath+"/receipt/"+card.Id.String()+".pdf", nil, nil)
	doc = pdftest.Read(t, []byte(receiptPDF.Body))
	for _, want := range []string{"RECEIPT", "PDF-1", "$10.00", "Visa ending in 1111", "Balance after this payment", "$20.00"} {
		if !strings.Contains(doc.Text, want) {
			t.Errorf("the receipt PDF lacks %q:\n%s", want, doc.Text)
		}
	}
	check := (*got.Payments)[1]
	apitest.Want(t, "a recorded payment's receipt", env.Visit(t, "GET", payPath+"/receipt/"+check.Id.String()+".pdf", nil, nil).StatusCode, http.StatusNotFound)
}
