package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/invoicepdf/pdftest"
	"github.com/payreq/payreq/internal/portaltest"
)

const (
	notificationsPath = "/portal/account/notifications"
	receiptsPath      = "/portal/settings/receipts"
)

// A member chooses what payreq emails them about on their account's
// notifications page: four labelled boxes in a fieldset, invoice paid
// ticked for an Owner who never chose; the form needs its CSRF token, is
// audited, and what was chosen is what is sent: a declined card payment
// emails the member who chose it (no card number in it), a paid invoice
// emails nobody once unticked, and the customer gets a receipt with its
// PDF. A member without payments.view is told that none would reach them.
func TestNotificationsPage(t *testing.T) {
	t.Parallel()
	env, _ := newOwnEnv(t)
	mailbox := portaltest.StartMailbox(t, env)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	c, owner := portaltest.SignedIn(t, env, org, "Owner", auth.PermissionsFor(auth.KindMerchant)...)

	c.Get("/portal/account").Want(t, http.StatusOK).Has(t, `href="`+notificationsPath+`"`)
	p := c.Get(notificationsPath).Want(t, http.StatusOK).Has(t, "<legend>Email me when</legend>",
		`<label for="notify-invoice_paid">An invoice is paid in full</label>`,
		`<label for="notify-card_declined">A card payment or a refund is declined</label>`,
		`<label for="notify-deposit_paid">A deposit is paid into the bank account</label>`,
		`<label for="notify-terminal_failed">A payment at a card terminal fails</label>`,
		`id="notify-invoice_paid" name="notify" value="invoice_paid" checked`,
		`aria-describedby="notify-terminal_failed-hint"`, "nothing sends it yet")
	for _, off := range []string{"card_declined", "deposit_paid", "terminal_failed"} {
		if strings.Contains(p.Body, `value="`+off+`" checked`) {
			t.Errorf("%s is on before any choice", off)
		}
	}

	// Without the CSRF token nothing changes.
	c.Do(http.MethodPost, notificationsPath, url.Values{"notify": {"card_declined"}}, nil).Want(t, http.StatusForbidden)
	if strings.Contains(c.Get(notificationsPath).Body, `value="card_declined" checked`) {
		t.Error("a form without its CSRF token changed the choices")
	}
	// A choice that is none is refused.
	if got := c.Submit(notificationsPath, notificationsPath, url.Values{"notify": {"everything"}}); got.Status != http.StatusBadRequest {
		t.Errorf("an unknown choice answered %d, want 400", got.Status)
	}

	c.Submit(notificationsPath, notificationsPath, url.Values{"notify": {"card_declined", "deposit_paid"}}).
		WantRedirect(t, notificationsPath+"?done=saved")
	p = c.Get(notificationsPath+"?done=saved").Has(t, "Your notification choices were saved.",
		`value="card_declined" checked`, `value="deposit_paid" checked`)
	if strings.Contains(p.Body, `value="invoice_paid" checked`) {
		t.Error("invoice paid is still on after it was unticked")
	}
	var audited int
	if err := env.App.DB.Get(&audited, `SELECT count(*) FROM audit_log WHERE organization_id = $1 AND action = 'notifications changed'
		AND detail = 'emails of: card declined, deposit paid'`, org); err != nil || audited != 1 {
		t.Errorf("%d audit entries (%v), want 1", audited, err)
	}

	// What was chosen is what is sent.
	inv := m.MustCreate(t, m.Body("NOTE-1", "20.00"))
	env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardDecline, Amount: "20.00"})
	declined := mailbox.Wait(owner.Email, "was declined")
	if !strings.Contains(declined.Text, "$20.00 on invoice NOTE-1") || strings.Contains(declined.Text, apitest.CardDecline) {
		t.Errorf("the decline's email:\n%s", declined.Text)
	}
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "20.00"}), http.StatusSeeOther)
	receipt := mailbox.Wait("dana@example.com", "Receipt for invoice NOTE-1")
	if !strings.Contains(receipt.Text, "Thank you for your payment of $20.00") || !strings.Contains(receipt.Text, "ending in 1111") {
		t.Errorf("the receipt's text:\n%s", receipt.Text)
	}
	doc, ok := receipt.Attachments["receipt-NOTE-1.pdf"]
	if !ok {
		t.Fatalf("the receipt has no receipt-NOTE-1.pdf attached")
	}
	if text := pdftest.Read(t, doc).Text; !strings.Contains(strings.ToLower(text), "receipt") || !strings.Contains(text, "$20.00") ||
		!strings.Contains(text, "NOTE-1") {
		t.Errorf("the receipt's PDF reads:\n%s", text)
	}
	// A refund has its receipt too.
	var sales []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=sale&status=approved&invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &sales)
	if len(sales) != 1 {
		t.Fatalf("%d approved sales of NOTE-1, want 1", len(sales))
	}
	salePath := "/portal/card-payments/" + sales[0].Id.String()
	sp := c.Get(salePath)
	c.Post(salePath+"/refund", sp.CSRF(t), url.Values{"key": {between(sp.Body, `name="key" value="`, `"`)}, "amount": {"5.00"}, "confirmed": {"yes"}})
	refunded := mailbox.Wait("dana@example.com", "Refund receipt for invoice NOTE-1")
	if !strings.Contains(refunded.Text, "has refunded $5.00 to your Visa ending in 1111") {
		t.Errorf("the refund receipt's text:\n%s", refunded.Text)
	}
	if doc, ok := refunded.Attachments["refund-receipt-NOTE-1.pdf"]; !ok {
		t.Error("the refund receipt has no refund-receipt-NOTE-1.pdf attached")
	} else if text := pdftest.Read(t, doc).Text; !strings.Contains(text, "Amount refunded") || !strings.Contains(text, "$5.00") {
		t.Errorf("the refund receipt's PDF reads:\n%s", text)
	}

	// The organization's first Owner never chose: invoice paid is on for
	// them; it is off for the Owner who unticked it.
	first, err := env.App.People.Owner(t.Context(), org)
	if err != nil {
		t.Fatal(err)
	}
	paid := mailbox.Wait(first.Email, "Invoice NOTE-1 paid: $20.00")
	if !strings.Contains(paid.Text, "Dana Whitfield paid invoice NOTE-1 of $20.00 in full") {
		t.Errorf("the invoice paid email:\n%s", paid.Text)
	}
	for _, mail := range mailbox.Received() {
		if strings.Contains(mail.Subject, "Invoice NOTE-1 paid") && strings.EqualFold(mail.To[0], owner.Email) {
			t.Errorf("%s was told of the invoice paid, which they unticked", mail.To)
		}
	}

	// A member who may not read payments is told none would reach them;
	// a Member neither sees nor changes the receipts setting.
	clerk, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsCreate)
	p = clerk.Get(notificationsPath).Want(t, http.StatusOK).Has(t, "they need the permission payments.view")
	if strings.Contains(p.Body, receiptsPath) {
		t.Error("a Member is offered the receipts setting")
	}
	clerk.Post(receiptsPath, p.CSRF(t), url.Values{}).Want(t, http.StatusForbidden)

	// The Owner turns receipts off: the next payment's customer gets none.
	c.Get(notificationsPath).Has(t, `id="receipts" name="receipts" value="on" checked`)
	c.Submit(notificationsPath, receiptsPath, url.Values{}).WantRedirect(t, notificationsPath+"?done=receipts")
	p = c.Get(notificationsPath+"?done=receipts").Has(t, "The receipts setting was saved.")
	if strings.Contains(p.Body, `value="on" checked`) {
		t.Error("receipts are still on")
	}
	if err := env.App.DB.Get(&audited, `SELECT count(*) FROM audit_log WHERE organization_id = $1
		AND action = 'receipts setting changed' AND detail = 'receipts to customers turned off'`, org); err != nil || audited != 1 {
		t.Errorf("%d audit entries of the receipts setting (%v), want 1", audited, err)
	}
	quiet := m.MustCreate(t, m.Body("NOTE-2", "7.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, quiet), apitest.Payment{Card: apitest.CardApprove, Amount: "7.00"}), http.StatusSeeOther)
	mailbox.Wait(first.Email, "Invoice NOTE-2 paid") // the payment's other mail went out
	var receipts int
	if err := env.App.DB.Get(&receipts, `SELECT count(*) FROM outbox WHERE kind = 'receipt' AND invoice_id = $1`, quiet.Id); err != nil || receipts != 0 {
		t.Errorf("%d receipts (%v) with receipts off, want none", receipts, err)
	}
}
