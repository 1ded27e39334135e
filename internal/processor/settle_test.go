package processor

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

func day(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

// Fees are 2.9% + 0.30 per sale by default, each rounded half-up to the
// cent: 5.00 gives 0.445, so 0.45 (not a banker's 0.44).
func TestSimulatorFees(t *testing.T) {
	for amount, want := range map[string]string{"5.00": "0.45", "100.00": "3.20", "0.01": "0.30", "15.00": "0.74", "1234.56": "36.10"} {
		a := mustDecimal(amount)
		fee, err := DefaultFees.Of(&a)
		if err != nil {
			t.Fatal(err)
		}
		if fee.Text('f') != want {
			t.Errorf("fee of %s = %s, want %s", amount, fee.Text('f'), want)
		}
	}
	custom, err := ParseFees("1.75%+0.10")
	if err != nil {
		t.Fatal(err)
	}
	a := mustDecimal("200.00")
	if fee, _ := custom.Of(&a); fee.Text('f') != "3.60" {
		t.Errorf("1.75%%+0.10 of 200.00 = %s, want 3.60", fee.Text('f'))
	}
	if only, err := ParseFees("2%"); err != nil || only.Fixed.Sign() != 0 {
		t.Errorf("2%%: %v %v", only, err)
	}
	for _, bad := range []string{"", "2.9", "2.9%+", "%+0.30", "2.9%+0.301", "-1%", "2.9%-0.30", "100%+1"} {
		if _, err := ParseFees(bad); err == nil {
			t.Errorf("ParseFees(%q) accepted", bad)
		}
	}
}

// The money of a batch closed on a Friday or at the weekend arrives on
// Monday; otherwise the next day.
func TestNextBusinessDay(t *testing.T) {
	for from, want := range map[string]string{
		"2026-11-18": "2026-11-19", // Wednesday
		"2026-11-20": "2026-11-23", // Friday
		"2026-11-21": "2026-11-23", // Saturday
		"2026-11-22": "2026-11-23", // Sunday
		"2026-12-31": "2027-01-01",
	} {
		if got := NextBusinessDay(day(from)).Format(time.DateOnly); got != want {
			t.Errorf("after %s: %s, want %s", from, got, want)
		}
	}
}

// The simulator funds the whole batch: every payment, fees on sales only.
func TestSimulatorSettle(t *testing.T) {
	b := Batch{MerchantID: "496160873888", Date: day("2026-11-20"), Payments: []BatchPayment{
		{RetRef: "1", Amount: mustDecimal("100.00")},
		{RetRef: "2", Amount: mustDecimal("5.00")},
		{RetRef: "3", Amount: mustDecimal("40.00"), Refund: true},
	}}
	got, err := NewSimulator().Settle(context.Background(), b)
	if err != nil || len(got) != 1 {
		t.Fatalf("settle: %v %v", got, err)
	}
	if got[0].Fees.Text('f') != "3.65" || !slices.Equal(got[0].RetRefs, []string{"1", "2", "3"}) ||
		got[0].ExpectedAt.Format(time.DateOnly) != "2026-11-23" {
		t.Errorf("funding %+v, want fees 3.65 on retrefs 1 2 3 expected 2026-11-23", got[0])
	}
	if none, err := NewSimulator().Settle(context.Background(), Batch{MerchantID: "1", Date: day("2026-11-20")}); err != nil || len(none) != 0 {
		t.Errorf("an empty batch funds %v (%v)", none, err)
	}
}

// The funding report, in the shape CardPointe documents: each funding with
// the retrefs of its transactions and its fee (a debit, negative, is the
// same fee), asked by merchid and the batch's day as MMDD, with the
// gateway's credentials.
func TestCardPointeFundingReport(t *testing.T) {
	f := &fakeGateway{funding: func(q url.Values) (int, any) {
		return http.StatusOK, map[string]any{
			"merchid": q.Get("merchid"), "date": q.Get("date"),
			"fundings": []map[string]any{
				{"fundingmasterid": 101, "fundingid": 9001, "merchid": q.Get("merchid"), "fundingdate": "2026-11-19",
					"totalfunding": "96.35", "netsales": "100.00", "fee": "-3.65", "adjustment": "0.00", "reversal": "0.00"},
				{"fundingmasterid": 101, "fundingid": "9002", "fundingdate": "2026-11-20",
					"totalfunding": "-40.00", "netsales": "-40.00", "fee": "0.00"},
			},
			"txns": []map[string]any{
				{"fundingid": 9001, "retref": "343005123105", "amount": "100.00", "type": "Sale", "cardbrand": "Visa"},
				{"fundingid": 9001, "retref": "343005123106", "amount": "5.00", "type": "Sale"},
				{"fundingid": "9002", "retref": "343005998877", "amount": "-40.00", "type": "Refund"},
				{"fundingid": 9003, "retref": "elsewhere", "amount": "1.00", "type": "Sale"},
			},
		}
	}}
	cp := newFake(t, f)
	got, err := cp.Settle(context.Background(), Batch{MerchantID: "496160873888", Date: day("2026-11-18")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("fundings %+v, want 2", got)
	}
	if got[0].Ref != "9001" || got[0].Fees.Text('f') != "3.65" || got[0].ExpectedAt.Format(time.DateOnly) != "2026-11-19" ||
		!slices.Equal(got[0].RetRefs, []string{"343005123105", "343005123106"}) {
		t.Errorf("first funding %+v", got[0])
	}
	if got[1].Ref != "9002" || got[1].Fees.Text('f') != "0.00" || !slices.Equal(got[1].RetRefs, []string{"343005998877"}) {
		t.Errorf("second funding %+v", got[1])
	}
	req := f.recorded()[0]
	if req.Method != http.MethodGet || req.Query.Get("merchid") != "496160873888" || req.Query.Get("date") != "1118" ||
		req.User != "testing" || req.Password != "s3cr@t" {
		t.Errorf("request %s %s %v as %s", req.Method, req.Path, req.Query, req.User)
	}
}

// A report that fails or cannot be read is the processor's failure: the
// batch stays open for the next run.
func TestCardPointeFundingReportFailures(t *testing.T) {
	for name, answer := range map[string]func(url.Values) (int, any){
		"server error": func(url.Values) (int, any) { return http.StatusInternalServerError, map[string]string{"error": "down"} },
		"not a report": func(url.Values) (int, any) { return http.StatusOK, []string{"fundings"} },
		"undated funding": func(url.Values) (int, any) {
			return http.StatusOK, map[string]any{"fundings": []map[string]any{{"fundingid": 1}}}
		},
		"fee not a number": func(url.Values) (int, any) {
			return http.StatusOK, map[string]any{"fundings": []map[string]any{{"fundingid": 1, "fundingdate": "2026-11-19", "fee": "free"}}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cp := newFake(t, &fakeGateway{funding: answer})
			_, err := cp.Settle(context.Background(), Batch{MerchantID: "1", Date: day("2026-11-18")})
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("error %v, want ErrUnavailable", err)
			}
		})
	}
}
