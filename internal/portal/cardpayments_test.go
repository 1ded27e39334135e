package portal_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
	"github.com/payreq/payreq/internal/processor"
)

// paidSale makes an invoice of amount, pays it whole on its pay page
// with card and returns the sale.
func paidSale(t *testing.T, env *apitest.Env, m apitest.Merchant, number, amount, card string) models.CardPayment {
	t.Helper()
	inv := m.MustCreate(t, m.Body(number, amount))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: card, Amount: amount}), http.StatusSeeOther)
	var sales []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=sale&invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &sales)
	if len(sales) != 1 || sales[0].Status != models.CardPaymentStatusApproved {
		t.Fatalf("the sale of %s: %+v", number, sales)
	}
	return sales[0]
}

// refundsOf are the refunds of sale as the API lists them.
func refundsOf(t *testing.T, env *apitest.Env, m apitest.Merchant, sale uuid.UUID) []models.CardPayment {
	t.Helper()
	var all, out []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=refund&limit=100", Token: m.Token}).JSON(t, &all)
	for _, r := range all {
		if r.RefundOf != nil && *r.RefundOf == sale {
			out = append(out, r)
		}
	}
	return out
}

var refundLocation = regexp.MustCompile(`^/portal/card-payments/([0-9a-f-]{36})\?done=refunded$`)

// A refund in the portal goes through the API's refund: a part of the
// sale, with its reason, answered with the refund's page; the same form
// sent twice (a double click, a reload) refunds once and answers the
// same; the refund is the API's card payment, named after the member, in
// the audit log once. The rest is then refunded by a new form, after
// which no form is offered.
func TestRefundFormSentTwiceRefundsOnce(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	sale := paidSale(t, env, m, "PR-1", "100.00", apitest.CardApprove)
	c, member := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView, auth.PaymentsRefund)
	path := "/portal/card-payments/" + sale.Id.String()

	page := c.Get(path).Want(t, http.StatusOK).Has(t, "Review the refund", `value="100.00"`, "At most what is left: $100.00", "PR-1")
	key := between(page.Body, `name="key" value="`, `"`)
	form := url.Values{"key": {key}, "amount": {"30.00"}, "reason": {"Damaged in transit"}, "confirmed": {"yes"}}
	first := c.Post(path+"/refund", page.CSRF(t), form)
	loc := refundLocation.FindStringSubmatch(first.Location)
	if first.Status != http.StatusSeeOther || loc == nil {
		t.Fatalf("the refund answered %d to %q:\n%s", first.Status, first.Location, first.Body)
	}
	c.Post(path+"/refund", page.CSRF(t), form).WantRedirect(t, first.Location)
	refunds := refundsOf(t, env, m, sale.Id)
	if len(refunds) != 1 || refunds[0].Id.String() != loc[1] || refunds[0].Amount.Text('f') != "30.00" ||
		apitest.Text(refunds[0].Reason) != "Damaged in transit" || !strings.HasPrefix(apitest.Text(refunds[0].CreatedByName), "Member ") {
		t.Fatalf("refunds after the form sent twice: %+v", refunds)
	}
	c.Get(first.Location).Want(t, http.StatusOK).Has(t, "is approved", "Damaged in transit", `href="`+path+`"`)
	c.Get(path).Has(t, "$30.00", "At most what is left: $70.00", `value="70.00"`, "Damaged in transit")

	// A new form for the rest (its own key), the amount it is filled with.
	page = c.Get(path)
	if next := between(page.Body, `name="key" value="`, `"`); next == key {
		t.Fatal("a new form carries the key of the one sent")
	}
	c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {between(page.Body, `name="key" value="`, `"`)}, "amount": {"70.00"}, "confirmed": {"yes"}}).Want(t, http.StatusSeeOther)
	if got := c.Get(path); strings.Contains(got.Body, "Review the refund") {
		t.Error("the form is offered for a sale refunded whole")
	}
	if refunds := refundsOf(t, env, m, sale.Id); len(refunds) != 2 {
		t.Errorf("%d refunds, want 2", len(refunds))
	}
	var audit []string
	if err := env.App.DB.Select(&audit, `SELECT detail FROM audit_log WHERE action = 'card payment refunded' AND actor LIKE $1`, "%"+member.Email+"%"); err != nil {
		t.Fatal(err)
	}
	if len(audit) != 2 || !strings.Contains(audit[0]+audit[1], "$30.00") || !strings.Contains(audit[0]+audit[1], "$70.00") {
		t.Errorf("the audit log's refunds: %q", audit)
	}
}

