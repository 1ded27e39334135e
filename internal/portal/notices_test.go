package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/portaltest"
)

// A notice after a redirect is one of the page's fixed list, named by
// ?done=: a name not on it shows nothing, and no text the query carries
// (under any parameter a page once read) ever reaches the page, so that a
// link cannot make the portal say, in its own green voice, what it never
// said.
func TestNoticesComeFromAFixedList(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	sale := paidSale(t, env, m, "NOTICE-1", "10.00", apitest.CardApprove)
	c, _ := portaltest.SignedIn(t, env, org, "Owner", auth.PaymentsView, auth.PaymentsCreate, auth.PaymentsRefund,
		auth.WebhooksManage, auth.EventsView)
	events := apiItems(t, env, m.Token, "/events?limit=1")
	if len(events) != 1 {
		t.Fatalf("%d events", len(events))
	}
	const planted = "Your account is locked Call 555 0100 now"
	query := url.Values{}
	for _, name := range []string{"done", "revoked", "deleted", "changed", "notice", "message"} {
		query.Set(name, planted)
	}
	for _, path := range []string{"/portal/keys", "/portal/webhooks", "/portal/members", "/portal/account",
		"/portal/reminder-settings", "/portal/invoices/" + sale.InvoiceId.String(), "/portal/card-payments/" + sale.Id.String(),
		"/portal/events/" + events[0]["id"].(string)} {
		for _, q := range []string{query.Encode(), "done=bogus", "done=" + url.QueryEscape("<b>x</b>")} {
			p := c.Get(path+"?"+q).Want(t, http.StatusOK)
			if strings.Contains(p.Body, "alert-ok") || strings.Contains(p.Body, planted) || strings.Contains(p.Body, "bogus") {
				t.Errorf("%s?%s shows a notice or the query's text", path, q)
			}
		}
	}
	c.Get("/portal/keys?done=revoked").Has(t, "The key is revoked")
	c.Get("/portal/webhooks?done=deleted").Has(t, "The endpoint was deleted")
}
