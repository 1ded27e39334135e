package portal_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

const dotForCents = "Use a dot for cents, as in 5.00"

// Money typed in every portal form that takes it: a comma only separates
// thousands in groups of three ("1,234.56" is taken); "5,00" or "1,2" is
// refused beside the field with nothing changed, never read as 500 or 12.
func TestMoneyTypedWithCommas(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)

	t.Run("recorded payment", func(t *testing.T) {
		t.Parallel()
		m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
		inv := m.MustCreate(t, m.Body("COMMA-REC", "2000.00"))
		path := "/portal/invoices/" + inv.Id.String()
		p := c.Get(path + "/payments")
		for _, typed := range []string{"5,00", "1,2", "1,23,4.00"} {
			c.Post(path+"/payments", p.CSRF(t), form("idempotencyKey", formKey(t, p), "amount", typed, "method", "cash")).
				Want(t, http.StatusBadRequest).ErrorBeside(t, "amount", dotForCents)
		}
		if read, raw := m.Read(t, inv.Id); len(*read.Payments) != 0 {
			t.Fatalf("refused amounts recorded payments: %s", raw)
		}
		c.Post(path+"/payments", p.CSRF(t), form("idempotencyKey", formKey(t, p), "amount", "1,234.56", "method", "cash")).
			WantRedirect(t, path+"?done=recorded")
		if read, raw := m.Read(t, inv.Id); len(*read.Payments) != 1 || read.AmountPaid.Text('f') != "1234.56" {
			t.Fatalf("1,234.56 recorded as: %s", raw)
		}
	})

	t.Run("refund", func(t *testing.T) {
		t.Parallel()
		m := apitest.NewMerchant(t, env)
		sale := paidSale(t, env, m, "COMMA-REF", "2000.00", apitest.CardApprove)
		c, _ := portaltest.SignedIn(t, env, uuid.MustParse(m.Org), "Member", auth.PaymentsView, auth.PaymentsRefund)
		path := "/portal/card-payments/" + sale.Id.String()
		page := c.Get(path)
		key := between(page.Body, `name="key" value="`, `"`)
		for _, typed := range []string{"5,00", "1,2"} {
			c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {typed}}).
				Want(t, http.StatusBadRequest).ErrorBeside(t, "amount", dotForCents)
		}
		if n := len(refundsOf(t, env, m, sale.Id)); n != 0 {
			t.Fatalf("refused amounts made %d refunds", n)
		}
		c.Post(path+"/refund", page.CSRF(t), url.Values{"key": {key}, "amount": {"1,234.56"}, "confirmed": {"yes"}}).Want(t, http.StatusSeeOther)
		if got := refundsOf(t, env, m, sale.Id); len(got) != 1 || got[0].Amount.Text('f') != "1234.56" {
			t.Fatalf("1,234.56 refunded as %+v", got)
		}
	})

	t.Run("invoice", func(t *testing.T) {
		t.Parallel()
		m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
		p := c.Get("/portal/invoices/new")
		values := func(amount, unitCost string) url.Values {
			return form("idempotencyKey", formKey(t, p), "merchantAccountId", m.MIDs[0].Id.String(), "invoiceNumber", "COMMA-INV",
				"customerEmail", "ada@example.com", "amount", amount, "delivery", "email", "send", "no",
				"lines[0].description", "Tiles", "lines[0].quantity", "1", "lines[0].unitCost", unitCost)
		}
		noLines := values("5,00", "")
		for _, f := range []string{"lines[0].description", "lines[0].quantity", "lines[0].unitCost"} {
			noLines.Del(f) // the amount is typed only without lines
		}
		c.Post("/portal/invoices", p.CSRF(t), noLines).Want(t, http.StatusBadRequest).ErrorBeside(t, "amount", dotForCents)
		c.Post("/portal/invoices", p.CSRF(t), values("5.00", "5,00")).Want(t, http.StatusBadRequest).ErrorBeside(t, "lines[0].unitCost", dotForCents)
		if got := apiList(t, env, m.Token, "invoiceNumber=COMMA-INV"); len(got) != 0 {
			t.Fatalf("refused amounts made %d invoices", len(got))
		}
		c.Post("/portal/invoices", p.CSRF(t), values("$1,234.56", "1,234.56")).Want(t, http.StatusSeeOther)
		if got := apiList(t, env, m.Token, "invoiceNumber=COMMA-INV"); len(got) != 1 || got[0].Amount.Text('f') != "1234.56" {
			t.Fatalf("1,234.56 made %+v", got)
		}
	})
}
