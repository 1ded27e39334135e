package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

// Every sale made on a pay page is a card payment, the declined ones too;
// the invoice's payments name theirs by id.
func TestCardPaymentsOfAnInvoice(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("CP-1", "25.00"))
	other := m.MustCreate(t, m.Body("CP-2", "5.00"))
	path := apitest.PayPath(t, inv)
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "10.00"}), http.StatusPaymentRequired)
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Name: "Dana W"}), http.StatusSeeOther)
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "15.00"}), http.StatusSeeOther)
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, other), apitest.Payment{Card: apitest.CardApprove, Amount: "5.00"}), http.StatusSeeOther)

	var list []models.CardPayment
	resp := env.Do(apitest.Request{Method: "GET", Path: "/card-payments?invoiceId=" + inv.Id.String(), Token: m.Token})
	resp.JSON(t, &list)
	if len(list) != 3 {
		t.Fatalf("%d card payments of the invoice, want 3: %s", len(list), resp.Body)
	}
	second, first, declined := list[0], list[1], list[2]
	apitest.Want(t, "newest: amount", second.Amount.Text('f'), "15.00")
	apitest.Want(t, "then: amount", first.Amount.Text('f'), "10.00")
	for _, p := range list {
		apitest.Want(t, "kind", p.Kind, models.CardPaymentKindSale)
		apitest.Want(t, "invoiceId", p.InvoiceId, inv.Id)
		apitest.Want(t, "invoiceNumber", p.InvoiceNumber, "CP-1")
		apitest.Want(t, "merchantAccountId", p.MerchantAccountId, inv.MerchantAccountId)
		apitest.Want(t, "mid", p.Mid, inv.Mid)
		apitest.Want(t, "amountRefunded", p.AmountRefunded.Text('f'), "0.00")
		apitest.Want(t, "refundOf", p.RefundOf == nil, true)
		apitest.Want(t, "reason", p.Reason == nil, true)
		apitest.Want(t, "createdByName", p.CreatedByName == nil, true)
	}
	apitest.Want(t, "approved status", first.Status, models.CardPaymentStatusApproved)
	apitest.WantText(t, "approved payerName", first.PayerName, "Dana W")
	apitest.WantText(t, "approved lastFour", first.LastFour, "1111")
	apitest.Want(t, "approved retRef set", first.RetRef != nil && *first.RetRef != "", true)
	apitest.Want(t, "approved declineReason", first.DeclineReason == nil, true)
	apitest.Want(t, "declined status", declined.Status, models.CardPaymentStatusDeclined)
	apitest.WantText(t, "declined declineReason", declined.DeclineReason, "Card declined by the issuer")
	apitest.WantText(t, "declined lastFour", declined.LastFour, "0002")
	apitest.Want(t, "declined retRef", declined.RetRef == nil, true)
	apitest.Want(t, "declined amount", declined.Amount.Text('f'), "10.00")

	got, raw := m.Read(t, inv.Id)
	apitest.Want(t, "failedAttempts", got.FailedAttempts, int32(1))
	apitest.Want(t, "invoice amountRefunded", got.AmountRefunded.Text('f'), "0.00")
	if len(*got.Payments) != 2 {
		t.Fatalf("the invoice lists %d payments, want the 2 approved: %s", len(*got.Payments), raw)
	}
	apitest.Want(t, "payments[0].id", (*got.Payments)[0].Id, first.Id)
	apitest.Want(t, "payments[1].id", (*got.Payments)[1].Id, second.Id)
	apitest.Want(t, "payments[0].amountRefunded", (*got.Payments)[0].AmountRefunded.Text('f'), "0.00")

	// One reads as it lists.
	var one models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + declined.Id.String(), Token: m.Token}).JSON(t, &one)
	apitest.Want(t, "read id", one.Id, declined.Id)
	apitest.WantText(t, "read declineReason", one.DeclineReason, "Card declined by the issuer")
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + inv.Id.String(), Token: m.Token}), http.StatusNotFound, "")
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/card-payments/42", Token: m.Token}), http.StatusBadRequest, "")
}

// Filters combine; an unknown kind or status is a 400 naming the filter;
// pages follow the Link header, newest first, each card payment once.
func TestCardPaymentFiltersAndPaging(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("CPF-1", "50.00"))
	path := apitest.PayPath(t, inv)
	for range 2 {
		apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "1.00"}), http.StatusPaymentRequired)
	}
	for range 3 {
		apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "1.00"}), http.StatusSeeOther)
	}
	count := func(query string) int {
		t.Helper()
		var list []models.CardPayment
		env.Do(apitest.Request{Method: "GET", Path: "/card-payments?" + query, Token: m.Token}).JSON(t, &list)
		return len(list)
	}
	apitest.Want(t, "all", count("invoiceId="+inv.Id.String()), 5)
	apitest.Want(t, "declined", count("status=declined&invoiceId="+inv.Id.String()), 2)
	apitest.Want(t, "approved sales", count("kind=sale&status=approved&invoiceId="+inv.Id.String()), 3)
	apitest.Want(t, "refunds", count("kind=refund"), 0)
	apitest.Want(t, "on its MID", count("merchantAccountId="+inv.MerchantAccountId.String()), 5)
	apitest.Want(t, "created from the future", count("createdFrom=2999-01-01T00:00:00Z"), 0)
	for _, q := range []string{"kind=charge", "status=pending", "createdFrom=yesterday", "limit=0", "cursor=nonsense"} {
		name, _, _ := strings.Cut(q, "=")
		p := apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/card-payments?" + q, Token: m.Token}), http.StatusBadRequest, "")
		if p.Errors == nil || len((*p.Errors)["query."+name]) == 0 {
			t.Errorf("%s: errors do not name query.%s", q, name)
		}
	}

	var all []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &all)
	next := "/card-payments?limit=2&invoiceId=" + inv.Id.String()
	var paged []models.CardPayment
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("more pages than 5 card payments take")
		}
		resp := env.Do(apitest.Request{Method: "GET", Path: next, Token: m.Token})
		var page []models.CardPayment
		resp.JSON(t, &page)
		paged = append(paged, page...)
		next = ""
		if link := resp.Header.Get("Link"); link != "" {
			next = strings.TrimPrefix(link[1:strings.Index(link, ">")], env.URL)
		}
	}
	if len(paged) != len(all) {
		t.Fatalf("paged %d, listed %d", len(paged), len(all))
	}
	for i := range all {
		apitest.Want(t, "paged id", paged[i].Id, all[i].Id)
	}
}