// Two submissions of one form at the same moment refund once.
func TestRefundFormSentTwiceAtOnceRefundsOnce(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	sale := paidSale(t, env, m, "PR-2", "40.00", apitest.CardApprove)
	c, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView, auth.PaymentsRefund)
	path := "/portal/card-payments/" + sale.Id.String()
	page := c.Get(path)
	form := url.Values{"key": {between(page.Body, `name="key" value="`, `"`)}, "amount": {"10.00"}, "confirmed": {"yes"}}
	var wg sync.WaitGroup
	answers := make([]portaltest.Page, 4)
	for i := range answers {
		wg.Go(func() { answers[i] = c.Post(path+"/refund", page.CSRF(t), form) })
	}
	wg.Wait()
	for _, a := range answers {
		if a.Status != http.StatusSeeOther || a.Location != answers[0].Location {
			t.Errorf("answered %d to %q, want 303 to %q", a.Status, a.Location, answers[0].Location)
		}
	}
	if refunds := refundsOf(t, env, m, sale.Id); len(refunds) != 1 {
		t.Errorf("%d refunds of one form sent four times at once", len(refunds))
	}
}

// What the API refuses, the form refuses, beside its field, the values
// kept and nothing refunded: an amount that is no amount, 0, more than two
// decimals, more than what is left (saying what is left); the form used
// again with other values (422, and a new form); a refund's refund (422).
// A declined refund is the refund's page saying so. A member without
// payments.refund sees no form and gets 403.
func TestRefundRefusals(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	sale := paidSale(t, env, m, "PR-3", "50.00", apitest.CardApprove)
	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView, auth.PaymentsRefund)
	path := "/portal/card-payments/" + sale.Id.String()
	page := c.Get(path)
	key := between(page.Body, `name="key" value="`, `"`)
	for _, tc := range []struct {
		amount, status, text string
	}{
		{"ten dollars", "400", "dollars and cents"},
		{"0", "400", "greater than 0"},
		{"1.234", "400", "2 decimal places"},
		{"50.01", "422", "At most $50.00"},
		{"", "400", "Enter the amount to refund: at most $50.00"},
	} {
		got := c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {tc.amount}, "reason": {"kept"}, "confirmed": {"yes"}})
		if fmt.Sprint(got.Status) != tc.status {
			t.Errorf("amount %q: %d, want %s", tc.amount, got.Status, tc.status)
		}
		got.ErrorBeside(t, "amount", tc.text).Has(t, `value="`+tc.amount+`"`, ">kept</textarea>")
	}
	c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {"5.00"}, "reason": {strings.Repeat("r", 501)}, "confirmed": {"yes"}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "reason", "500")
	if n := len(refundsOf(t, env, m, sale.Id)); n != 0 {
		t.Fatalf("%d refunds made by refused forms", n)
	}

	c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {"5.00"}, "confirmed": {"yes"}}).Want(t, http.StatusSeeOther)
	again := c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {"6.00"}, "confirmed": {"yes"}}).Want(t, http.StatusUnprocessableEntity).Has(t, "already made a refund")
	if next := between(again.Body, `name="key" value="`, `"`); next == key || next == "" {
		t.Errorf("the form after a 422 carries key %q", next)
	}
	refunds := refundsOf(t, env, m, sale.Id)
	if len(refunds) != 1 {
		t.Fatalf("%d refunds, want 1", len(refunds))
	}
	refundPath := "/portal/card-payments/" + refunds[0].Id.String()
	if got := c.Get(refundPath).Want(t, http.StatusOK); strings.Contains(got.Body, "Review the refund") {
		t.Error("a refund offers a refund form")
	}
	c.Post(refundPath+"/refund", page.CSRF(t), url.Values{"key": {"k-refund"}, "amount": {"1.00"}, "confirmed": {"yes"}}).Want(t, http.StatusUnprocessableEntity).Has(t, "Only an approved sale can be refunded")

	stubborn := paidSale(t, env, m, "PR-4", "20.00", processor.TestCardRefundDeclines)
	spath := "/portal/card-payments/" + stubborn.Id.String()
	sp := c.Get(spath)
	declined := c.Post(spath+"/refund", sp.CSRF(t), url.Values{"key": {between(sp.Body, `name="key" value="`, `"`)}, "amount": {"20.00"}, "confirmed": {"yes"}}).Want(t, http.StatusSeeOther)
	c.Get(declined.Location).Has(t, "The refund was declined: Refund declined by issuer", "Declined")

	viewer, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)
	if got := viewer.Get(path).Want(t, http.StatusOK); strings.Contains(got.Body, "Review the refund") || strings.Contains(got.Body, `name="key"`) {
		t.Error("a member without payments.refund is offered the form")
	}
	viewer.Post(path+"/refund", page.CSRF(t), url.Values{"key": {"k-viewer"}}).Want(t, http.StatusForbidden)
	c.Do("POST", path+"/refund", url.Values{"key": {"k-forged"}}, nil).Want(t, http.StatusForbidden)
	if n := len(refundsOf(t, env, m, sale.Id)); n != 1 {
		t.Errorf("%d refunds after refused forms, want 1", n)
	}
}

// failingRefunds is the simulator whose refunds fail while failing is set.
type failingRefunds struct {
	processor.Processor
	mu      sync.Mutex
	failing bool
}

