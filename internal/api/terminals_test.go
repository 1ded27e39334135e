package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/terminal"
)

// terminalEnv is an API on a database of its own (its worker claims
// every pending payment there), whose simulated terminals answer at once.
func terminalEnv(t *testing.T) (*apitest.Env, *processor.SimTerminals) {
	t.Helper()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	sim := env.App.Terminals.Terminals.(*processor.SimTerminals)
	sim.TerminalDelay = 20 * time.Millisecond
	return env, sim
}

// addTerminal registers a terminal of the kind (processor.SimTerminalOK, …)
// on the merchant's MID, and pings it.
func addTerminal(t *testing.T, env *apitest.Env, mid models.MerchantAccount, kind, name string) models.Terminal {
	t.Helper()
	ctx := context.Background()
	tm, err := env.App.Terminals.Add(ctx, terminal.NewTerminal{MerchantAccountID: mid.Id, HSN: kind + uuid.NewString()[:8], Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.App.Terminals.Ping(ctx, quiet); err != nil {
		t.Fatal(err)
	}
	return tm.Model()
}

func work(t *testing.T, env *apitest.Env) int {
	t.Helper()
	n, err := env.App.Terminals.Work(context.Background(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func createTerminalPayment(t *testing.T, m apitest.Merchant, body map[string]any, header http.Header) *apitest.Response {
	t.Helper()
	return m.Env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments", Token: m.Token, Body: body, Header: header})
}

func mustTerminalPayment(t *testing.T, m apitest.Merchant, terminalID, invoiceID uuid.UUID, amount any) models.TerminalPayment {
	t.Helper()
	resp := createTerminalPayment(t, m, map[string]any{"terminalId": terminalID, "invoiceId": invoiceID, "amount": amount}, nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /terminal-payments: %d %s", resp.StatusCode, resp.Body)
	}
	var p models.TerminalPayment
	resp.JSON(t, &p)
	return p
}

func readTerminalPayment(t *testing.T, m apitest.Merchant, id uuid.UUID) models.TerminalPayment {
	t.Helper()
	var p models.TerminalPayment
	resp := m.Env.Do(apitest.Request{Method: "GET", Path: "/terminal-payments/" + id.String(), Token: m.Token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /terminal-payments/%s: %d %s", id, resp.StatusCode, resp.Body)
	}
	resp.JSON(t, &p)
	return p
}

func readTerminal(t *testing.T, m apitest.Merchant, id uuid.UUID) models.Terminal {
	t.Helper()
	var tm models.Terminal
	m.Env.Do(apitest.Request{Method: "GET", Path: "/terminals/" + id.String(), Token: m.Token}).JSON(t, &tm)
	return tm
}

// eventsOfType lists the merchant's events of a type.
func eventsOfType(t *testing.T, m apitest.Merchant, typ string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	resp := m.Env.Do(apitest.Request{Method: "GET", Path: "/events?type=" + typ, Token: m.Token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events?type=%s: %d %s", typ, resp.StatusCode, resp.Body)
	}
	resp.JSON(t, &evs)
	return evs
}

func TestTerminalsListedWithTheirStatus(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	ctx := context.Background()
	patio, err := env.App.Terminals.Add(ctx, terminal.NewTerminal{MerchantAccountID: m.MIDs[0].Id, HSN: processor.SimTerminalOK + "p" + uuid.NewString()[:6], Name: "Patio"})
	if err != nil {
		t.Fatal(err)
	}
	back := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOffline, "Back office")
	front := readTerminal(t, m, patio.ID)
	if front.Status != models.TerminalStatusOnline || front.LastSeenAt == nil {
		t.Fatalf("a pinged SIM-OK terminal: %+v", front)
	}
	apitest.Want(t, "its location", front.LocationId, m.MIDs[0].LocationId)
	apitest.Want(t, "SIM-OFFLINE's status", back.Status, models.TerminalStatusOffline)
	apitest.Want(t, "SIM-OFFLINE seen", back.LastSeenAt == nil, true)

	var list []models.Terminal
	env.Do(apitest.Request{Method: "GET", Path: "/terminals", Token: m.Token}).JSON(t, &list)
	if len(list) != 2 || list[0].Name != "Back office" || list[1].Name != "Patio" {
		t.Fatalf("GET /terminals, want ordered by name: %+v", list)
	}

	// A ping more than a minute old is no longer online.
	env.Clock.Advance(61 * time.Second)
	apitest.Want(t, "status a minute after the last ping", readTerminal(t, m, patio.ID).Status, models.TerminalStatusOffline)

	// Another organization's terminal is a 404, as an unknown id.
	other := apitest.NewMerchant(t, env)
	theirs := env.Do(apitest.Request{Method: "GET", Path: "/terminals/" + patio.ID.String(), Token: other.Token})
	unknown := env.Do(apitest.Request{Method: "GET", Path: "/terminals/" + uuid.NewString(), Token: other.Token})
	apitest.WantProblem(t, theirs, http.StatusNotFound, "Not found")
	apitest.Want(t, "their terminal's answer", string(theirs.Body), string(unknown.Body))
	var otherList []models.Terminal
	env.Do(apitest.Request{Method: "GET", Path: "/terminals", Token: other.Token}).JSON(t, &otherList)
	apitest.Want(t, "the other organization's terminals", len(otherList), 0)

	// A removed terminal is gone; its HSN may be registered again.
	if _, err := env.App.Terminals.Remove(ctx, patio.ID); err != nil {
		t.Fatal(err)
	}
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/terminals/" + patio.ID.String(), Token: m.Token}), http.StatusNotFound, "Not found")
	if _, err := env.App.Terminals.Add(ctx, terminal.NewTerminal{MerchantAccountID: m.MIDs[0].Id, HSN: patio.HSN, Name: "Patio again"}); err != nil {
		t.Fatalf("the removed terminal's HSN again: %v", err)
	}
	if _, err := env.App.Terminals.Add(ctx, terminal.NewTerminal{MerchantAccountID: m.MIDs[0].Id, HSN: patio.HSN, Name: "Twice"}); err == nil {
		t.Fatal("an HSN registered twice")
	}
}

// SIM-CHIP approves by chip: the approval is a card payment that pays the
// invoice exactly as the pay page's would.
func TestTerminalPaymentApprovedByChip(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalChip, "Front counter")
	inv := m.MustCreate(t, m.Body("TERM-1", "30.00"))

	p := mustTerminalPayment(t, m, tm.Id, inv.Id, nil)
	apitest.Want(t, "status", p.Status, models.TerminalPaymentStatusPending)
	apitest.Want(t, "amount (the balance)", p.Amount.Text('f'), "30.00")
	apitest.Want(t, "card payment while pending", p.CardPaymentId == nil, true)
	apitest.Want(t, "terminal while pending", readTerminal(t, m, tm.Id).Status, models.TerminalStatusBusy)

	// A second payment on the busy terminal: 409.
	other := m.MustCreate(t, m.Body("TERM-2", "5.00"))
	busy := createTerminalPayment(t, m, map[string]any{"terminalId": tm.Id, "invoiceId": other.Id}, nil)
	apitest.WantProblem(t, busy, http.StatusConflict, "Terminal busy")

	apitest.Want(t, "payments worked", work(t, env), 1)
	p = readTerminalPayment(t, m, p.Id)
	apitest.Want(t, "status", p.Status, models.TerminalPaymentStatusApproved)
	if p.EntryMode == nil || *p.EntryMode != models.TerminalPaymentEntryModeChip || apitest.Text(p.ApplicationLabel) != "VISA CREDIT" ||
		apitest.Text(p.Aid) != "A0000000031010" || apitest.Text(p.LastFour) != "1111" || apitest.Text(p.CardBrand) != "Visa" || p.CardPaymentId == nil {
		t.Fatalf("approved payment %+v", p)
	}
	var sale models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + p.CardPaymentId.String(), Token: m.Token}).JSON(t, &sale)
	if sale.Status != models.CardPaymentStatusApproved || sale.Kind != models.CardPaymentKindSale || sale.TerminalId == nil || *sale.TerminalId != tm.Id ||
		sale.EntryMode == nil || *sale.EntryMode != models.CardPaymentEntryModeChip || sale.Amount.Text('f') != "30.00" || sale.RetRef == nil {
		t.Fatalf("the sale: %+v", sale)
	}
	after, _ := m.Read(t, inv.Id)
	apitest.Want(t, "invoice status", after.Status, models.InvoiceStatusPaid)
	apitest.Want(t, "invoice balance", after.Balance.Text('f'), "0.00")
	apitest.Want(t, "terminal after", readTerminal(t, m, tm.Id).Status, models.TerminalStatusOnline)
	for typ, want := range map[string]int{"terminal_payment.approved": 1, "card_payment.approved": 1, "invoice.paid": 1} {
		apitest.Want(t, typ+" events", len(eventsOfType(t, m, typ)), want)
	}
	if evs := eventsOfType(t, m, "terminal_payment.approved"); evs[0]["data"].(map[string]any)["id"] != p.Id.String() {
		t.Errorf("the event's data: %v", evs[0])
	}
	// The pay page's sales say nothing of terminals.
	var sales []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &sales)
	apitest.Want(t, "card payments of the invoice", len(sales), 1)

	// A refund of it goes as for a pay-page sale.
	refund := env.Do(apitest.Request{Method: "POST", Path: "/card-payments/" + sale.Id.String() + "/refund", Token: m.Token, Body: map[string]any{"amount": "5.00"}})
	if refund.StatusCode != http.StatusCreated {
		t.Fatalf("refund: %d %s", refund.StatusCode, refund.Body)
	}
	var r models.CardPayment
	refund.JSON(t, &r)
	apitest.Want(t, "refund's entry mode", r.EntryMode == nil, true)

	// The customer's receipts: one for the sale at the terminal, one for
	// its refund, as for a pay-page sale.
	for what, id := range map[string]uuid.UUID{"sale": sale.Id, "refund": r.Id} {
		var receipts int
		if err := env.App.DB.Get(&receipts, `SELECT count(*) FROM outbox WHERE kind = 'receipt' AND payment_id = $1 AND recipient = 'dana@example.com'`, id); err != nil {
			t.Fatal(err)
		}
		apitest.Want(t, "receipts of the "+what, receipts, 1)
	}
}

func TestTerminalPaymentDeclined(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalDecline, "Counter")
	inv := m.MustCreate(t, m.Body("TERM-D", "12.00"))
	p := mustTerminalPayment(t, m, tm.Id, inv.Id, "7.50")
	work(t, env)
	p = readTerminalPayment(t, m, p.Id)
	apitest.Want(t, "status", p.Status, models.TerminalPaymentStatusDeclined)
	apitest.WantText(t, "decline reason", p.DeclineReason, "Insufficient funds")
	var sale models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + p.CardPaymentId.String(), Token: m.Token}).JSON(t, &sale)
	apitest.Want(t, "card payment", sale.Status, models.CardPaymentStatusDeclined)
	after, _ := m.Read(t, inv.Id)
	apitest.Want(t, "failed attempts", after.FailedAttempts, int32(1))
	apitest.Want(t, "invoice still open", after.Status, models.InvoiceStatusOpen)
	apitest.Want(t, "declined events", len(eventsOfType(t, m, "terminal_payment.declined")), 1)
	apitest.Want(t, "card_payment.declined events", len(eventsOfType(t, m, "card_payment.declined")), 1)
}

