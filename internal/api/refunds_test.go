package api_test

import (
	"context"
	"errors"
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
	"github.com/payreq/payreq/internal/processor"
)

// paidSale pays an invoice of amount with card and returns the invoice and
// its sale.
func paidSale(t *testing.T, env *apitest.Env, m apitest.Merchant, number, amount, card string) (models.Invoice, models.Payment) {
	t.Helper()
	inv := m.MustCreate(t, m.Body(number, amount))
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, inv), apitest.Payment{Card: card, Amount: amount}), http.StatusSeeOther)
	got, raw := m.Read(t, inv.Id)
	if got.Payments == nil || len(*got.Payments) != 1 {
		t.Fatalf("want one payment: %s", raw)
	}
	return got, (*got.Payments)[0]
}

func refund(env *apitest.Env, token string, sale uuid.UUID, body any, key string) *apitest.Response {
	req := apitest.Request{Method: "POST", Path: "/card-payments/" + sale.String() + "/refund", Token: token, Body: body}
	if key != "" {
		req.Header = http.Header{"Idempotency-Key": {key}}
	}
	return env.Do(req)
}

// A part refund, then the rest: each a card payment of kind refund; the
// sale, the invoice and its payments count them; the invoice's collected
// amounts stay as they were; nothing more can be refunded after.
func TestRefundPartThenTheRest(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv, sale := paidSale(t, env, m, "RF-1", "100.00", apitest.CardApprove)

	var part models.CardPayment
	resp := refund(env, m.Token, sale.Id, map[string]any{"amount": "30.00", "reason": "One dish returned"}, "")
	apitest.Want(t, "part refund status", resp.StatusCode, http.StatusCreated)
	resp.JSON(t, &part)
	apitest.Want(t, "kind", part.Kind, models.CardPaymentKindRefund)
	apitest.Want(t, "status", part.Status, models.CardPaymentStatusApproved)
	apitest.Want(t, "amount", part.Amount.Text('f'), "30.00")
	apitest.Want(t, "refundOf", part.RefundOf != nil && *part.RefundOf == sale.Id, true)
	apitest.WantText(t, "reason", part.Reason, "One dish returned")
	apitest.Want(t, "createdByName set", part.CreatedByName != nil && *part.CreatedByName != "", true)
	apitest.Want(t, "invoiceId", part.InvoiceId, inv.Id)
	apitest.Want(t, "retRef set", part.RetRef != nil && *part.RetRef != "", true)
	apitest.Want(t, "declineReason", part.DeclineReason == nil, true)

	var rest models.CardPayment
	resp = refund(env, m.Token, sale.Id, map[string]any{"amount": nil, "reason": nil}, "")
	apitest.Want(t, "rest refund status", resp.StatusCode, http.StatusCreated)
	resp.JSON(t, &rest)
	apitest.Want(t, "the rest", rest.Amount.Text('f'), "70.00")
	apitest.Want(t, "a reason left out", rest.Reason == nil, true)

	var s models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + sale.Id.String(), Token: m.Token}).JSON(t, &s)
	apitest.Want(t, "sale amountRefunded", s.AmountRefunded.Text('f'), "100.00")
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "invoice amountRefunded", got.AmountRefunded.Text('f'), "100.00")
	apitest.Want(t, "payments[0].amountRefunded", (*got.Payments)[0].AmountRefunded.Text('f'), "100.00")
	apitest.Want(t, "invoice status", got.Status, models.InvoiceStatusPaid)
	apitest.Want(t, "invoice amountPaid", got.AmountPaid.Text('f'), "100.00")
	apitest.Want(t, "invoice balance", got.Balance.Text('f'), "0.00")
	apitest.Want(t, "invoice payments", len(*got.Payments), 1)

	p := apitest.WantProblem(t, refund(env, m.Token, sale.Id, map[string]any{"amount": "0.01"}, ""), http.StatusUnprocessableEntity, "Refund exceeds refundable amount")
	apitest.Want(t, "the detail states what is left", strings.Contains(p.Detail, "0.00"), true)
	var refunds []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=refund&invoiceId=" + inv.Id.String(), Token: m.Token}).JSON(t, &refunds)
	apitest.Want(t, "refunds listed", len(refunds), 2)
}

