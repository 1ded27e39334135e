package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/processor"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// settle closes the merchant's open batches now, as payreq settle does.
func settle(t *testing.T, env *apitest.Env, m apitest.Merchant) []payment.Deposit {
	t.Helper()
	made, err := env.App.Payments.SettleOrganization(context.Background(), uuid.MustParse(m.Org), quiet)
	if err != nil {
		t.Fatal(err)
	}
	return made
}

func deposits(t *testing.T, env *apitest.Env, m apitest.Merchant, query string) []models.Deposit {
	t.Helper()
	var list []models.Deposit
	resp := env.Do(apitest.Request{Method: "GET", Path: "/deposits" + query, Token: m.Token})
	apitest.Want(t, "list status", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &list)
	return list
}

func heldBy(t *testing.T, env *apitest.Env, m apitest.Merchant, deposit uuid.UUID) []models.CardPayment {
	t.Helper()
	var list []models.CardPayment
	resp := env.Do(apitest.Request{Method: "GET", Path: "/card-payments?limit=100&depositId=" + deposit.String(), Token: m.Token})
	apitest.Want(t, "list status", resp.StatusCode, http.StatusOK)
	resp.JSON(t, &list)
	return list
}

func sum(t *testing.T, amounts ...string) string {
	t.Helper()
	var total apd.Decimal
	for _, a := range amounts {
		d, _, err := apd.NewFromString(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := apd.BaseContext.WithPrecision(34).Add(&total, &total, d); err != nil {
			t.Fatal(err)
		}
	}
	return total.Text('f')
}

// A day of sales and refunds on two MIDs settles into one deposit per MID:
// sales − refunds − fees = net, the simulator's fee (2.9% + 0.30, half-up)
// per approved sale and none per refund; declined sales and refunds stay
// out. A second settle makes nothing; a refund made after its sale was
// settled goes to the next deposit, whose net is negative; a deposit is
// paid once its expected day has come.
func TestSettlementSums(t *testing.T) {
	// Wednesday 2026-11-18, noon in Portland (the demo's time zone).
	clock := apitest.NewClock(time.Date(2026, 11, 18, 20, 0, 0, 0, time.UTC))
	env := apitest.New(t, testDSN, apitest.Options{Clock: clock})
	m := apitest.NewMerchant(t, env)

	// Each amount with its fee, worked out by hand: 5.00 × 2.9% + 0.30 =
	// 0.445, half-up 0.45 (a banker's rounding would give 0.44).
	fees := map[string]string{"100.00": "3.20", "5.00": "0.45", "15.00": "0.74", "0.50": "0.31", "1234.56": "36.10"}
	amounts := []string{"100.00", "5.00", "15.00", "0.50", "1234.56"}
	var sales []models.Payment
	var saleAmounts, saleFees []string
	for i := range 15 {
		a := amounts[i%len(amounts)]
		_, sale := paidSale(t, env, m, "ST-"+string(rune('A'+i)), a, apitest.CardApprove)
		sales = append(sales, sale)
		saleAmounts, saleFees = append(saleAmounts, a), append(saleFees, fees[a])
	}
	// A sale whose refunds the simulator declines, and a declined sale.
	_, stubborn := paidSale(t, env, m, "ST-259", "15.00", "4000000000000259")
	saleAmounts, saleFees = append(saleAmounts, "15.00"), append(saleFees, "0.74")
	declined := m.MustCreate(t, m.Body("ST-DECL", "20.00"))
	env.Pay(t, apitest.PayPath(t, declined), apitest.Payment{Card: apitest.CardDecline, Amount: "20.00"})
	// One sale on the second MID: a deposit of its own.
	other := m.Body("ST-MID2", "100.00")
	other["merchantAccountId"] = m.MIDs[1].Id.String()
	otherInv := m.MustCreate(t, other)
	apitest.WantStatus(t, env.Pay(t, apitest.PayPath(t, otherInv), apitest.Payment{Card: apitest.CardApprove, Amount: "100.00"}), http.StatusSeeOther)

	refunds := []struct {
		sale   models.Payment
		amount any
	}{{sales[0], "30.00"}, {sales[1], nil}, {sales[5], "0.01"}, {sales[9], "1000.00"}}
	var refundAmounts []string
	for _, r := range refunds {
		var got models.CardPayment
		resp := refund(env, m.Token, r.sale.Id, map[string]any{"amount": r.amount}, "")
		apitest.Want(t, "refund status", resp.StatusCode, http.StatusCreated)
		resp.JSON(t, &got)
		refundAmounts = append(refundAmounts, got.Amount.Text('f'))
	}
	var declinedRefund models.CardPayment
	refund(env, m.Token, stubborn.Id, nil, "").JSON(t, &declinedRefund)
	apitest.Want(t, "refund of the 0259 sale", declinedRefund.Status, models.CardPaymentStatusDeclined)

	made := settle(t, env, m)
	apitest.Want(t, "deposits made", len(made), 2)
	list := deposits(t, env, m, "?merchantAccountId="+m.MIDs[0].Id.String())
	apitest.Want(t, "deposits of the first MID", len(list), 1)
	d := list[0]
	apitest.Want(t, "salesCount", d.SalesCount, int32(len(saleAmounts)))
	apitest.Want(t, "salesAmount", d.SalesAmount.Text('f'), sum(t, saleAmounts...))
	apitest.Want(t, "refundsCount", d.RefundsCount, int32(len(refunds)))
	apitest.Want(t, "refundsAmount", d.RefundsAmount.Text('f'), sum(t, refundAmounts...))
	apitest.Want(t, "feesAmount", d.FeesAmount.Text('f'), sum(t, saleFees...))
	net := sum(t, d.SalesAmount.Text('f'), "-"+d.RefundsAmount.Text('f'), "-"+d.FeesAmount.Text('f'))
	apitest.Want(t, "netAmount = sales - refunds - fees", d.NetAmount.Text('f'), net)
	apitest.Want(t, "batchDate (Portland's day)", d.BatchDate.String(), "2026-11-18")
	apitest.Want(t, "expectedAt (the next weekday)", d.ExpectedAt.String(), "2026-11-19")
	apitest.Want(t, "status", d.Status, models.DepositStatusPending)
	apitest.Want(t, "paidAt", d.PaidAt == nil, true)
	apitest.Want(t, "mid", d.Mid, m.MIDs[0].Mid)

	held := heldBy(t, env, m, d.Id)
	apitest.Want(t, "card payments it holds", len(held), len(saleAmounts)+len(refunds))
	for _, p := range held {
		if p.Status != models.CardPaymentStatusApproved || p.DepositId == nil || *p.DepositId != d.Id {
			t.Errorf("deposit holds %s %s %s with depositId %v", p.Kind, p.Status, p.Id, p.DepositId)
		}
	}
	var open []models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments?status=declined", Token: m.Token}).JSON(t, &open)
	for _, p := range open {
		apitest.Want(t, "a declined card payment is in no deposit", p.DepositId == nil, true)
	}
	var one models.Deposit
	env.Do(apitest.Request{Method: "GET", Path: "/deposits/" + d.Id.String(), Token: m.Token}).JSON(t, &one)
	apitest.Want(t, "GET /deposits/{id}", one.NetAmount.Text('f'), d.NetAmount.Text('f'))

	apitest.Want(t, "a second settle makes nothing", len(settle(t, env, m)), 0)
	apitest.Want(t, "deposits after a second settle", len(deposits(t, env, m, "")), 2)

	// The rest of the 100.00 sale, refunded after it was settled.
	clock.Advance(time.Minute)
	late := refund(env, m.Token, sales[0].Id, nil, "")
	apitest.Want(t, "late refund status", late.StatusCode, http.StatusCreated)
	next := settle(t, env, m)
	apitest.Want(t, "deposits made by the next settle", len(next), 1)
	var n models.Deposit
	env.Do(apitest.Request{Method: "GET", Path: "/deposits/" + next[0].ID.String(), Token: m.Token}).JSON(t, &n)
	apitest.Want(t, "next deposit salesCount", n.SalesCount, int32(0))
	apitest.Want(t, "next deposit refundsAmount", n.RefundsAmount.Text('f'), "70.00")
	apitest.Want(t, "next deposit feesAmount", n.FeesAmount.Text('f'), "0.00")
	apitest.Want(t, "next deposit netAmount", n.NetAmount.Text('f'), "-70.00")
	apitest.Want(t, "newest first", deposits(t, env, m, "")[0].Id, n.Id)

	// Thursday in Portland: the money has come.
	clock.Advance(12 * time.Hour)
	m.Renew()
	settle(t, env, m)
	paid := deposits(t, env, m, "?status=paid")
	apitest.Want(t, "deposits paid", len(paid), 3)
	apitest.Want(t, "paidAt set", paid[0].PaidAt != nil, true)
	apitest.Want(t, "none pending", len(deposits(t, env, m, "?status=pending")), 0)
}

// Two instances' settlement workers, past the cutoff at the same moment,
// close the batch once: one deposit holding every sale.
func TestSettlementWorkerRunsOnceAcrossInstances(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	clock := apitest.NewClock(time.Date(2026, 11, 18, 20, 0, 0, 0, time.UTC))
	dir := t.TempDir() // the instances share their secrets
	first := apitest.New(t, dsn, apitest.Options{Clock: clock, DataDir: dir})
	second := apitest.New(t, dsn, apitest.Options{Clock: clock, DataDir: dir})
	m := apitest.NewMerchant(t, first)
	for _, n := range []string{"W-1", "W-2", "W-3"} {
		paidSale(t, first, m, n, "10.00", apitest.CardApprove)
	}
	closeAll := func() int {
		var wg sync.WaitGroup
		var mu sync.Mutex
		made := 0
		for i := range 8 {
			env := []*apitest.Env{first, second}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := env.App.Payments.CloseDueBatches(context.Background(), quiet)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				made += len(got)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return made
	}
	apitest.Want(t, "deposits before the cutoff", closeAll(), 0)
	// 22:30 in Portland: past the default cutoff of 22:00.
	clock.Advance(10*time.Hour + 30*time.Minute)
	m.Renew()
	apitest.Want(t, "deposits made past the cutoff", closeAll(), 1)
	list := deposits(t, first, m, "")
	apitest.Want(t, "deposits", len(list), 1)
	apitest.Want(t, "sales in it", list[0].SalesCount, int32(3))
	apitest.Want(t, "batchDate", list[0].BatchDate.String(), "2026-11-18")
	apitest.Want(t, "held", len(heldBy(t, first, m, list[0].Id)), 3)
	apitest.Want(t, "deposits made running again", closeAll(), 0)
}

// fundingProcessor is the simulator for sales and refunds, and CardPointe's
// client for settlement, reading the funding report from a fake of
// GET /funding.
type fundingProcessor struct {
	processor.Processor
	cardPointe *processor.CardPointe
}

func (p fundingProcessor) Settle(ctx context.Context, b processor.Batch) ([]processor.Funding, error) {
	return p.cardPointe.Settle(ctx, b)
}

// With CardPointe, each funding of the report becomes a deposit holding the
// card payments whose retref it lists, with the report's fee; what the
// report does not list stays open, and reading the same report again makes
// nothing.
func TestCardPointeFundingImport(t *testing.T) {
	var mu sync.Mutex
	report := map[string]any{"fundings": []any{}, "txns": []any{}}
	var asked []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/cardconnect/rest/funding" {
			http.NotFound(w, r)
			return
		}
		asked = append(asked, r.URL.Query().Get("merchid")+" "+r.URL.Query().Get("date"))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(report)
	}))
	defer fake.Close()
	cp, err := processor.NewCardPointe(strings.Replace(fake.URL, "http://", "http://u:p@", 1)+"/cardconnect/rest", fake.Client())
	if err != nil {
		t.Fatal(err)
	}
	clock := apitest.NewClock(time.Date(2026, 11, 18, 20, 0, 0, 0, time.UTC))
	env := apitest.New(t, testDSN, apitest.Options{Clock: clock, WrapProcessor: func(p processor.Processor) processor.Processor {
		return fundingProcessor{Processor: p, cardPointe: cp}
	}})
	m := apitest.NewMerchant(t, env)
	var retRefs []string
	var sales []models.Payment
	for _, n := range []string{"CP-1", "CP-2", "CP-3"} {
		_, sale := paidSale(t, env, m, n, "50.00", apitest.CardApprove)
		sales = append(sales, sale)
		var p models.CardPayment
		env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + sale.Id.String(), Token: m.Token}).JSON(t, &p)
		retRefs = append(retRefs, *p.RetRef)
	}
	var r models.CardPayment
	refund(env, m.Token, sales[0].Id, map[string]any{"amount": "10.00"}, "").JSON(t, &r)

	mu.Lock()
	report = map[string]any{
		"fundings": []any{
			map[string]any{"fundingid": 7001, "fundingdate": "2026-11-19", "totalfunding": "86.80", "netsales": "90.00", "fee": "-3.20"},
			map[string]any{"fundingid": 7002, "fundingdate": "2026-11-19", "totalfunding": "5.00", "netsales": "5.00", "fee": "0.00"},
		},
		"txns": []any{
			map[string]any{"fundingid": 7001, "retref": retRefs[0], "amount": "50.00", "type": "Sale"},
			map[string]any{"fundingid": 7001, "retref": retRefs[1], "amount": "50.00", "type": "Sale"},
			map[string]any{"fundingid": 7001, "retref": *r.RetRef, "amount": "-10.00", "type": "Refund"},
			map[string]any{"fundingid": 7002, "retref": "not-ours", "amount": "5.00", "type": "Sale"},
		},
	}
	mu.Unlock()
	made := settle(t, env, m)
	apitest.Want(t, "deposits made (the funding of nothing of ours makes none)", len(made), 1)
	var d models.Deposit
	env.Do(apitest.Request{Method: "GET", Path: "/deposits/" + made[0].ID.String(), Token: m.Token}).JSON(t, &d)
	apitest.Want(t, "salesCount", d.SalesCount, int32(2))
	apitest.Want(t, "salesAmount", d.SalesAmount.Text('f'), "100.00")
	apitest.Want(t, "refundsAmount", d.RefundsAmount.Text('f'), "10.00")
	apitest.Want(t, "feesAmount, as the report states", d.FeesAmount.Text('f'), "3.20")
	apitest.Want(t, "netAmount", d.NetAmount.Text('f'), "86.80")
	apitest.Want(t, "expectedAt, the funding date", d.ExpectedAt.String(), "2026-11-19")
	apitest.Want(t, "held", len(heldBy(t, env, m, d.Id)), 3)
	var third models.CardPayment
	env.Do(apitest.Request{Method: "GET", Path: "/card-payments/" + sales[2].Id.String(), Token: m.Token}).JSON(t, &third)
	apitest.Want(t, "a sale the report does not list stays open", third.DepositId == nil, true)

	apitest.Want(t, "the same report read again makes", len(settle(t, env, m)), 0)
	mu.Lock()
	defer mu.Unlock()
	apitest.Want(t, "report asked for the MID and day", asked[0], m.MIDs[0].Mid+" 1118")
}

// Bad filters and ids are 400s naming what was wrong; an unknown id is a 404.
func TestDepositsRefuseBadInput(t *testing.T) {
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	for _, q := range []string{"/deposits?status=settled", "/deposits?merchantAccountId=mid-1", "/deposits?createdTo=today",
		"/deposits?limit=101", "/deposits?cursor=nonsense", "/card-payments?depositId=42"} {
		path, query, _ := strings.Cut(q, "?")
		name, _, _ := strings.Cut(query, "=")
		p := apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: q, Token: m.Token}), http.StatusBadRequest, "")
		if p.Errors == nil || len((*p.Errors)["query."+name]) == 0 {
			t.Errorf("%s %s: errors do not name query.%s", path, query, name)
		}
	}
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/deposits/not-a-uuid", Token: m.Token}), http.StatusBadRequest, "")
	apitest.WantProblem(t, env.Do(apitest.Request{Method: "GET", Path: "/deposits/" + uuid.NewString(), Token: m.Token}), http.StatusNotFound, "")
}