func TestTerminalPaymentIdempotencyKey(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Counter")
	inv := m.MustCreate(t, m.Body("TERM-K", "40.00"))
	key := http.Header{"Idempotency-Key": {"tp-" + uuid.NewString()}}
	body := map[string]any{"terminalId": tm.Id, "invoiceId": inv.Id, "amount": "10.00"}
	first := createTerminalPayment(t, m, body, key)
	apitest.Want(t, "first", first.StatusCode, http.StatusAccepted)
	// The same amount as a number is the same body.
	again := createTerminalPayment(t, m, map[string]any{"terminalId": tm.Id, "invoiceId": inv.Id, "amount": 10}, key)
	apitest.Want(t, "replay", again.StatusCode, http.StatusOK)
	apitest.Want(t, "Idempotent-Replayed", again.Header.Get("Idempotent-Replayed"), "true")
	var a, b models.TerminalPayment
	first.JSON(t, &a)
	again.JSON(t, &b)
	apitest.Want(t, "the replay's payment", b.Id, a.Id)
	other := createTerminalPayment(t, m, map[string]any{"terminalId": tm.Id, "invoiceId": inv.Id, "amount": "11.00"}, key)
	apitest.WantProblem(t, other, http.StatusUnprocessableEntity, "Idempotency key reused")
	var list []models.TerminalPayment
	env.Do(apitest.Request{Method: "GET", Path: "/terminal-payments?invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "payments made", len(list), 1)
	work(t, env)
	apitest.Want(t, "status", readTerminalPayment(t, m, a.Id).Status, models.TerminalPaymentStatusApproved)
	after, _ := m.Read(t, inv.Id)
	apitest.Want(t, "balance", after.Balance.Text('f'), "30.00")
	apitest.Want(t, "status", after.Status, models.InvoiceStatusPartPaid)
}

// Every refusal: a problem keyed by the field as sent, nothing written.
func TestTerminalPaymentRefusals(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	them := apitest.NewMerchant(t, env)
	ok := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Counter")
	offline := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOffline, "Dead")
	otherMID := addTerminal(t, env, m.MIDs[1], processor.SimTerminalOK, "Kiosk")
	theirTerminal := addTerminal(t, env, them.MIDs[0], processor.SimTerminalOK, "Theirs")
	inv := m.MustCreate(t, m.Body("TERM-R", "20.00"))
	theirInv := them.MustCreate(t, them.Body("THEIRS-R", "20.00"))
	cancelled := m.MustCreate(t, m.Body("TERM-C", "20.00"))
	if resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + cancelled.Id.String() + "/cancel", Token: m.Token}); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", resp.StatusCode, resp.Body)
	}
	for _, c := range []struct {
		name         string
		terminal     uuid.UUID
		invoice      uuid.UUID
		amount       any
		status       int
		title, field string
	}{
		{"three decimals", ok.Id, inv.Id, "1.005", http.StatusBadRequest, "Invalid request", "amount"},
		{"zero", ok.Id, inv.Id, "0", http.StatusBadRequest, "Invalid request", "amount"},
		{"negative", ok.Id, inv.Id, -1, http.StatusBadRequest, "Invalid request", "amount"},
		{"above the balance", ok.Id, inv.Id, "20.01", http.StatusUnprocessableEntity, "Payment amount not allowed", "amount"},
		{"their terminal", theirTerminal.Id, inv.Id, nil, http.StatusUnprocessableEntity, "Unknown terminal", "terminalId"},
		{"an unknown terminal", uuid.New(), inv.Id, nil, http.StatusUnprocessableEntity, "Unknown terminal", "terminalId"},
		{"their invoice", ok.Id, theirInv.Id, nil, http.StatusUnprocessableEntity, "Unknown invoice", "invoiceId"},
		{"an unknown invoice", ok.Id, uuid.New(), nil, http.StatusUnprocessableEntity, "Unknown invoice", "invoiceId"},
		{"a terminal of another MID", otherMID.Id, inv.Id, nil, http.StatusUnprocessableEntity, "Terminal on another MID", "terminalId"},
		{"an offline terminal", offline.Id, inv.Id, nil, http.StatusUnprocessableEntity, "Terminal offline", "terminalId"},
		{"a cancelled invoice", ok.Id, cancelled.Id, nil, http.StatusUnprocessableEntity, "Invoice cannot be paid", "invoiceId"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := createTerminalPayment(t, m, map[string]any{"terminalId": c.terminal, "invoiceId": c.invoice, "amount": c.amount}, nil)
			p := apitest.WantProblem(t, resp, c.status, c.title)
			if c.status == http.StatusBadRequest {
				if p.Errors == nil || len((*p.Errors)[c.field]) == 0 {
					t.Errorf("errors %v, want %s", p.Errors, c.field)
				}
			} else if !strings.Contains(p.Detail, c.field) && c.field != "amount" {
				t.Errorf("detail %q does not name %s", p.Detail, c.field)
			}
		})
	}
	// Their ids and unknown ones answer the same.
	a := createTerminalPayment(t, m, map[string]any{"terminalId": theirTerminal.Id, "invoiceId": inv.Id}, nil)
	b := createTerminalPayment(t, m, map[string]any{"terminalId": uuid.New(), "invoiceId": inv.Id}, nil)
	apitest.Want(t, "their terminal's answer", string(a.Body), string(b.Body))
	var list []models.TerminalPayment
	env.Do(apitest.Request{Method: "GET", Path: "/terminal-payments", Token: m.Token}).JSON(t, &list)
	apitest.Want(t, "payments made by refused requests", len(list), 0)

	// A pending payment holds its amount: a second one may take only the rest.
	second := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Counter 2")
	mustTerminalPayment(t, m, ok.Id, inv.Id, "15.00")
	over := createTerminalPayment(t, m, map[string]any{"terminalId": second.Id, "invoiceId": inv.Id, "amount": "5.01"}, nil)
	p := apitest.WantProblem(t, over, http.StatusUnprocessableEntity, "Payment amount not allowed")
	if !strings.Contains(p.Detail, "$5.00") {
		t.Errorf("detail %q does not say what is left", p.Detail)
	}
	if p.Errors != nil { // interface.md: errors on a 400 only
		t.Errorf("errors %v on a 422", *p.Errors)
	}
	rest := mustTerminalPayment(t, m, second.Id, inv.Id, nil)
	apitest.Want(t, "the rest", rest.Amount.Text('f'), "5.00")
	// Nothing left: a payment is under way.
	third := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Counter 3")
	none := createTerminalPayment(t, m, map[string]any{"terminalId": third.Id, "invoiceId": inv.Id, "amount": nil}, nil)
	p = apitest.WantProblem(t, none, http.StatusUnprocessableEntity, "Payment under way")
	if p.Errors != nil || !strings.Contains(p.Detail, "card terminal") {
		t.Errorf("nothing left: %+v, want a detail saying a payment is being taken at a card terminal, no errors", p)
	}

	// A pay-page charge under way holds its amount too.
	paying := m.MustCreate(t, m.Body("TERM-P", "20.00"))
	if _, err := env.App.DB.Exec(`INSERT INTO pending_charges (order_id, invoice_id, mid, amount, created_at, void_after)
		VALUES ($1, $2, $3, '12.00', now(), now() + interval '1 hour')`, uuid.New(), paying.Id, m.MIDs[0].Mid); err != nil {
		t.Fatal(err)
	}
	over = createTerminalPayment(t, m, map[string]any{"terminalId": third.Id, "invoiceId": paying.Id, "amount": "8.01"}, nil)
	p = apitest.WantProblem(t, over, http.StatusUnprocessableEntity, "Payment amount not allowed")
	if p.Errors != nil || !strings.Contains(p.Detail, "$8.00") || !strings.Contains(p.Detail, "$12.00 is under way") {
		t.Errorf("above what the pay page's charge leaves: %+v, want a detail naming $8.00 and the $12.00 under way, no errors", p)
	}
	rest = mustTerminalPayment(t, m, third.Id, paying.Id, nil)
	apitest.Want(t, "what the pay page's charge leaves", rest.Amount.Text('f'), "8.00")
}