// Bad amounts are 400s naming amount; a refund of more than is left is a
// 422 stating what is left; a declined sale or a refund is not refundable;
// an unknown id is a 404. None of them changes anything.
func TestRefundRefusals(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv, sale := paidSale(t, env, m, "RFX-1", "50.00", apitest.CardApprove)
	for _, amount := range []any{"0", "-5.00", "0.001", "12.345", 0, "abc", true, 1e308} {
		p := apitest.WantProblem(t, refund(env, m.Token, sale.Id, map[string]any{"amount": amount}, ""), http.StatusBadRequest, "")
		if p.Errors == nil || len((*p.Errors)["amount"]) == 0 || !strings.HasPrefix((*p.Errors)["amount"][0], "must") {
			t.Errorf("amount %v: errors do not say what amount must be: %+v", amount, p.Errors)
		}
	}
	p := apitest.WantProblem(t, refund(env, m.Token, sale.Id, map[string]any{"reason": strings.Repeat("r", 501)}, ""), http.StatusBadRequest, "")
	if p.Errors == nil || len((*p.Errors)["reason"]) == 0 {
		t.Errorf("a long reason: errors do not name reason")
	}
	p = apitest.WantProblem(t, refund(env, m.Token, sale.Id, map[string]any{"amount": "50.01"}, ""), http.StatusUnprocessableEntity, "Refund exceeds refundable amount")
	apitest.Want(t, "the detail states what is left", strings.Contains(p.Detail, "50.00"), true)
	apitest.WantProblem(t, refund(env, m.Token, uuid.New(), nil, ""), http.StatusNotFound, "")

	path := apitest.PayPath(t, m.MustCreate(t, m.Body("RFX-2", "5.00")))
	apitest.WantStatus(t, env.Pay(t, path, apitest.Payment{Card: apitest.CardDecline, Amount: "5.00"}), http.StatusPaymentRequired)
	var declined []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?status=declined", Token: m.Token}).JSON(t, &declined)
	if len(declined) != 1 {
		t.Fatalf("%d declined sales, want 1", len(declined))
	}
	apitest.WantProblem(t, refund(env, m.Token, declined[0].Id, nil, ""), http.StatusUnprocessableEntity, "Not refundable")

	var r models.CardPayment
	refund(env, m.Token, sale.Id, map[string]any{"amount": "5"}, "").JSON(t, &r)
	apitest.WantProblem(t, refund(env, m.Token, r.Id, nil, ""), http.StatusUnprocessableEntity, "Not refundable")
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "refunded after the refusals", got.AmountRefunded.Text('f'), "5.00")
}

// The Idempotency-Key works as on invoice creation: a replay answers 200
// with the same refund and refunds nothing more; another body, or another
// sale, under the key is a 422.
func TestRefundIdempotency(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv, sale := paidSale(t, env, m, "RFI-1", "40.00", apitest.CardApprove)
	_, other := paidSale(t, env, m, "RFI-2", "40.00", apitest.CardApprove)
	key := uuid.NewString()
	body := map[string]any{"amount": "10.00", "reason": "late delivery"}
	first := refund(env, m.Token, sale.Id, body, key)
	apitest.Want(t, "first", first.StatusCode, http.StatusCreated)
	var made models.CardPayment
	first.JSON(t, &made)
	again := refund(env, m.Token, sale.Id, map[string]any{"reason": "late delivery", "amount": 10}, key)
	apitest.Want(t, "replay status", again.StatusCode, http.StatusOK)
	apitest.Want(t, "replay header", again.Header.Get("Idempotent-Replayed"), "true")
	var replayed models.CardPayment
	again.JSON(t, &replayed)
	apitest.Want(t, "replay id", replayed.Id, made.Id)
	apitest.WantProblem(t, refund(env, m.Token, sale.Id, map[string]any{"amount": "11.00"}, key), http.StatusUnprocessableEntity, "Idempotency key reused")
	apitest.WantProblem(t, refund(env, m.Token, other.Id, body, key), http.StatusUnprocessableEntity, "Idempotency key reused")
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "refunded once", got.AmountRefunded.Text('f'), "10.00")

	// Requests sent at once with one key make one refund.
	key = uuid.NewString()
	statuses := make(chan int, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { statuses <- refund(env, m.Token, sale.Id, map[string]any{"amount": "1.00"}, key).StatusCode })
	}
	wg.Wait()
	close(statuses)
	created := 0
	for s := range statuses {
		if s == http.StatusCreated {
			created++
		} else if s != http.StatusOK {
			t.Errorf("a concurrent request with the key: %d", s)
		}
	}
	apitest.Want(t, "made by the concurrent requests", created, 1)
	got, _ = m.Read(t, inv.Id)
	apitest.Want(t, "refunded after the concurrent requests", got.AmountRefunded.Text('f'), "11.00")
}

