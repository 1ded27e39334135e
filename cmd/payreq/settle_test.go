package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
)

// payreq settle closes the organization's open batches and prints each
// deposit made as one JSON line, as GET /deposits/{id} answers it; run
// again, it makes and prints nothing.
func TestSettlePrintsDepositsAsJSONLines(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	for i, mid := range []models.MerchantAccount{m.MIDs[0], m.MIDs[0], m.MIDs[1]} {
		b := m.Body("CLI-"+string(rune('A'+i)), "10.00")
		b["merchantAccountId"] = mid.Id.String()
		inv := m.MustCreate(t, b)
		apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: apitest.CardApprove, Amount: "10.00"}), http.StatusSeeOther)
	}

	out := c.ok("settle", "--org", m.Org)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	apitest.Want(t, "deposits printed", len(lines), 2)
	for _, line := range lines {
		var printed models.Deposit
		dec := json.NewDecoder(bytes.NewReader([]byte(line)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&printed); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		var served models.Deposit
		resp := env.Do(apitest.Request{Method: "GET", Path: "/deposits/" + printed.Id.String(), Token: m.Token})
		apitest.Want(t, "GET the printed deposit", resp.StatusCode, http.StatusOK)
		resp.JSON(t, &served)
		apitest.Want(t, "netAmount printed as served", printed.NetAmount.Text('f'), served.NetAmount.Text('f'))
		apitest.Want(t, "salesAmount printed as served", printed.SalesAmount.Text('f'), served.SalesAmount.Text('f'))
		apitest.Want(t, "status printed as served", printed.Status, served.Status)
	}
	apitest.Want(t, "second settle prints", c.ok("settle", "--org", m.Org), "")
}