func TestTerminalPaymentCancel(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalSlow, "Slow")
	inv := m.MustCreate(t, m.Body("TERM-X", "9.00"))

	// Cancelled before the terminal was asked: the worker never asks it.
	p := mustTerminalPayment(t, m, tm.Id, inv.Id, nil)
	resp := env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments/" + p.Id.String() + "/cancel", Token: m.Token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", resp.StatusCode, resp.Body)
	}
	resp.JSON(t, &p)
	apitest.Want(t, "status", p.Status, models.TerminalPaymentStatusCancelled)
	apitest.Want(t, "claimed after cancel", work(t, env), 0)
	again := env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments/" + p.Id.String() + "/cancel", Token: m.Token})
	if pr := apitest.WantProblem(t, again, http.StatusUnprocessableEntity, "Terminal payment not pending"); !strings.Contains(pr.Detail, "cancelled") {
		t.Errorf("detail %q does not name the status", pr.Detail)
	}
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments/" + uuid.NewString() + "/cancel", Token: m.Token}),
		http.StatusNotFound, "Not found")

	// Cancelled while the terminal waits for a card: the terminal stops.
	p = mustTerminalPayment(t, m, tm.Id, inv.Id, nil)
	done := make(chan int)
	go func() { n, _ := env.App.Terminals.Work(context.Background(), quiet); done <- n }()
	waitFor(t, func() bool {
		var asked bool
		_ = env.App.DB.Get(&asked, `SELECT asked_at IS NOT NULL FROM terminal_payments WHERE id = $1`, p.Id)
		return asked
	})
	resp = env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments/" + p.Id.String() + "/cancel", Token: m.Token})
	apitest.Want(t, "cancel while asked", resp.StatusCode, http.StatusOK)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker still waits on the cancelled terminal")
	}
	apitest.Want(t, "status", readTerminalPayment(t, m, p.Id).Status, models.TerminalPaymentStatusCancelled)
	apitest.Want(t, "cancelled events", len(eventsOfType(t, m, "terminal_payment.cancelled")), 2)
	apitest.Want(t, "terminal free again", readTerminal(t, m, tm.Id).Status == models.TerminalStatusBusy, false)
	after, _ := m.Read(t, inv.Id)
	apitest.Want(t, "invoice balance", after.Balance.Text('f'), "9.00")
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lostAnswers are terminals whose answers never reach payreq, though the
// gateway makes (and keeps) each sale; inquired counts the gateway asked.
type lostAnswers struct {
	*processor.SimTerminals
	inquired atomic.Int32
}

