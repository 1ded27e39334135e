// Package processor is the card processor behind one interface, with two
// implementations: a built-in simulator (the default) and a CardPointe-style
// REST client. Card numbers and CVVs pass through here in memory only.
package processor

import (
	"context"
	"errors"

	"github.com/cockroachdb/apd/v3"
)

// Card is what the customer typed. It is never stored or logged.
type Card struct {
	Number string // digits only
	Expiry string // MMYY
	CVV    string
	Name   string
}

// Item is one line sent as Level 3 (line-level) data.
type Item struct {
	Description   string
	Quantity      apd.Decimal
	UnitCost      apd.Decimal
	LineTotal     apd.Decimal // round-half-up(quantity × unitCost, 2)
	TaxAmount     apd.Decimal // round-half-up(LineTotal × the line's tax rate ÷ 100, 2)
	UOM           string
	CommodityCode string
	UPC           string
}

// Charge is an authorisation with capture.
type Charge struct {
	MerchantID string // the MID
	OrderID    string // our payment id; lets a lost answer be inquired and voided
	Amount     apd.Decimal
	Card       Card
	Items      []Item // nil: no Level 3 data
	// TaxAmount is the order's total tax (the invoice's, whatever part of
	// it this charge pays), sent with Items.
	TaxAmount   apd.Decimal
	SaveProfile bool // store the card at the processor
	// Stored is set to charge a stored card (Card is then empty but for
	// the name): a merchant-initiated, scheduled stored-credential
	// payment, as an automatic payment of a recurring invoice is.
	Stored *StoredCard
}

// StoredCard is a card stored at the processor, charged without the
// customer present.
type StoredCard struct {
	ProfileID string
	AccountID string
	// LastFour and Brand are the card's, as it was saved.
	LastFour string
	Brand    string
}

// shown is the brand and last four digits of the card charged.
func (c Charge) shown() (brand, four string) {
	if c.Stored != nil {
		return c.Stored.Brand, c.Stored.LastFour
	}
	return Brand(c.Card.Number), lastFour(c.Card.Number)
}

// Result is the processor's answer to a charge.
type Result struct {
	Approved      bool
	RetRef        string // the processor's reference, on approval
	DeclineReason string // plain words, on decline
	CardBrand     string // visa, mastercard, amex, discover, …
	LastFour      string
	// Set when SaveProfile was asked and the card was approved.
	ProfileID string
	AccountID string
}

// Refund gives money of an approved sale back to its card.
type Refund struct {
	MerchantID string      // the sale's MID
	OrderID    string      // the refund's id; lets a lost answer be inquired
	SaleRetRef string      // the sale's reference at the processor
	SaleOrder  string      // the sale's order id (its card payment id)
	LastFour   string      // the sale's card's last four digits
	Amount     apd.Decimal // at most what is left of the sale
	// Whole: the refund returns the whole sale, which may then be voided
	// instead, if the processor has not settled it yet.
	Whole bool
}

// RefundResult is the processor's answer to a refund.
type RefundResult struct {
	Approved      bool
	RetRef        string // the refund's reference (a void's: the sale's)
	DeclineReason string // plain words, on decline
}

// ErrUnavailable wraps every failure that is not an answer about the card:
// the processor could not be reached, timed out, or answered an error.
var ErrUnavailable = errors.New("card processor unavailable")

// ErrProcessorError comes with ErrUnavailable when the processor did answer,
// but with an error rather than an answer about the card (502 to a client;
// a processor that could not be reached is a 503).
var ErrProcessorError = errors.New("the card processor answered with an error")

// ErrUnsettled comes with ErrUnavailable when the card may be charged: the
// charge's answer was lost and voiding it failed too. The caller must void
// the order later, until the processor confirms.
var ErrUnsettled = errors.New("the charge may stand at the processor")

// Processor charges cards and manages stored card profiles.
type Processor interface {
	// AuthorizeCapture charges the card. A decline is a Result with
	// Approved false and a nil error. An error wraps ErrUnavailable; the
	// implementation has then made sure the card is not left charged, or
	// else the error also wraps ErrUnsettled.
	AuthorizeCapture(ctx context.Context, c Charge) (Result, error)
	// Void cancels an approved charge by its order id (used when the
	// payment could not be recorded after an approval).
	Void(ctx context.Context, merchantID, orderID string) error
	// DeleteProfile removes a stored card at the processor.
	DeleteProfile(ctx context.Context, merchantID, profileID, accountID string) error
	// Refund gives money of a sale back: a void of the sale when the whole
	// of it is refunded before the processor settled it, a refund
	// otherwise. A decline is a RefundResult with Approved false and a nil
	// error. An error wraps ErrUnavailable; with ErrUnsettled too when the
	// refund may have been made (its answer was lost): InquireRefund tells.
	Refund(ctx context.Context, r Refund) (RefundResult, error)
	// InquireRefund asks what became of a refund whose answer was lost:
	// found is false when the processor made no such refund.
	InquireRefund(ctx context.Context, r Refund) (res RefundResult, found bool, err error)
	// Settle says what the processor funds of a MID's batch as it closes:
	// the simulator funds the whole batch; a real processor reports the
	// fundings it made on the batch's day (matched to payments by retref).
	// An error wraps ErrUnavailable.
	Settle(ctx context.Context, b Batch) ([]Funding, error)
}
