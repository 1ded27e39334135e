package processor

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Simulator test cards (decisions.md, "Pay page and card processor").
const (
	TestCardApprove = "4111111111111111"
	TestCardDecline = "4000000000000002"
	TestCardError   = "4000000000000119"
	// TestCardDeleteFails approves and can be saved, but deleting its
	// profile fails: its last four are 0119.
	TestCardDeleteFails = "4111111111070119"
	// TestCardRefundDeclines approves sales, whose refunds are declined
	// (any card ending in 0259: the simulator keeps no state).
	TestCardRefundDeclines = "4000000000000259"
	// TestCardSlow approves after SlowCardDelay, and so do the refunds of
	// its sales (any card ending in 5001): a slow processor, for showing
	// that a payment waiting for it holds no database connection.
	TestCardSlow = "4000000000005001"
	// TestCardStoredDeclines approves on the pay page and can be saved;
	// the charges of its stored card are declined ("Insufficient funds"):
	// any stored card ending in 5076.
	TestCardStoredDeclines = "4000000000005076"
)

// storedDeclinedLastFour marks a stored card whose charges are declined.
const storedDeclinedLastFour = "5076"

// SlowCardDelay is how long the simulator takes to answer for TestCardSlow.
const SlowCardDelay = 5 * time.Second

// slowLastFour marks a sale whose refunds the simulator makes slowly.
const slowLastFour = "5001"

// refundDeclinedLastFour marks a sale whose refunds the simulator declines.
const refundDeclinedLastFour = "0259"

// failingLastFour marks a stored profile whose deletion fails, so the
// "processor failure keeps the saved card" path can be exercised.
const failingLastFour = "0119"

// Simulator is the built-in processor: it charges nothing and answers from
// the card number alone. It keeps no state it answers from (a profile id
// carries the card's last four), so it behaves the same across restarts
// and instances and is safe for concurrent use. It remembers the
// stored-credential fields of the charges of stored cards, as CardPointe
// would be sent them, for a test to read (StoredCharges).
type Simulator struct {
	// Fees are charged per approved sale when a batch is settled.
	Fees Fees

	mu     sync.Mutex
	stored []StoredCharge
}

// StoredCharge is a charge of a stored card as the simulator was asked it,
// in CardPointe's terms.
type StoredCharge struct {
	OrderID, Profile, Amount   string
	COF, COFScheduled, EcomInd string
}

// StoredCharges are the charges of stored cards asked so far, in order.
func (s *Simulator) StoredCharges() []StoredCharge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StoredCharge(nil), s.stored...)
}

// NewSimulator returns the built-in processor, with the default fees.
func NewSimulator() *Simulator { return &Simulator{Fees: DefaultFees} }

var _ Processor = (*Simulator)(nil)

// AuthorizeCapture approves any card number that passes the Luhn check,
// except the decline and error test cards; the slow card after
// SlowCardDelay.
func (s *Simulator) AuthorizeCapture(ctx context.Context, c Charge) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("simulator: authorize order %s: %w: %w", c.OrderID, ErrUnavailable, err)
	}
	if c.Card.Number == TestCardSlow {
		if err := slowly(ctx); err != nil {
			return Result{}, fmt.Errorf("simulator: authorize order %s: %w: %w", c.OrderID, ErrUnavailable, err)
		}
	}
	if c.Stored != nil {
		return s.chargeStored(c), nil
	}
	res := Result{CardBrand: Brand(c.Card.Number), LastFour: lastFour(c.Card.Number)}
	switch {
	case c.Card.Number == TestCardError:
		return Result{}, fmt.Errorf("simulator: authorize order %s: %w: %w", c.OrderID, ErrUnavailable, ErrProcessorError)
	case c.Card.Number == TestCardDecline:
		res.DeclineReason = "Card declined by the issuer"
		return res, nil
	case !LuhnValid(c.Card.Number):
		res.DeclineReason = "Invalid card number"
		return res, nil
	case !validExpiry(c.Card.Expiry):
		res.DeclineReason = "Invalid expiry date"
		return res, nil
	case !validCVV(c.Card.CVV):
		res.DeclineReason = "Invalid security code"
		return res, nil
	case c.Amount.Sign() <= 0:
		res.DeclineReason = "Invalid amount"
		return res, nil
	}
	res.Approved = true
	res.RetRef = digits("retref:"+c.OrderID, 12)
	if c.SaveProfile {
		// 20 digits: 16 from the order id, then the card's last four.
		res.ProfileID = digits("profile:"+c.OrderID, 16) + res.LastFour
		res.AccountID = "1"
	}
	return res, nil
}

