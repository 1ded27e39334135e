package portal_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/invoicepdf/pdftest"
	"github.com/payreq/payreq/internal/web"
)

// An invoice's page shows all it is: lines with their tax and the totals
// under them, payments of every method with their refunds, the customer's
// saved cards, its delivery, reminders, its events (times in its
// location's zone), the pay link and the PDF; it is sent again and
// cancelled from there, each in the audit log.
func TestInvoicePageAndItsActions(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	taxed := apitest.Line("1", "10")
	taxed["taxRate"] = "8.875"
	b := m.Body("SHOW-1", "50.89", apitest.Line("2", "20"), taxed)
	b["customerName"], b["memo"], b["dueDate"], b["send"] = "Ada Park", "Second floor", "2031-05-01", true
	inv := m.MustCreate(t, b)
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "20.00", Save: true}), http.StatusSeeOther)
	k := env.NewKey(t, uuid.MustParse(m.Org), auth.PaymentsRefund)
	refundToken := env.Token(k.KeyID, k.Secret)
	read, _ := m.Read(t, inv.Id)
	sale := (*read.Payments)[0]
	r := env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + sale.Id.String() + "/refund", Token: refundToken,
		Body: map[string]any{"amount": "5.00", "reason": "One tile cracked"}})
	apitest.Want(t, "refund", r.StatusCode, http.StatusCreated)
	r = env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "7.50", "method": "check", "reference": "Check 1042"}})
	apitest.Want(t, "record", r.StatusCode, http.StatusCreated)

	path := "/portal/invoices/" + inv.Id.String()
	p := c.Get(path).Want(t, http.StatusOK)
	p.Has(t, "Invoice SHOW-1", "Part paid", "$50.89", "$27.50", "$23.39", "Ada Park", "Second floor", `<time datetime="2031-05-01">`,
		"Visa ending in 1111", "Check", "Check 1042", "$7.50", "One tile cracked", "$5.00", "Saved cards of the customer",
		"invoice.created", "invoice.sent", "card_payment.approved", "card_payment.refunded", "invoice.payment_recorded",
		m.MIDs[0].Mid, *inv.Link, "/pdf", "Send the pay link again", scriptTag)
	// Each line's tax (none on the first), then subtotal, tax and total.
	p.Has(t, `<td data-label="Tax" class="num">—</td>`, `<td data-label="Tax" class="num">8.875% · $0.89</td>`,
		"<dt>Subtotal</dt><dd>$50.00</dd>\n<dt>Tax</dt><dd>$0.89</dd>\n<dt class=\"due\">Total</dt><dd class=\"due\">$50.89</dd>")
	if !strings.Contains(p.Body, "-08:00\">") && !strings.Contains(p.Body, "-07:00\">") {
		t.Error("no time in the location's zone")
	}
	if csp := p.Header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "; script-src "+env.URL+"/portal/assets/"+web.CopyScriptName) {
		t.Errorf("the page allows scripts by %q, want the copy button's alone", csp)
	}
	// Only the recorded payment can be removed here; a card payment is refunded.
	if n := strings.Count(p.Body, "/payments/"); n != 1 || !strings.Contains(p.Body, "/payments/"+recordedOf(t, m, inv.Id).String()+"/remove") {
		t.Errorf("%d remove forms, want the recorded payment's alone", n)
	}

	pdf := c.Get(path+"/pdf").Want(t, http.StatusOK)
	if ct := pdf.Header.Get("Content-Type"); ct != "application/pdf" || !strings.Contains(pdf.Header.Get("Content-Disposition"), "invoice-SHOW-1.pdf") {
		t.Errorf("PDF answered as %q, %q", ct, pdf.Header.Get("Content-Disposition"))
	}
	if text := pdftest.Read(t, []byte(pdf.Body)).Text; !strings.Contains(text, "SHOW-1") {
		t.Errorf("the PDF does not name the invoice:\n%s", text)
	}

	// Sent again: a new send, recorded.
	sentBefore := read.SentAt
	c.Post(path+"/send", p.CSRF(t), nil).WantRedirect(t, path+"?done=sent")
	after, _ := m.Read(t, inv.Id)
	if after.SentAt == nil || sentBefore == nil || after.SentAt.Before(*sentBefore) {
		t.Errorf("sentAt %v after a send (was %v)", after.SentAt, sentBefore)
	}
	c.Get(path+"?done=sent").Has(t, "on its way")

	// Cancelled after its confirmation.
	confirm := c.Get(path+"/cancel").Want(t, http.StatusOK).Has(t, "Cancel invoice SHOW-1?", "cannot be undone")
	c.Post(path+"/cancel", confirm.CSRF(t), nil).WantRedirect(t, path+"?done=cancelled")
	cancelled, _ := m.Read(t, inv.Id)
	apitest.Want(t, "status", cancelled.Status, models.InvoiceStatusCancelled)
	if cancelled.CancelledByName == nil || !strings.HasPrefix(*cancelled.CancelledByName, "Member ") {
		t.Errorf("cancelledByName %v, want the member's name", cancelled.CancelledByName)
	}
	gone := c.Get(path).Has(t, "Cancelled", "cancelled <time")
	for _, absent := range []string{"Send the pay link", "/cancel\"", "/remove", "Balance"} {
		if strings.Contains(gone.Body, absent) {
			t.Errorf("a cancelled invoice's page offers %q", absent)
		}
	}
	// Refusals of the domain: a page saying why, nothing changed.
	c.Post(path+"/send", p.CSRF(t), nil).Want(t, http.StatusUnprocessableEntity).Has(t, "only open and part_paid invoices can be sent")
	c.Post(path+"/cancel", p.CSRF(t), nil).Want(t, http.StatusUnprocessableEntity).Has(t, "Invoice cannot be cancelled")
	for _, action := range []string{"invoice sent", "invoice cancelled"} {
		if got := auditOf(t, env, uuid.MustParse(m.Org), action); len(got) != 1 || !strings.Contains(got[0], "SHOW-1") {
			t.Errorf("audit entries %q: %q", action, got)
		}
	}
	c.Get("/portal/invoices/not-an-id").Want(t, http.StatusNotFound)
	c.Get("/portal/invoices/"+uuid.NewString()).Want(t, http.StatusNotFound)
}

