package portal_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/portaltest"
)

// Two days settled, a sale on the first and a sale part refunded on the
// second: the deposits are listed newest first, the chart's table lists
// only their two days, a deposit's page shows each payment's fee (the
// refund's 0), and a refund is negative on the pages and in the CSV
// exports alike.
func TestDepositsNewestFirstWithFeesAndNegativeRefunds(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Clock: apitest.NewClock(time.Now().Truncate(time.Second))})
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	settle := func() {
		t.Helper()
		if _, err := env.App.Payments.SettleOrganization(t.Context(), org, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	paidSale(t, env, m, "DEP-1", "30.00", apitest.CardApprove)
	settle()
	env.Clock.Advance(25 * time.Hour)
	m.Renew()
	sale := paidSale(t, env, m, "DEP-2", "50.00", apitest.CardApprove)
	r := env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + sale.Id.String() + "/refund", Token: m.Token,
		Body: map[string]any{"amount": "10.00", "reason": "A bag split"}})
	apitest.Want(t, "refund", r.StatusCode, http.StatusCreated)
	settle()
	c, _ := portaltest.SignedIn(t, env, org, "Member", auth.PaymentsView)

	// 30.00 - (0.87 + 0.30); 50.00 - 10.00 - (1.45 + 0.30).
	const first, second = "$28.83", "$38.25"
	list := c.Get("/portal/deposits").Want(t, http.StatusOK)
	all := list.Body[strings.Index(list.Body, `id="list"`):]
	if i, j := strings.Index(all, second), strings.Index(all, first); i < 0 || j < 0 || i > j {
		t.Errorf("the deposits are not newest first (%s at %d, %s at %d):\n%s", second, i, first, j, all)
	}
	chart := list.Body[strings.Index(list.Body, `id="chart-caption"`):strings.Index(list.Body, "</tbody>")]
	if n := strings.Count(chart, `<td data-label="Day">`); n != 2 {
		t.Errorf("the chart's table lists %d days, want the 2 with deposits:\n%s", n, chart)
	}
	list.Has(t, `<td data-label="Refunds" class="num">-$10.00</td>`)

	deposits := csvOf(t, c.Get("/portal/deposits?format=csv").Want(t, http.StatusOK))
	if len(deposits) != 2 || deposits[0]["refundsAmount"] != "-10.00" || deposits[0]["netAmount"] != "38.25" ||
		deposits[1]["refundsAmount"] != "0.00" {
		t.Errorf("the deposits' CSV: %v", deposits)
	}

	newest := c.Get("/portal/deposits/"+deposits[0]["id"]).Want(t, http.StatusOK)
	newest.Has(t, `<th scope="col" class="num">Fee</th>`, `<td data-label="Fee" class="num">$1.75</td>`,
		`<td data-label="Fee" class="num">$0.00</td>`, "-$10.00")

	c.Get("/portal/card-payments").Want(t, http.StatusOK).Has(t, `<td data-label="Amount" class="num">-$10.00</td>`)
	amounts := map[string]string{}
	for _, p := range csvOf(t, c.Get("/portal/card-payments?format=csv").Want(t, http.StatusOK)) {
		amounts[p["invoiceNumber"]+" "+p["kind"]] = p["amount"]
	}
	want := map[string]string{"DEP-1 sale": "30.00", "DEP-2 sale": "50.00", "DEP-2 refund": "-10.00"}
	for k, v := range want {
		apitest.Want(t, "card payments' CSV, "+k, amounts[k], v)
	}
}
