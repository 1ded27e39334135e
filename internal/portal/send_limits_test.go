package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/portaltest"
)

// Sends of one invoice through the API and the portal count together: 3
// from the API and 2 from the portal are the day's 5, and the sixth is
// refused in both, the portal's with its page saying why and when to come
// back; nothing more is queued.
func TestSendsCountTogetherAcrossAPIAndPortal(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m, c := merchant(t, env, auth.PaymentsView, auth.PaymentsCreate)
	inv := m.MustCreate(t, m.Body("SEND-BOTH", "20.00"))
	apiSend := func() *apitest.Response {
		return env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/send", Token: m.Token})
	}
	path := "/portal/invoices/" + inv.Id.String()
	for i := range 3 {
		if r := apiSend(); r.StatusCode != http.StatusOK {
			t.Fatalf("API send %d: %d %s", i+1, r.StatusCode, r.Body)
		}
	}
	page := c.Get(path)
	for range 2 {
		c.Post(path+"/send", page.CSRF(t), nil).WantRedirect(t, path+"?done=sent")
	}
	refused := c.Post(path+"/send", page.CSRF(t), nil).Want(t, http.StatusTooManyRequests).
		Has(t, "at most 5 times in 24 hours")
	if refused.Header.Get("Retry-After") == "" {
		t.Error("the refusal has no Retry-After")
	}
	if r := apiSend(); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an API send after 5: %d %s", r.StatusCode, r.Body)
	}
	var queued int
	if err := env.App.DB.Get(&queued, `SELECT count(*) FROM outbox WHERE invoice_id = $1`, inv.Id); err != nil {
		t.Fatal(err)
	}
	if queued != 5 {
		t.Fatalf("%d messages queued, want 5", queued)
	}
}

// An organization sends at most 50 invitations a day: the 51st, from the
// members page, is refused with the page saying so, and makes no member.
func TestFiftyFirstInvitationIsRefused(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	m := apitest.NewMerchant(t, env)
	org := uuid.MustParse(m.Org)
	for i := range people.MaxInvitations {
		if _, err := env.App.People.Invite(t.Context(), people.Actor{Address: "test"}, org,
			people.NewMember{Email: fmt.Sprintf("invited%d@example.com", i), Role: "Member", Permissions: []string{}}); err != nil {
			t.Fatalf("invitation %d: %v", i+1, err)
		}
	}
	owner, _ := portaltest.SignedIn(t, env, org, "Owner", auth.PaymentsView)
	members := owner.Get("/portal/members")
	refused := owner.Post("/portal/members", members.CSRF(t), url.Values{"email": {"one.more@example.com"}, "role": {"Member"}}).
		Want(t, http.StatusTooManyRequests).Has(t, "at most 50 invitations in 24 hours")
	if refused.Header.Get("Retry-After") == "" {
		t.Error("the refusal has no Retry-After")
	}
	if got := owner.Get("/portal/members"); got.Status != http.StatusOK || strings.Contains(got.Body, "one.more@example.com") {
		t.Error("the refused invitation made a member")
	}
}