// chargeStored approves a charge of a stored card, but for one ending in
// 5076 (TestCardStoredDeclines), and remembers what it was asked.
func (s *Simulator) chargeStored(c Charge) Result {
	body := authBody(c)
	s.mu.Lock()
	s.stored = append(s.stored, StoredCharge{OrderID: body.OrderID, Profile: body.Profile, Amount: body.Amount,
		COF: body.COF, COFScheduled: body.COFScheduled, EcomInd: body.EcomInd})
	s.mu.Unlock()
	res := Result{CardBrand: c.Stored.Brand, LastFour: c.Stored.LastFour}
	switch {
	case c.Stored.LastFour == storedDeclinedLastFour:
		res.DeclineReason = "Insufficient funds"
	case c.Amount.Sign() <= 0:
		res.DeclineReason = "Invalid amount"
	default:
		res.Approved = true
		res.RetRef = digits("retref:"+c.OrderID, 12)
	}
	return res
}

// slowly waits SlowCardDelay, or until ctx ends.
func slowly(ctx context.Context) error {
	t := time.NewTimer(SlowCardDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Void always succeeds: the simulator holds no charges to cancel.
func (s *Simulator) Void(ctx context.Context, merchantID, orderID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simulator: void order %s: %w: %w", orderID, ErrUnavailable, err)
	}
	return nil
}

// DeleteProfile fails for a profile saved from a card ending in 0119 and
// succeeds for every other profile, known or not.
func (s *Simulator) DeleteProfile(ctx context.Context, merchantID, profileID, accountID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simulator: delete profile %s: %w: %w", profileID, ErrUnavailable, err)
	}
	if strings.HasSuffix(profileID, failingLastFour) {
		return fmt.Errorf("simulator: delete profile %s: %w: %w", profileID, ErrUnavailable, ErrProcessorError)
	}
	return nil
}

// digits derives n (at most 19) decimal digits from s, the same every time.
func digits(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	v := binary.BigEndian.Uint64(sum[:8])
	mod := uint64(1)
	for range n {
		mod *= 10
	}
	return fmt.Sprintf("%0*d", n, v%mod)
}

func validExpiry(mmyy string) bool {
	if len(mmyy) != 4 || !allDigits(mmyy) {
		return false
	}
	month := int(mmyy[0]-'0')*10 + int(mmyy[1]-'0')
	return month >= 1 && month <= 12
}

func validCVV(cvv string) bool {
	return (len(cvv) == 3 || len(cvv) == 4) && allDigits(cvv)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Refund approves, except for sales made with a card ending in 0259
// (TestCardRefundDeclines), whose refunds are declined; those of sales made
// with a card ending in 5001 (TestCardSlow) take SlowCardDelay.
func (s *Simulator) Refund(ctx context.Context, r Refund) (RefundResult, error) {
	if err := ctx.Err(); err != nil {
		return RefundResult{}, fmt.Errorf("simulator: refund order %s: %w: %w", r.OrderID, ErrUnavailable, err)
	}
	if r.LastFour == slowLastFour {
		if err := slowly(ctx); err != nil {
			return RefundResult{}, fmt.Errorf("simulator: refund order %s: %w: %w", r.OrderID, ErrUnavailable, err)
		}
	}
	if r.LastFour == refundDeclinedLastFour {
		return RefundResult{DeclineReason: "Refund declined by issuer"}, nil
	}
	return RefundResult{Approved: true, RetRef: digits("retref:"+r.OrderID, 12)}, nil
}

// InquireRefund finds no refund: the simulator moves no money, so a refund
// whose answer was lost changed nothing and may be made again.
func (s *Simulator) InquireRefund(ctx context.Context, r Refund) (RefundResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return RefundResult{}, false, fmt.Errorf("simulator: inquire refund %s: %w: %w", r.OrderID, ErrUnavailable, err)
	}
	return RefundResult{}, false, nil
}