func (l *lostAnswers) AuthCard(ctx context.Context, s processor.TerminalSale) (processor.TerminalResult, error) {
	if _, err := l.SimTerminals.AuthCard(ctx, s); err != nil {
		return processor.TerminalResult{}, err
	}
	return processor.TerminalResult{}, fmt.Errorf("connection reset: %w", processor.ErrUnavailable)
}

func (l *lostAnswers) InquireOrder(ctx context.Context, mid, order string) (processor.TerminalResult, bool, error) {
	l.inquired.Add(1)
	return l.SimTerminals.InquireOrder(ctx, mid, order)
}

// No answer within the timeout: the gateway is asked by order id. Found,
// its outcome stands; not found, the payment timed out.
func TestTerminalPaymentTimeoutThenLookup(t *testing.T) {
	t.Run("not found at the gateway", func(t *testing.T) {
		t.Parallel()
		env, _ := terminalEnv(t)
		env.App.Terminals.Timeout = 300 * time.Millisecond
		m := apitest.NewMerchant(t, env)
		tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalSlow, "Slow")
		inv := m.MustCreate(t, m.Body("TERM-T", "9.00"))
		p := mustTerminalPayment(t, m, tm.Id, inv.Id, nil)
		work(t, env)
		p = readTerminalPayment(t, m, p.Id)
		apitest.Want(t, "status", p.Status, models.TerminalPaymentStatusTimedOut)
		apitest.Want(t, "card payment", p.CardPaymentId == nil, true)
		apitest.Want(t, "timed_out events", len(eventsOfType(t, m, "terminal_payment.timed_out")), 1)
		after, _ := m.Read(t, inv.Id)
		apitest.Want(t, "balance", after.Balance.Text('f'), "9.00")
	})
	t.Run("found at the gateway", func(t *testing.T) {
		t.Parallel()
		env, sim := terminalEnv(t)
		lost := &lostAnswers{SimTerminals: sim}
		env.App.Terminals.Terminals = lost
		m := apitest.NewMerchant(t, env)
		tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Counter")
		inv := m.MustCreate(t, m.Body("TERM-F", "9.00"))
		p := mustTerminalPayment(t, m, tm.Id, inv.Id, nil)
		work(t, env)
		p = readTerminalPayment(t, m, p.Id)
		apitest.Want(t, "status", p.Status, models.TerminalPaymentStatusApproved)
		apitest.Want(t, "gateway asked", lost.inquired.Load(), int32(1))
		after, _ := m.Read(t, inv.Id)
		apitest.Want(t, "invoice", after.Status, models.InvoiceStatusPaid)
		apitest.Want(t, "card_payment.approved events", len(eventsOfType(t, m, "card_payment.approved")), 1)
	})
}