// Twenty refunds of one sale at once, on two instances: they never add up
// to more than the sale.
func TestConcurrentRefundsNeverExceedTheSale(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	clock := apitest.NewClock(time.Now())
	one := apitest.New(t, testDSN, apitest.Options{DataDir: shared, PublicURL: "https://payreq.test", Clock: clock})
	two := apitest.New(t, testDSN, apitest.Options{DataDir: shared, PublicURL: "https://payreq.test", Clock: clock})
	m := apitest.NewMerchant(t, one)
	inv, sale := paidSale(t, one, m, "RFC-1", "100.00", apitest.CardApprove)
	statuses := make(chan int, 20)
	var wg sync.WaitGroup
	for i := range 20 {
		env := one
		if i%2 == 1 {
			env = two
		}
		wg.Go(func() { statuses <- refund(env, m.Token, sale.Id, map[string]any{"amount": "7.00"}, "").StatusCode })
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	apitest.Want(t, "approved refunds (14 × 7.00 ≤ 100.00)", count[http.StatusCreated], 14)
	apitest.Want(t, "refused as exceeding", count[http.StatusUnprocessableEntity], 6)
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "refunded", got.AmountRefunded.Text('f'), "98.00")
}

// The processor declines the refunds of sales made with 4000000000000259:
// a refund with status declined and its reason; nothing is refunded.
func TestDeclinedRefund(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv, sale := paidSale(t, env, m, "RFD-1", "20.00", processor.TestCardRefundDeclines)
	resp := refund(env, m.Token, sale.Id, nil, "")
	apitest.Want(t, "status", resp.StatusCode, http.StatusCreated)
	var r models.CardPayment
	resp.JSON(t, &r)
	apitest.Want(t, "refund status", r.Status, models.CardPaymentStatusDeclined)
	apitest.WantText(t, "declineReason", r.DeclineReason, "Refund declined by issuer")
	apitest.Want(t, "retRef", r.RetRef == nil, true)
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "invoice amountRefunded", got.AmountRefunded.Text('f'), "0.00")
	apitest.Want(t, "payments[0].amountRefunded", (*got.Payments)[0].AmountRefunded.Text('f'), "0.00")
}

// failingRefunds is the simulator with refunds that fail as told.
type failingRefunds struct {
	processor.Processor
	mu      sync.Mutex
	refund  func(r processor.Refund) (processor.RefundResult, error)
	inquire func(r processor.Refund) (processor.RefundResult, bool, error)
	asked   []string // refund order ids, in order
}

func (f *failingRefunds) Refund(ctx context.Context, r processor.Refund) (processor.RefundResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r.OrderID)
	if f.refund != nil {
		return f.refund(r)
	}
	return f.Processor.Refund(ctx, r)
}

func (f *failingRefunds) InquireRefund(ctx context.Context, r processor.Refund) (processor.RefundResult, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inquire != nil {
		return f.inquire(r)
	}
	return f.Processor.InquireRefund(ctx, r)
}

// A processor that fails is a 502 and records nothing; the same request
// goes through once it answers again.
func TestRefundProcessorFailure(t *testing.T) {
	fail := &failingRefunds{refund: func(processor.Refund) (processor.RefundResult, error) {
		return processor.RefundResult{}, fmt.Errorf("test: %w: %w", processor.ErrUnavailable, processor.ErrProcessorError)
	}}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: func(p processor.Processor) processor.Processor {
		fail.Processor = p
		return fail
	}})
	m := apitest.NewMerchant(t, env)
	inv, sale := paidSale(t, env, m, "RFP-1", "20.00", apitest.CardApprove)
	key := uuid.NewString()
	apitest.WantProblem(t, refund(env, m.Token, sale.Id, nil, key), http.StatusBadGateway, "Card processor unavailable")
	var refunds []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?kind=refund", Token: m.Token}).JSON(t, &refunds)
	apitest.Want(t, "refunds recorded", len(refunds), 0)
	var pending int
	if err := env.App.DB.Get(&pending, `SELECT count(*) FROM pending_refunds`); err != nil || pending != 0 {
		t.Errorf("pending refunds %d (%v), want none", pending, err)
	}
	fail.mu.Lock()
	fail.refund = nil
	fail.mu.Unlock()
	apitest.Want(t, "retried", refund(env, m.Token, sale.Id, nil, key).StatusCode, http.StatusCreated)
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "refunded", got.AmountRefunded.Text('f'), "20.00")
}

