package processor

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

func charge(number, orderID string, save bool) Charge {
	return Charge{
		MerchantID:  "496160873888",
		OrderID:     orderID,
		Amount:      *apd.New(1230, -2),
		Card:        Card{Number: number, Expiry: "1230", CVV: "123", Name: "Dana Whitfield"},
		SaveProfile: save,
	}
}

func TestSimulatorTestCards(t *testing.T) {
	ctx := context.Background()
	sim := NewSimulator()

	res, err := sim.AuthorizeCapture(ctx, charge(TestCardApprove, "order-1", false))
	if err != nil || !res.Approved {
		t.Fatalf("approve card: %+v, %v", res, err)
	}
	if !regexp.MustCompile(`^\d{12}$`).MatchString(res.RetRef) {
		t.Errorf("retRef %q, want 12 digits", res.RetRef)
	}
	if res.CardBrand != "visa" || res.LastFour != "1111" || res.DeclineReason != "" {
		t.Errorf("approve card: %+v", res)
	}
	if res.ProfileID != "" || res.AccountID != "" {
		t.Errorf("profile without SaveProfile: %+v", res)
	}

	res, err = sim.AuthorizeCapture(ctx, charge(TestCardDecline, "order-2", true))
	if err != nil || res.Approved {
		t.Fatalf("decline card: %+v, %v", res, err)
	}
	if res.DeclineReason == "" || res.RetRef != "" || res.ProfileID != "" || res.LastFour != "0002" {
		t.Errorf("decline card: %+v", res)
	}

	_, err = sim.AuthorizeCapture(ctx, charge(TestCardError, "order-3", false))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error card: %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), TestCardError) {
		t.Errorf("error names the card number: %v", err)
	}

	// Any other Luhn-valid number approves; an invalid one declines.
	res, err = sim.AuthorizeCapture(ctx, charge("5555555555554444", "order-4", false))
	if err != nil || !res.Approved || res.CardBrand != "mastercard" {
		t.Errorf("other valid card: %+v, %v", res, err)
	}
	res, err = sim.AuthorizeCapture(ctx, charge("4111111111111112", "order-5", false))
	if err != nil || res.Approved || res.DeclineReason == "" {
		t.Errorf("Luhn-invalid card: %+v, %v", res, err)
	}
}

func TestSimulatorDeterministic(t *testing.T) {
	ctx := context.Background()
	a, _ := NewSimulator().AuthorizeCapture(ctx, charge(TestCardApprove, "order-1", true))
	b, _ := NewSimulator().AuthorizeCapture(ctx, charge("378282246310005", "order-1", true))
	c, _ := NewSimulator().AuthorizeCapture(ctx, charge(TestCardApprove, "order-2", true))
	if a.RetRef != b.RetRef {
		t.Errorf("same order, different retRefs: %s, %s", a.RetRef, b.RetRef)
	}
	if a.RetRef == c.RetRef {
		t.Errorf("different orders, same retRef %s", a.RetRef)
	}
	if !regexp.MustCompile(`^\d{16}1111$`).MatchString(a.ProfileID) || a.AccountID != "1" {
		t.Errorf("profile %q/%q, want 20 digits ending 1111 and account 1", a.ProfileID, a.AccountID)
	}
	if a.ProfileID[:16] != b.ProfileID[:16] || !strings.HasSuffix(b.ProfileID, "0005") {
		t.Errorf("profile ids %s, %s", a.ProfileID, b.ProfileID)
	}
	if a.ProfileID == c.ProfileID {
		t.Errorf("different orders, same profile id %s", a.ProfileID)
	}
}

func TestSimulatorDeleteProfile(t *testing.T) {
	ctx := context.Background()
	sim := NewSimulator()

	ok, err := sim.AuthorizeCapture(ctx, charge(TestCardApprove, "order-1", true))
	if err != nil || ok.ProfileID == "" {
		t.Fatalf("save: %+v, %v", ok, err)
	}
	if err := sim.DeleteProfile(ctx, "496160873888", ok.ProfileID, ok.AccountID); err != nil {
		t.Errorf("delete: %v", err)
	}
	if err := sim.DeleteProfile(ctx, "496160873888", "unknown", "1"); err != nil {
		t.Errorf("delete unknown profile: %v", err)
	}

	bad, err := sim.AuthorizeCapture(ctx, charge(TestCardDeleteFails, "order-2", true))
	if err != nil || !bad.Approved || bad.LastFour != "0119" {
		t.Fatalf("save 0119 card: %+v, %v", bad, err)
	}
	// A fresh simulator (another instance, or after a restart) still knows.
	if err := NewSimulator().DeleteProfile(ctx, "496160873888", bad.ProfileID, bad.AccountID); !errors.Is(err, ErrUnavailable) {
		t.Errorf("delete 0119 profile: %v, want ErrUnavailable", err)
	}
}