// A payreq that stopped after asking the terminal: the next start asks the
// gateway instead of the terminal, both ways.
func TestTerminalPaymentLeftPendingIsResolved(t *testing.T) {
	t.Parallel()
	env, sim := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	charged := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Charged")
	untouched := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Untouched")
	inv := m.MustCreate(t, m.Body("TERM-S", "30.00"))
	a := mustTerminalPayment(t, m, charged.Id, inv.Id, "10.00")
	b := mustTerminalPayment(t, m, untouched.Id, inv.Id, "10.00")
	// The stopped instance asked both; the gateway made a's sale only.
	var order string
	if err := env.App.DB.Get(&order, `SELECT order_id FROM terminal_payments WHERE id = $1`, a.Id); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.AuthCard(context.Background(), processor.TerminalSale{MerchantID: m.MIDs[0].Mid, HSN: charged.Hsn, OrderID: order,
		Amount: a.Amount.Decimal}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.App.DB.Exec(`UPDATE terminal_payments SET asked_at = now(), claimed_until = NULL
		WHERE id IN ($1, $2)`, a.Id, b.Id); err != nil {
		t.Fatal(err)
	}
	apitest.Want(t, "resolved", work(t, env), 2)
	apitest.Want(t, "a", readTerminalPayment(t, m, a.Id).Status, models.TerminalPaymentStatusApproved)
	apitest.Want(t, "b", readTerminalPayment(t, m, b.Id).Status, models.TerminalPaymentStatusTimedOut)
	after, _ := m.Read(t, inv.Id)
	apitest.Want(t, "balance", after.Balance.Text('f'), "20.00")
	apitest.Want(t, "nothing more to resolve", work(t, env), 0)
}

// An approval the invoice can no longer take (paid meanwhile) is voided.
func TestTerminalApprovalOnAPaidInvoiceIsVoided(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Counter")
	inv := m.MustCreate(t, m.Body("TERM-V", "9.00"))
	p := mustTerminalPayment(t, m, tm.Id, inv.Id, nil)
	if resp := env.Do(apitest.Request{Method: "POST", Path: "/payment-requests/" + inv.Id.String() + "/payments", Token: m.Token,
		Body: map[string]any{"amount": "9.00", "method": "cash"}}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("cash: %d %s", resp.StatusCode, resp.Body)
	}
	work(t, env)
	p = readTerminalPayment(t, m, p.Id)
	apitest.Want(t, "status", p.Status, models.TerminalPaymentStatusFailed)
	if !strings.Contains(apitest.Text(p.DeclineReason), "voided") {
		t.Errorf("reason %q", apitest.Text(p.DeclineReason))
	}
	var sales []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &sales)
	apitest.Want(t, "card payments", len(sales), 0)
}