// A refund whose answer was lost, though the processor made it, is found
// by asking the processor when its request is retried with the same key:
// the retry replays it, and the card is refunded once.
func TestRefundWithALostAnswerIsNotMadeTwice(t *testing.T) {
	t.Parallel()
	made := map[string]processor.RefundResult{}
	fail := &failingRefunds{}
	fail.refund = func(r processor.Refund) (processor.RefundResult, error) {
		made[r.OrderID] = processor.RefundResult{Approved: true, RetRef: "999000111222"}
		if len(made) == 1 {
			return processor.RefundResult{}, fmt.Errorf("test: %w: %w: %w", processor.ErrUnavailable, processor.ErrUnsettled, errors.New("timeout"))
		}
		return made[r.OrderID], nil
	}
	fail.inquire = func(r processor.Refund) (processor.RefundResult, bool, error) {
		res, ok := made[r.OrderID]
		return res, ok, nil
	}
	env := apitest.New(t, testDSN, apitest.Options{WrapProcessor: func(p processor.Processor) processor.Processor {
		fail.Processor = p
		return fail
	}})
	m := apitest.NewMerchant(t, env)
	inv, sale := paidSale(t, env, m, "RFL-1", "20.00", apitest.CardApprove)
	key := uuid.NewString()
	apitest.WantProblem(t, refund(env, m.Token, sale.Id, map[string]any{"amount": "8.00"}, key), http.StatusBadGateway, "")
	retry := refund(env, m.Token, sale.Id, map[string]any{"amount": "8.00"}, key)
	apitest.Want(t, "the retry replays", retry.StatusCode, http.StatusOK)
	var r models.CardPayment
	retry.JSON(t, &r)
	apitest.Want(t, "the refund is the first request's", made[r.Id.String()].RetRef, "999000111222")
	apitest.Want(t, "refunds asked of the processor", len(fail.asked), 1)
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "refunded once", got.AmountRefunded.Text('f'), "8.00")
}

// refundsAt is the simulator, telling each refund as it reaches the
// processor and counting those it has answered.
type refundsAt struct {
	processor.Processor
	reached  chan string
	answered atomic.Int32
}

func (p *refundsAt) Refund(ctx context.Context, r processor.Refund) (processor.RefundResult, error) {
	p.reached <- r.OrderID
	defer p.answered.Add(1)
	return p.Processor.Refund(ctx, r)
}

// A refund waiting for the processor holds neither its sale nor a
// connection: with a pool of 2, while a refund of all of a slow card's sale
// is at the processor, a second refund of it is refused at once (all that
// is left is held by the first) and the sale reads; then the first is made.
func TestSlowRefundHoldsNothing(t *testing.T) {
	t.Parallel()
	at := &refundsAt{reached: make(chan string, 4)}
	env := apitest.New(t, testDSN, apitest.Options{
		WrapProcessor: func(p processor.Processor) processor.Processor { at.Processor = p; return at },
		Configure:     func(c *config.Config) { c.DBMaxOpenConns, c.DBMaxIdleConns = 2, 2 },
	})
	m := apitest.NewMerchant(t, env)
	inv, sale := paidSale(t, env, m, "RFS-1", "40.00", processor.TestCardSlow)
	first := make(chan *apitest.Response, 1)
	go func() { first <- refund(env, m.Token, sale.Id, nil, "") }()
	select {
	case <-at.reached:
	case <-time.After(time.Minute):
		t.Fatal("the refund did not reach the processor")
	}

	p := apitest.WantProblem(t, refund(env, m.Token, sale.Id, map[string]any{"amount": "0.01"}, ""), http.StatusUnprocessableEntity,
		"Refund exceeds refundable amount")
	apitest.Want(t, "the detail states that nothing is left", strings.Contains(p.Detail, "0.00"), true)
	apitest.Want(t, "the sale read meanwhile", env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + sale.Id.String(), Token: m.Token}).StatusCode, http.StatusOK)
	apitest.Want(t, "refunds answered by the processor meanwhile", at.answered.Load(), int32(0))

	var made models.CardPayment
	resp := <-first
	apitest.Want(t, "the first refund", resp.StatusCode, http.StatusCreated)
	resp.JSON(t, &made)
	apitest.Want(t, "refund status", made.Status, models.CardPaymentStatusApproved)
	apitest.Want(t, "refund amount", made.Amount.Text('f'), "40.00")
	got, _ := m.Read(t, inv.Id)
	apitest.Want(t, "refunded", got.AmountRefunded.Text('f'), "40.00")
}
