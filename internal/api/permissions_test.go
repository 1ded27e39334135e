package api_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
)

// permissionEndpoints is every operation that needs a permission, with the
// permission interface.md names for it.
var permissionEndpoints = []struct {
	method, path, spec string // spec: the path as openapi.yaml writes it
	permission         string
}{
	{"POST", "/payment-requests", "/payment-requests", auth.PaymentsCreate},
	{"GET", "/payment-requests", "/payment-requests", auth.PaymentsView},
	{"GET", "/payment-requests/" + uuid.NewString(), "/payment-requests/{id}", auth.PaymentsView},
	{"PATCH", "/payment-requests/" + uuid.NewString(), "/payment-requests/{id}", auth.PaymentsCreate},
	{"DELETE", "/payment-requests/" + uuid.NewString(), "/payment-requests/{id}", auth.PaymentsCreate},
	{"POST", "/payment-requests/" + uuid.NewString() + "/finalize", "/payment-requests/{id}/finalize", auth.PaymentsCreate},
	{"POST", "/payment-requests/" + uuid.NewString() + "/send", "/payment-requests/{id}/send", auth.PaymentsCreate},
	{"POST", "/payment-requests/" + uuid.NewString() + "/cancel", "/payment-requests/{id}/cancel", auth.PaymentsCreate},
	{"POST", "/payment-requests/" + uuid.NewString() + "/payments", "/payment-requests/{id}/payments", auth.PaymentsCreate},
	{"DELETE", "/payment-requests/" + uuid.NewString() + "/payments/" + uuid.NewString(), "/payment-requests/{id}/payments/{paymentId}", auth.PaymentsCreate},
	{"POST", "/recurring-invoices", "/recurring-invoices", auth.PaymentsCreate},
	{"GET", "/recurring-invoices", "/recurring-invoices", auth.PaymentsView},
	{"GET", "/recurring-invoices/" + uuid.NewString(), "/recurring-invoices/{id}", auth.PaymentsView},
	{"PATCH", "/recurring-invoices/" + uuid.NewString(), "/recurring-invoices/{id}", auth.PaymentsCreate},
	{"DELETE", "/recurring-invoices/" + uuid.NewString(), "/recurring-invoices/{id}", auth.PaymentsCreate},
	{"GET", "/reminder-settings", "/reminder-settings", auth.PaymentsView},
	{"PUT", "/reminder-settings", "/reminder-settings", auth.PaymentsCreate},
	{"DELETE", "/saved-cards/" + uuid.NewString(), "/saved-cards/{id}", auth.PaymentsCreate},
	{"POST", "/customers", "/customers", auth.PaymentsCreate},
	{"GET", "/customers", "/customers", auth.PaymentsView},
	{"GET", "/customers/" + uuid.NewString(), "/customers/{id}", auth.PaymentsView},
	{"PATCH", "/customers/" + uuid.NewString(), "/customers/{id}", auth.PaymentsCreate},
	{"DELETE", "/customers/" + uuid.NewString(), "/customers/{id}", auth.PaymentsCreate},
	{"GET", "/card-payments", "/card-payments", auth.PaymentsView},
	{"GET", "/card-payments/" + uuid.NewString(), "/card-payments/{id}", auth.PaymentsView},
	{"POST", "/card-payments/" + uuid.NewString() + "/refund", "/card-payments/{id}/refund", auth.PaymentsRefund},
	{"GET", "/deposits", "/deposits", auth.PaymentsView},
	{"GET", "/deposits/" + uuid.NewString(), "/deposits/{id}", auth.PaymentsView},
	{"GET", "/locations", "/locations", auth.LocationsView},
	{"GET", "/locations/" + uuid.NewString(), "/locations/{id}", auth.LocationsView},
	{"GET", "/accounts", "/accounts", auth.AccountsView},
	{"GET", "/terminals", "/terminals", auth.AccountsView},
	{"GET", "/terminals/" + uuid.NewString(), "/terminals/{id}", auth.AccountsView},
	{"POST", "/terminal-payments", "/terminal-payments", auth.PaymentsCreate},
	{"GET", "/terminal-payments", "/terminal-payments", auth.PaymentsView},
	{"GET", "/terminal-payments/" + uuid.NewString(), "/terminal-payments/{id}", auth.PaymentsView},
	{"POST", "/terminal-payments/" + uuid.NewString() + "/cancel", "/terminal-payments/{id}/cancel", auth.PaymentsCreate},
	{"GET", "/organizations/{org}/portfolio", "/organizations/{id}/portfolio", auth.PortfolioView},
	{"GET", "/applications", "/applications", auth.ApplicationsView},
	{"GET", "/applications/" + uuid.NewString(), "/applications/{id}", auth.ApplicationsView},
	{"GET", "/events", "/events", auth.EventsView},
	{"GET", "/events/" + uuid.NewString(), "/events/{id}", auth.EventsView},
	{"POST", "/events/" + uuid.NewString() + "/redeliver", "/events/{id}/redeliver", auth.WebhooksManage},
	{"GET", "/webhook-endpoints", "/webhook-endpoints", auth.WebhooksManage},
	{"POST", "/webhook-endpoints", "/webhook-endpoints", auth.WebhooksManage},
	{"GET", "/webhook-endpoints/" + uuid.NewString(), "/webhook-endpoints/{id}", auth.WebhooksManage},
	{"PATCH", "/webhook-endpoints/" + uuid.NewString(), "/webhook-endpoints/{id}", auth.WebhooksManage},
	{"DELETE", "/webhook-endpoints/" + uuid.NewString(), "/webhook-endpoints/{id}", auth.WebhooksManage},
	{"POST", "/webhook-endpoints/" + uuid.NewString() + "/rotate-secret", "/webhook-endpoints/{id}/rotate-secret", auth.WebhooksManage},
	{"POST", "/webhook-endpoints/" + uuid.NewString() + "/ping", "/webhook-endpoints/{id}/ping", auth.WebhooksManage},
}