// countingTerminals counts each order asked of a terminal.
type countingTerminals struct {
	*processor.SimTerminals
	mu    sync.Mutex
	asked map[string]int
}

func (c *countingTerminals) AuthCard(ctx context.Context, s processor.TerminalSale) (processor.TerminalResult, error) {
	c.mu.Lock()
	c.asked[s.OrderID]++
	c.mu.Unlock()
	return c.SimTerminals.AuthCard(ctx, s)
}

// Two instances on one database: each payment is asked once, and has one
// outcome and one card payment.
func TestTerminalWorkerOnTwoInstances(t *testing.T) {
	t.Parallel()
	env, sim := terminalEnv(t)
	counting := &countingTerminals{SimTerminals: sim, asked: map[string]int{}}
	env.App.Terminals.Terminals = counting
	second := &terminal.Store{DB: env.App.DB, Terminals: counting, Gateway: env.App.Processor, CardPayments: env.App.Payments,
		Now: env.App.Now, Timeout: time.Minute}
	m := apitest.NewMerchant(t, env)
	var ps []models.TerminalPayment
	for i := range 6 {
		tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, fmt.Sprintf("Lane %d", i))
		inv := m.MustCreate(t, m.Body(fmt.Sprintf("TERM-2I-%d", i), "10.00"))
		ps = append(ps, mustTerminalPayment(t, m, tm.Id, inv.Id, nil))
	}
	var wg sync.WaitGroup
	var claimed atomic.Int32
	for _, s := range []*terminal.Store{env.App.Terminals, second, env.App.Terminals, second} {
		wg.Go(func() {
			n, err := s.Work(context.Background(), quiet)
			if err != nil {
				t.Error(err)
			}
			claimed.Add(int32(n))
		})
	}
	wg.Wait()
	apitest.Want(t, "claims", claimed.Load(), int32(len(ps)))
	for _, p := range ps {
		p = readTerminalPayment(t, m, p.Id)
		apitest.Want(t, "status", p.Status, models.TerminalPaymentStatusApproved)
		var sales []models.CardPayment
		env.Do(apitest.Request{Method: "GET", Path: "/card-payments?invoiceId=" + p.InvoiceId.String(), Token: m.Token}).JSON(t, &sales)
		apitest.Want(t, "card payments", len(sales), 1)
	}
	for order, n := range counting.asked {
		if n != 1 {
			t.Errorf("order %s asked %d times", order, n)
		}
	}
	apitest.Want(t, "orders asked", len(counting.asked), len(ps))
	apitest.Want(t, "approved events", len(eventsOfType(t, m, "terminal_payment.approved")), len(ps))
}