func (f *failingRefunds) Refund(ctx context.Context, r processor.Refund) (processor.RefundResult, error) {
	f.mu.Lock()
	failing := f.failing
	f.mu.Unlock()
	if failing {
		return processor.RefundResult{}, fmt.Errorf("test: %w: %w", processor.ErrUnavailable, processor.ErrProcessorError)
	}
	return f.Processor.Refund(ctx, r)
}

// A processor that fails is a 502, the form again with its values and its
// key, nothing refunded; the same form sent once the processor answers
// refunds.
func TestRefundFormWhenTheProcessorFails(t *testing.T) {
	t.Parallel()
	fail := &failingRefunds{failing: true}
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{WrapProcessor: func(p processor.Processor) processor.Processor {
		fail.Processor = p
		return fail
	}})
	m := apitest.NewMerchant(t, env)
	sale := paidSale(t, env, m, "PR-5", "20.00", apitest.CardApprove)
	c, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView, auth.PaymentsRefund)
	path := "/portal/card-payments/" + sale.Id.String()
	page := c.Get(path)
	key := between(page.Body, `name="key" value="`, `"`)
	c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {"7.00"}, "confirmed": {"yes"}}).Want(t, http.StatusBadGateway).
		Has(t, "no refund is recorded", `value="7.00"`, `value="`+key+`"`)
	if n := len(refundsOf(t, env, m, sale.Id)); n != 0 {
		t.Fatalf("%d refunds recorded after a processor failure", n)
	}
	fail.mu.Lock()
	fail.failing = false
	fail.mu.Unlock()
	c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {"7.00"}, "confirmed": {"yes"}}).Want(t, http.StatusSeeOther)
	if refunds := refundsOf(t, env, m, sale.Id); len(refunds) != 1 || refunds[0].Amount.Text('f') != "7.00" {
		t.Errorf("refunds after the retry: %+v", refunds)
	}
	var pending int
	if err := env.App.DB.Get(&pending, `SELECT count(*) FROM pending_refunds`); err != nil || pending != 0 {
		t.Errorf("%d pending refunds left (%v)", pending, err)
	}
}

// A refund is confirmed before anything moves: the sale's form sends
// to a page naming the amount, the card and the customer, and refunds
// nothing (sent without its confirmation, whatever it holds, nothing
// moves); "Change the refund" is the form again with its values; the
// confirmation refunds once, the key carried through; an empty amount is
// refused beside its field; the confirmation without the session's CSRF
// token moves nothing.
func TestRefundIsConfirmedFirst(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	b := m.Body("PR-9", "60.00")
	b["customerName"] = "Dana Whitfield"
	inv := m.MustCreate(t, b)
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "60.00"}), http.StatusSeeOther)
	var sales []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=sale&invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &sales)
	c, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView, auth.PaymentsRefund)
	path := "/portal/card-payments/" + sales[0].Id.String()
	page := c.Get(path).Want(t, http.StatusOK).Has(t, `id="amount" name="amount" value="60.00"`)
	key := between(page.Body, `name="key" value="`, `"`)

	c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {"  "}, "reason": {"kept"}}).
		Want(t, http.StatusBadRequest).ErrorBeside(t, "amount", "Enter the amount to refund: at most $60.00.").Has(t, ">kept</textarea>")
	review := c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {"12.50"}, "reason": {"A bag split"}}).
		Want(t, http.StatusOK).Has(t, "Refund $12.50 to the card?", "Nothing has moved yet", "<dd>$12.50</dd>",
		"Visa ending 1111", "<dd>Dana Whitfield</dd>", "PR-9", `name="confirmed" value="yes"`, `name="key" value="`+key+`"`, "A bag split")
	if n := len(refundsOf(t, env, m, sales[0].Id)); n != 0 {
		t.Fatalf("%d refunds before the confirmation", n)
	}
	c.Post(path+"/refund", review.CSRF(t), url.Values{"key": {key}, "amount": {"12.50"}, "reason": {"A bag split"}, "edit": {"yes"}}).
		Want(t, http.StatusOK).Has(t, "Review the refund", `value="12.50"`, ">A bag split</textarea>")
	c.Do("POST", path+"/refund", url.Values{"key": {key}, "amount": {"12.50"}, "confirmed": {"yes"}}, nil).Want(t, http.StatusForbidden)
	if n := len(refundsOf(t, env, m, sales[0].Id)); n != 0 {
		t.Fatalf("%d refunds after a confirmation without the CSRF token", n)
	}

	confirm := url.Values{"key": {key}, "amount": {"12.50"}, "reason": {"A bag split"}, "confirmed": {"yes"}}
	done := c.Post(path+"/refund", review.CSRF(t), confirm).Want(t, http.StatusSeeOther)
	c.Post(path+"/refund", review.CSRF(t), confirm).WantRedirect(t, done.Location)
	if got := refundsOf(t, env, m, sales[0].Id); len(got) != 1 || got[0].Amount.Text('f') != "12.50" {
		t.Fatalf("refunds after the confirmation sent twice: %+v", got)
	}
}