func TestSimulatorVoid(t *testing.T) {
	if err := NewSimulator().Void(context.Background(), "496160873888", "never-charged"); err != nil {
		t.Errorf("void: %v", err)
	}
}

func TestSimulatorConcurrent(t *testing.T) {
	sim := NewSimulator()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			res, err := sim.AuthorizeCapture(context.Background(), charge(TestCardApprove, "order-c", i%2 == 0))
			if err != nil || !res.Approved {
				t.Errorf("concurrent charge: %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
}

func TestBrand(t *testing.T) {
	for number, want := range map[string]string{
		"4111111111111111": "visa",
		"4000000000000002": "visa",
		"5105105105105100": "mastercard",
		"5555555555554444": "mastercard",
		"2221000000000009": "mastercard",
		"2720990000000007": "mastercard",
		"2721000000000004": "unknown",
		"378282246310005":  "amex",
		"340000000000009":  "amex",
		"6011111111111117": "discover",
		"6500000000000002": "discover",
		"6440000000000000": "discover",
		"3530111333300000": "jcb",
		"36227206271667":   "diners",
		"9999999999999995": "unknown",
		"":                 "unknown",
	} {
		if got := Brand(number); got != want {
			t.Errorf("Brand(%s) = %s, want %s", number, got, want)
		}
	}
}

func TestLuhnValid(t *testing.T) {
	for number, want := range map[string]bool{
		TestCardApprove:     true,
		TestCardDecline:     true,
		TestCardError:       true,
		TestCardDeleteFails: true,
		"378282246310005":   true,
		"4111111111111112":  false,
		"4111 1111 1111":    false,
		"0":                 false,
		"":                  false,
	} {
		if got := LuhnValid(number); got != want {
			t.Errorf("LuhnValid(%q) = %v, want %v", number, got, want)
		}
	}
}

// Refunds approve, except those of sales made with a card ending in 0259;
// the simulator finds no refund whose answer was lost (it moves no money).
func TestSimulatorRefunds(t *testing.T) {
	s := NewSimulator()
	r := Refund{MerchantID: "496160873888", OrderID: "refund-1", SaleRetRef: "123456789012", LastFour: "1111", Amount: mustDecimal("5.00")}
	if res, err := s.Refund(context.Background(), r); err != nil || !res.Approved || res.RetRef == "" {
		t.Errorf("refund: %+v, %v", res, err)
	}
	r.LastFour = TestCardRefundDeclines[len(TestCardRefundDeclines)-4:]
	if res, err := s.Refund(context.Background(), r); err != nil || res.Approved || res.DeclineReason != "Refund declined by issuer" {
		t.Errorf("refund of a 0259 sale: %+v, %v", res, err)
	}
	if _, found, err := s.InquireRefund(context.Background(), r); err != nil || found {
		t.Errorf("inquiry: found %v, %v", found, err)
	}
	if !LuhnValid(TestCardRefundDeclines) {
		t.Errorf("%s does not pass the Luhn check, so its sales would be declined", TestCardRefundDeclines)
	}
}

// The slow card approves, sale and refund, after SlowCardDelay; a caller
// that stops waiting gets ErrUnavailable at once, nothing charged.
func TestSimulatorSlowCard(t *testing.T) {
	if !LuhnValid(TestCardSlow) {
		t.Fatalf("%s does not pass the Luhn check", TestCardSlow)
	}
	s := NewSimulator()
	t.Run("sale", func(t *testing.T) {
		t.Parallel()
		res, err := s.AuthorizeCapture(context.Background(), charge(TestCardSlow, "order-slow", false))
		if err != nil || !res.Approved || res.LastFour != "5001" {
			t.Errorf("slow card: %+v, %v", res, err)
		}
	})
	t.Run("refund", func(t *testing.T) {
		t.Parallel()
		r := Refund{MerchantID: "496160873888", OrderID: "refund-slow", SaleRetRef: "123456789012", LastFour: "5001", Amount: mustDecimal("5.00")}
		if res, err := s.Refund(context.Background(), r); err != nil || !res.Approved {
			t.Errorf("refund of a slow card's sale: %+v, %v", res, err)
		}
	})
	t.Run("given up", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 2)
		go func() {
			_, err := s.AuthorizeCapture(ctx, charge(TestCardSlow, "order-slow-2", false))
			done <- err
		}()
		go func() {
			_, err := s.Refund(ctx, Refund{OrderID: "refund-slow-2", LastFour: "5001", Amount: mustDecimal("5.00")})
			done <- err
		}()
		cancel()
		for range 2 {
			if err := <-done; !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
				t.Errorf("slow card given up: %v, want ErrUnavailable", err)
			}
		}
	})
}
