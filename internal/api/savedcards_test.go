package api_test

import (
	"net/http"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

// Removing a saved card through the API changes its customer, as saving
// it on the pay page does: customer.updated, with the customer as it is
// after the removal.
func TestSavedCardRemovalUpdatesCustomer(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("CARD-RM", "40.00"))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00", Save: true}), http.StatusSeeOther)
	got, _ := m.Read(t, inv.Id)
	if got.SavedCards == nil || len(*got.SavedCards) != 1 {
		t.Fatalf("saved cards %+v, want the one the pay page saved", got.SavedCards)
	}
	events := func() []struct{ Data models.Customer } {
		var list []struct{ Data models.Customer }
		env.Do(apitest.Request{Method: "GET", Path: "/events?type=customer.updated", Token: m.Token}).JSON(t, &list)
		return list
	}
	before := len(events())
	apitest.Want(t, "remove card", env.Do(apitest.Request{Method: "DELETE", Path: "/saved-cards/" + (*got.SavedCards)[0].Id.String(),
		Token: m.Token}).StatusCode, http.StatusNoContent)
	after := events()
	if len(after) != before+1 {
		t.Fatalf("%d customer.updated events after the removal, want %d", len(after), before+1)
	}
	newest := after[0].Data
	apitest.Want(t, "customer.updated data id", newest.Id, inv.CustomerId)
	apitest.Want(t, "customer.updated data savedCards", len(newest.SavedCards), 0)
	apitest.Want(t, "customer.updated data openBalance", newest.OpenBalance.Text('f'), "30.00")
}