// The table above is the spec's list: a new operation with a permission
// must be added to it.
func TestPermissionTableCoversSpec(t *testing.T) {
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	var inSpec, inTable []string
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security == nil {
				continue
			}
			for _, req := range *op.Security {
				for _, scope := range req["oauth2"] {
					inSpec = append(inSpec, method+" "+path+" "+scope)
				}
			}
		}
	}
	for _, e := range permissionEndpoints {
		inTable = append(inTable, e.method+" "+e.spec+" "+e.permission)
	}
	slices.Sort(inSpec)
	slices.Sort(inTable)
	if !slices.Equal(inSpec, inTable) {
		t.Errorf("openapi.yaml's permissions:\n  %s\nthis test's:\n  %s", strings.Join(inSpec, "\n  "), strings.Join(inTable, "\n  "))
	}
}

// A key with every permission of its organization's kind but one gets 403
// "Permission required", naming that permission, on each operation needing it.
func TestPermissionRequired(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	orgOf := map[string]uuid.UUID{}
	for _, p := range auth.PermissionsFor(auth.KindMerchant) {
		orgOf[p] = seed.Merchant.OrganizationID
	}
	for _, p := range auth.PermissionsFor(auth.KindReseller) {
		orgOf[p] = seed.Reseller.OrganizationID
	}
	// One token per permission: for a key that has all the others.
	tokenWithout := map[string]string{}
	for perm, org := range orgOf {
		kind := auth.KindMerchant
		if org == seed.Reseller.OrganizationID {
			kind = auth.KindReseller
		}
		others := slices.DeleteFunc(auth.PermissionsFor(kind), func(p string) bool { return p == perm })
		k := env.NewKey(t, org, others...)
		tokenWithout[perm] = env.Token(k.KeyID, k.Secret)
	}

	for _, e := range permissionEndpoints {
		t.Run(e.method+" "+e.spec, func(t *testing.T) {
			path := strings.ReplaceAll(e.path, "{org}", orgOf[e.permission].String())
			resp := env.Do(apitest.Request{Method: e.method, Path: path, Token: tokenWithout[e.permission]})
			p := apitest.WantProblem(t, resp, http.StatusForbidden, "Permission required")
			if !strings.Contains(p.Detail, e.permission) {
				t.Errorf("detail %q does not name %s", p.Detail, e.permission)
			}
		})
	}
}

// Merchant and reseller keys cannot cross into each other's endpoints, even
// with every permission their organization can have.
func TestKindsKeepToTheirEndpoints(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	seed := env.Seed()
	merchant := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)
	reseller := env.Token(seed.Reseller.KeyID, seed.Reseller.Secret)
	for _, e := range permissionEndpoints {
		forMerchants := slices.Contains(auth.PermissionsFor(auth.KindMerchant), e.permission)
		forResellers := slices.Contains(auth.PermissionsFor(auth.KindReseller), e.permission)
		if forMerchants && forResellers {
			continue // events and webhooks: both kinds have them
		}
		token, who := reseller, "reseller"
		if forResellers {
			token, who = merchant, "merchant"
		}
		t.Run(who+" "+e.method+" "+e.spec, func(t *testing.T) {
			path := strings.ReplaceAll(e.path, "{org}", seed.Reseller.OrganizationID.String())
			resp := env.Do(apitest.Request{Method: e.method, Path: path, Token: token})
			p := apitest.WantProblem(t, resp, http.StatusForbidden, "Permission required")
			if !strings.Contains(p.Detail, e.permission) {
				t.Errorf("detail %q does not name %s", p.Detail, e.permission)
			}
		})
	}
	// The demo keys do work on their own side.
	if resp := env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: merchant}); resp.StatusCode != http.StatusOK {
		t.Errorf("merchant GET /accounts: %d %s", resp.StatusCode, resp.Body)
	}
}

// Beyond its burst a key gets 429 with Retry-After; other keys do not.
func TestPerKeyRateLimit(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{Configure: func(c *config.Config) {
		c.RateLimit, c.RateBurst = 0.01, 2 // one request per 100 s after a burst of 2
	}})
	seed := env.Seed()
	token := env.Token(seed.Merchant.KeyID, seed.Merchant.Secret)
	for i := 1; i <= 2; i++ {
		if resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: token}); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	resp := env.Do(apitest.Request{Method: "GET", Path: "/accounts", Token: token})
	apitest.WantProblem(t, resp, http.StatusTooManyRequests, "")
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 90 || secs > 100 {
		t.Errorf("Retry-After %q, want about 100 seconds", resp.Header.Get("Retry-After"))
	}
	other := env.NewKey(t, seed.Merchant.OrganizationID, auth.LocationsView)
	if resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: env.Token(other.KeyID, other.Secret)}); resp.StatusCode != http.StatusOK {
		t.Errorf("another key: %d %s", resp.StatusCode, resp.Body)
	}
}
