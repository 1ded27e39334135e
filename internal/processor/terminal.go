package processor

import (
	"context"
	"errors"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// TerminalSale asks a card terminal in a store to take a card for an
// amount, authorised and captured at once.
type TerminalSale struct {
	MerchantID string // the MID
	HSN        string // the terminal's hardware serial number
	// OrderID is the terminal payment's own short id (at most 19
	// characters): the gateway is asked for it when the answer is lost.
	OrderID    string
	InvoiceRef string // the invoice number's first 12 characters
	Amount     apd.Decimal
}

// Entry modes: how the card reached the terminal.
const (
	EntryChip        = "chip"
	EntryContactless = "contactless"
	EntrySwipe       = "swipe"
	EntryManual      = "manual"
)

// TerminalResult is the gateway's answer to a terminal sale. The card
// number never reaches payreq: the terminal gives a token and the gateway
// its last four digits.
type TerminalResult struct {
	Approved      bool
	RetRef        string
	DeclineReason string // plain words, on decline
	Token         string
	CardBrand     string // visa, mastercard, …, as Brand names them
	LastFour      string
	EntryMode     string // EntryChip, …, or "" when the answer does not say
	// From the chip's EMV tags.
	ApplicationLabel string
	AID              string
}

// Answers of a terminal that say nothing was charged (AuthCard returns
// them alone, without ErrUnavailable).
var (
	ErrTerminalBusy      = errors.New("the terminal is in use")                    // errorCode 7
	ErrTerminalCancelled = errors.New("the payment was cancelled at the terminal") // errorCode 8
	ErrTerminalOffline   = errors.New("the terminal is offline")
)

// ErrTerminalTimedOut: the terminal gave up waiting for a card (errorCode
// 1). It comes with ErrUnavailable: the gateway is asked about the order
// before anything is concluded.
var ErrTerminalTimedOut = errors.New("the terminal timed out")

// Terminals are the card terminals at the gateway: CardPointe's Integrated
// Terminal API, or the simulator's terminals named by their HSN.
type Terminals interface {
	// Ping says whether the terminal is connected: nil when it is,
	// ErrTerminalOffline when it is not, ErrUnavailable otherwise.
	Ping(ctx context.Context, merchantID, hsn string) error
	// AuthCard asks the terminal for a card and the gateway for its
	// authorisation with capture; it may wait minutes for the customer. A
	// decline is a TerminalResult with Approved false and a nil error.
	// ErrTerminalBusy, ErrTerminalCancelled and ErrTerminalOffline say
	// nothing was charged; any other error wraps ErrUnavailable, and then
	// the order may have been charged: InquireOrder tells.
	AuthCard(ctx context.Context, s TerminalSale) (TerminalResult, error)
	// CancelTerminal tells the terminal to stop waiting for a card.
	CancelTerminal(ctx context.Context, merchantID, hsn string) error
	// InquireOrder asks the gateway what became of an order: found is
	// false when the gateway has no such order.
	InquireOrder(ctx context.Context, merchantID, orderID string) (res TerminalResult, found bool, err error)
}

// entryMode reads how the card was entered from the gateway's words
// ("EMV Contact", "Chip Read", "Contactless", "Swipe", "Keyed", …).
func entryMode(words string) string {
	w := strings.ToLower(words)
	switch {
	case w == "":
		return ""
	case strings.Contains(w, "contactless"), strings.Contains(w, "tap"), strings.Contains(w, "nfc"):
		return EntryContactless
	case strings.Contains(w, "chip"), strings.Contains(w, "emv"), strings.Contains(w, "contact"):
		return EntryChip
	case strings.Contains(w, "swipe"), strings.Contains(w, "msr"), strings.Contains(w, "fallback"):
		return EntrySwipe
	case strings.Contains(w, "key"), strings.Contains(w, "manual"):
		return EntryManual
	}
	return ""
}

// tokenCard is the brand and last four of a CardSecure token: a 9, the
// card's first digit, random digits, and the card's last four.
func tokenCard(token string) (brand, last4 string) {
	if len(token) < 6 || token[0] != '9' || !allDigits(token) {
		return "", ""
	}
	brand = "unknown"
	switch token[1] {
	case '4':
		brand = "visa"
	case '2', '5':
		brand = "mastercard"
	case '3':
		brand = "amex"
	case '6':
		brand = "discover"
	}
	return brand, token[len(token)-4:]
}