// Paging and filters of the list.
func TestTerminalPaymentsList(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	a := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "A")
	b := addTerminal(t, env, m.MIDs[0], processor.SimTerminalDecline, "B")
	inv := m.MustCreate(t, m.Body("TERM-L", "100.00"))
	var made []models.TerminalPayment
	for range 3 {
		made = append(made, mustTerminalPayment(t, m, a.Id, inv.Id, "1.00"))
		made = append(made, mustTerminalPayment(t, m, b.Id, inv.Id, "1.00"))
		work(t, env)
	}
	var page []models.TerminalPayment
	resp := env.Do(apitest.Request{Method: "GET", Path: "/terminal-payments?limit=4", Token: m.Token})
	resp.JSON(t, &page)
	if len(page) != 4 || page[0].Id != made[5].Id || resp.Header.Get("Link") == "" {
		t.Fatalf("first page: %d payments, Link %q", len(page), resp.Header.Get("Link"))
	}
	var byTerminal, declined []models.TerminalPayment
	env.Do(apitest.Request{Method: "GET", Path: "/terminal-payments?terminalId=" + a.Id.String(), Token: m.Token}).JSON(t, &byTerminal)
	apitest.Want(t, "terminal A's", len(byTerminal), 3)
	env.Do(apitest.Request{Method: "GET", Path: "/terminal-payments?status=declined", Token: m.Token}).JSON(t, &declined)
	apitest.Want(t, "declined", len(declined), 3)
	for _, p := range declined {
		if p.TerminalId != b.Id {
			t.Errorf("a declined payment of terminal %s", p.TerminalId)
		}
	}
}

// Payments waiting on terminals hold no database connection: with a pool
// of 4 and 8 payments pending on SIM-SLOW terminals, the API answers.
func TestTerminalPaymentsWaitingHoldNoConnection(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{Configure: func(c *config.Config) {
		c.DBMaxOpenConns, c.DBMaxIdleConns = 4, 4
	}})
	m := apitest.NewMerchant(t, env)
	for i := range 8 {
		tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalSlow, fmt.Sprintf("Slow %d", i))
		inv := m.MustCreate(t, m.Body(fmt.Sprintf("TERM-P-%d", i), "10.00"))
		mustTerminalPayment(t, m, tm.Id, inv.Id, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { env.App.Terminals.RunWorker(ctx, 10*time.Millisecond, quiet); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool {
		var asked int
		_ = env.App.DB.Get(&asked, `SELECT count(*) FROM terminal_payments WHERE asked_at IS NOT NULL`)
		return asked == 8
	})
	for range 5 {
		start := time.Now()
		resp := env.Do(apitest.Request{Method: "GET", Path: "/locations", Token: m.Token})
		apitest.Want(t, "GET /locations", resp.StatusCode, http.StatusOK)
		if took := time.Since(start); took > time.Second {
			t.Fatalf("GET /locations took %v while 8 payments wait on terminals", took)
		}
	}
	var pending int
	_ = env.App.DB.Get(&pending, `SELECT count(*) FROM terminal_payments WHERE status = 'pending'`)
	apitest.Want(t, "still pending", pending, 8)
}