// recordedOf is the id of the invoice's one recorded payment.
func recordedOf(t *testing.T, m apitest.Merchant, id uuid.UUID) uuid.UUID {
	t.Helper()
	inv, raw := m.Read(t, id)
	for _, p := range *inv.Payments {
		if p.Method != models.PaymentMethodCard {
			return p.Id
		}
	}
	t.Fatalf("no recorded payment: %s", raw)
	return uuid.Nil
}

// The form recording a payment made outside the card: refused values
// beside their fields; sent twice, it records once (its own idempotency
// key); the payment moves the invoice and is in the audit log; removed,
// the invoice moves back.
func TestRecordPaymentFormRecordsOnce(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	inv := m.MustCreate(t, m.Body("REC-1", "100.00"))
	path := "/portal/invoices/" + inv.Id.String()
	p := c.Get(path+"/payments").Want(t, http.StatusOK).Has(t, `value="100.00"`, "Record the payment")
	key := formKey(t, p)
	for _, bad := range []struct {
		pairs          []string
		status         int
		field, message string
	}{
		{[]string{"amount", "ten", "method", "cash"}, http.StatusBadRequest, "amount", "dollars and cents"},
		{[]string{"amount", "100.01", "method", "cash"}, http.StatusUnprocessableEntity, "amount", "at most the balance of 100.00"},
		{[]string{"amount", "10", "method", "barter"}, http.StatusBadRequest, "method", "must be one of"},
		{[]string{"amount", "10", "method", "cash", "receivedAt", "2999-01-01"}, http.StatusBadRequest, "receivedAt", "not be in the future"},
		{[]string{"amount", "10", "method", "cash", "reference", strings.Repeat("r", 101)}, http.StatusBadRequest, "reference", "at most 100"},
	} {
		f := form(append(bad.pairs, "idempotencyKey", key)...)
		c.Post(path+"/payments", p.CSRF(t), f).Want(t, bad.status).ErrorBeside(t, bad.field, bad.message)
	}
	good := form("idempotencyKey", key, "amount", "40", "method", "check", "reference", "Check 77", "receivedAt", "2026-01-05")
	c.Post(path+"/payments", p.CSRF(t), good).WantRedirect(t, path+"?done=recorded")
	c.Post(path+"/payments", p.CSRF(t), good).WantRedirect(t, path+"?done=recorded")
	read, raw := m.Read(t, inv.Id)
	if len(*read.Payments) != 1 || read.AmountPaid.Text('f') != "40.00" || read.Status != models.InvoiceStatusPartPaid {
		t.Fatalf("after the form sent twice: %s", raw)
	}
	if got := (*read.Payments)[0]; got.Reference == nil || *got.Reference != "Check 77" || got.PaidAt.Format("2006-01-02") != "2026-01-05" {
		t.Errorf("recorded as %+v", got)
	}
	if got := auditOf(t, env, uuid.MustParse(m.Org), "payment recorded"); len(got) != 1 || !strings.Contains(got[0], "$40.00") {
		t.Errorf("audit entries: %q", got)
	}
	c.Get(path+"?done=recorded").Has(t, "The payment was recorded.", "Check 77", "$60.00")

	detail := c.Get(path)
	c.Post(path+"/payments/"+(*read.Payments)[0].Id.String()+"/remove", detail.CSRF(t), nil).WantRedirect(t, path+"?done=removed")
	back, _ := m.Read(t, inv.Id)
	apitest.Want(t, "status after removal", back.Status, models.InvoiceStatusOpen)
	if got := auditOf(t, env, uuid.MustParse(m.Org), "payment removed"); len(got) != 1 {
		t.Errorf("audit entries of the removal: %q", got)
	}
	c.Post(path+"/payments/"+(*read.Payments)[0].Id.String()+"/remove", detail.CSRF(t), nil).Want(t, http.StatusNotFound)

	// Paid in full, the invoice takes no more.
	p = c.Get(path + "/payments")
	c.Post(path+"/payments", p.CSRF(t), form("idempotencyKey", formKey(t, p), "amount", "100", "method", "cash")).WantRedirect(t, path+"?done=recorded")
	c.Get(path+"/payments").Has(t, "takes no payment")
	c.Post(path+"/payments", p.CSRF(t), form("idempotencyKey", "another", "amount", "1", "method", "cash")).Want(t, http.StatusUnprocessableEntity).Has(t, "takes no payment")
}
