package paypage_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/terminal"
)

// While a payment is being taken at a card terminal, the pay page offers
// only what is left, says why, and takes no more; once nothing is left it
// offers no form.
func TestPayPageLeavesWhatATerminalTakes(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("COUNTER-1", "50.00"))
	ctx := context.Background()
	tm, err := env.App.Terminals.Add(ctx, terminal.NewTerminal{MerchantAccountID: m.MIDs[0].Id,
		HSN: processor.SimTerminalSlow + uuid.NewString()[:8], Name: "Front counter"})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.App.Terminals.Ping(ctx, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	if r := env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments", Token: m.Token,
		Body: map[string]any{"terminalId": tm.ID, "invoiceId": inv.Id, "amount": "20.00"}}); r.StatusCode != http.StatusAccepted {
		t.Fatalf("terminal payment: %d %s", r.StatusCode, r.Body)
	}

	path := apitest.PayPath(t, inv)
	page := env.Visit(t, "GET", path, nil, nil)
	apitest.WantStatus(t, page, http.StatusOK)
	for _, want := range []string{`value="30.00"`, "a payment of $20.00 is being taken at a card terminal", "of which $30.00 is left to pay now"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the pay page does not show %q: %s", want, page.Body)
		}
	}
	over := env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "30.01"})
	apitest.WantStatus(t, over, http.StatusUnprocessableEntity)
	if !strings.Contains(over.Body, "at most $30.00") || !strings.Contains(over.Body, `value="30.00"`) {
		t.Errorf("the refusal does not offer what is left: %s", over.Body)
	}
	nothingRecorded(t, m, inv.Id, 0)

	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardApprove, Amount: "30.00"}), http.StatusSeeOther)
	page = env.Visit(t, "GET", path, nil, nil)
	if strings.Contains(page.Body, `name="cardNumber"`) || !strings.Contains(page.Body, "nothing is left to pay here") {
		t.Errorf("with the rest held by the terminal, the page offers a form or does not say why: %s", page.Body)
	}
}