// approvesAnyway are terminals whose customer taps just as the payment is
// cancelled: the approval comes once tap is closed, whatever was cancelled.
type approvesAnyway struct {
	*processor.SimTerminals
	tap chan struct{}
}

func (a *approvesAnyway) AuthCard(ctx context.Context, s processor.TerminalSale) (processor.TerminalResult, error) {
	<-a.tap
	return processor.TerminalResult{Approved: true, RetRef: "343005123199", Token: "9411111111111111", CardBrand: "visa",
		LastFour: "1111", EntryMode: processor.EntryContactless}, nil
}

// voidCounter counts the voids asked of the gateway.
type voidCounter struct {
	processor.Processor
	mu    sync.Mutex
	voids []string
}

func (v *voidCounter) Void(ctx context.Context, mid, order string) error {
	v.mu.Lock()
	v.voids = append(v.voids, order)
	v.mu.Unlock()
	return v.Processor.Void(ctx, mid, order)
}

// A card taken by a terminal whose payment was cancelled meanwhile is
// voided at the gateway; the payment stays cancelled, no sale recorded.
func TestTerminalApprovalAfterCancelIsVoided(t *testing.T) {
	t.Parallel()
	gateway := &voidCounter{}
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{WrapProcessor: func(p processor.Processor) processor.Processor {
		gateway.Processor = p
		return gateway
	}})
	anyway := &approvesAnyway{SimTerminals: env.App.Terminals.Terminals.(*processor.SimTerminals), tap: make(chan struct{})}
	env.App.Terminals.Terminals = anyway
	m := apitest.NewMerchant(t, env)
	tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalOK, "Counter")
	inv := m.MustCreate(t, m.Body("TERM-AC", "9.00"))
	p := mustTerminalPayment(t, m, tm.Id, inv.Id, nil)
	done := make(chan struct{})
	go func() { work(t, env); close(done) }()
	waitFor(t, func() bool {
		var asked bool
		_ = env.App.DB.Get(&asked, `SELECT asked_at IS NOT NULL FROM terminal_payments WHERE id = $1`, p.Id)
		return asked
	})
	apitest.Want(t, "cancel", env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments/" + p.Id.String() + "/cancel", Token: m.Token}).StatusCode, http.StatusOK)
	close(anyway.tap)
	<-done
	apitest.Want(t, "status", readTerminalPayment(t, m, p.Id).Status, models.TerminalPaymentStatusCancelled)
	var order string
	if err := env.App.DB.Get(&order, `SELECT order_id FROM terminal_payments WHERE id = $1`, p.Id); err != nil {
		t.Fatal(err)
	}
	gateway.mu.Lock()
	voids := strings.Join(gateway.voids, " ")
	gateway.mu.Unlock()
	apitest.Want(t, "voids", voids, order)
	var sales []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &sales)
	apitest.Want(t, "card payments", len(sales), 0)
	after, _ := m.Read(t, inv.Id)
	apitest.Want(t, "balance", after.Balance.Text('f'), "9.00")
}

// An invoice a terminal is taking a payment toward cannot be changed: the
// terminal would charge an amount the invoice no longer has. Once the
// payment is cancelled, the change is made.
func TestTerminalPaymentPendingRefusesAChange(t *testing.T) {
	t.Parallel()
	env, _ := terminalEnv(t)
	m := apitest.NewMerchant(t, env)
	tm := addTerminal(t, env, m.MIDs[0], processor.SimTerminalSlow, "Slow")
	inv := m.MustCreate(t, m.Body("TERM-EDIT", "9.00"))
	p := mustTerminalPayment(t, m, tm.Id, inv.Id, nil)

	apitest.WantProblem(t, patch(m, inv.Id, map[string]any{"amount": "12.00"}, ""), http.StatusUnprocessableEntity, "Invoice cannot be changed")
	after, _ := m.Read(t, inv.Id)
	apitest.Want(t, "amount after the refused change", after.Amount.Text('f'), "9.00")

	resp := env.Do(apitest.Request{Method: "POST", Path: "/terminal-payments/" + p.Id.String() + "/cancel", Token: m.Token})
	apitest.Want(t, "cancel", resp.StatusCode, http.StatusOK)
	apitest.Want(t, "change once cancelled", patch(m, inv.Id, map[string]any{"amount": "12.00"}, "").StatusCode, http.StatusOK)
}
