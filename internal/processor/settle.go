package processor

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/cockroachdb/apd/v3"
)

// BatchPayment is an approved card payment of a MID's open batch.
type BatchPayment struct {
	RetRef string
	Refund bool // a refund; otherwise a sale
	Amount apd.Decimal
}

// Batch is a MID's open batch as it closes: the approved sales and refunds
// in no deposit yet.
type Batch struct {
	MerchantID string
	// Date is the day the batch closes, in the location's time zone (only
	// its year, month and day count).
	Date     time.Time
	Payments []BatchPayment
}

// Funding is money the processor sends to the merchant's bank for payments
// of a batch.
type Funding struct {
	Ref        string    // the processor's funding id; "" when it has none
	ExpectedAt time.Time // the day the money should arrive (year, month, day)
	Fees       apd.Decimal
	RetRefs    []string // the payments it holds, by the processor's reference
	// PaymentFees are each payment's share of Fees by its reference, when
	// the processor says (the simulator does; a refund's is 0); nil when
	// it does not.
	PaymentFees map[string]apd.Decimal
}

// Fees are what the simulator charges per approved sale: Percent of the
// amount plus Fixed, rounded half-up to the cent.
type Fees struct {
	Percent apd.Decimal
	Fixed   apd.Decimal
}

var feesPattern = regexp.MustCompile(`^([0-9]{1,2}(?:\.[0-9]{1,4})?)%(?:\+([0-9]{1,3}(?:\.[0-9]{1,2})?))?$`)

// ParseFees reads fees written as PERCENT%+FIXED, such as 2.9%+0.30 (the
// fixed part may be left out: 2.9%).
func ParseFees(s string) (Fees, error) {
	m := feesPattern.FindStringSubmatch(s)
	if m == nil {
		return Fees{}, errors.New("fees must be written as PERCENT%+FIXED, such as 2.9%+0.30")
	}
	var f Fees
	if _, _, err := f.Percent.SetString(m[1]); err != nil {
		return Fees{}, err
	}
	if m[2] != "" {
		if _, _, err := f.Fixed.SetString(m[2]); err != nil {
			return Fees{}, err
		}
	}
	return f, nil
}

// DefaultFees are 2.9% + 0.30 per sale.
var DefaultFees = Fees{Percent: *apd.New(29, -1), Fixed: *apd.New(30, -2)}

// Of is the fee of one sale of amount a, rounded half-up to the cent.
func (f Fees) Of(a *apd.Decimal) (apd.Decimal, error) {
	ctx := apd.BaseContext.WithPrecision(34)
	ctx.Rounding = apd.RoundHalfUp
	var fee apd.Decimal
	_, err := ctx.Mul(&fee, a, &f.Percent)
	if err == nil {
		_, err = ctx.Quo(&fee, &fee, apd.New(100, 0))
	}
	if err == nil {
		_, err = ctx.Add(&fee, &fee, &f.Fixed)
	}
	if err == nil {
		_, err = ctx.Quantize(&fee, &fee, -2)
	}
	if err != nil {
		return apd.Decimal{}, fmt.Errorf("fee of %s: %w", a.Text('f'), err)
	}
	return fee, nil
}

// NextBusinessDay is the first Monday-to-Friday day after d.
func NextBusinessDay(d time.Time) time.Time {
	d = time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
	for {
		d = d.AddDate(0, 0, 1)
		if wd := d.Weekday(); wd != time.Saturday && wd != time.Sunday {
			return d
		}
	}
}

// Settle funds the whole batch at once: one funding holding every payment,
// with s.Fees charged per sale, expected the next Monday-to-Friday day.
func (s *Simulator) Settle(ctx context.Context, b Batch) ([]Funding, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simulator: settle %s: %w: %w", b.MerchantID, ErrUnavailable, err)
	}
	if len(b.Payments) == 0 {
		return nil, nil
	}
	f := Funding{ExpectedAt: NextBusinessDay(b.Date), PaymentFees: map[string]apd.Decimal{}}
	for _, p := range b.Payments {
		f.RetRefs = append(f.RetRefs, p.RetRef)
		if p.Refund {
			f.PaymentFees[p.RetRef] = apd.Decimal{}
			continue
		}
		fee, err := s.Fees.Of(&p.Amount)
		if err != nil {
			return nil, fmt.Errorf("simulator: settle %s: %w", b.MerchantID, err)
		}
		f.PaymentFees[p.RetRef] = fee
		if _, err := apd.BaseContext.WithPrecision(34).Add(&f.Fees, &f.Fees, &fee); err != nil {
			return nil, fmt.Errorf("simulator: settle %s: %w", b.MerchantID, err)
		}
	}
	return []Funding{f}, nil
}
