package processor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The simulator's kinds of terminal, named by the start of their HSN
// (decisions.md, "The point-of-sale gateway"). Any other HSN is offline.
const (
	SimTerminalOK      = "SIM-OK-"      // approves after TerminalDelay: contactless, Visa ending 1111
	SimTerminalChip    = "SIM-CHIP-"    // approves after TerminalDelay by chip: VISA CREDIT, A0000000031010
	SimTerminalDecline = "SIM-DECLINE-" // declines after TerminalDelay: "Insufficient funds"
	SimTerminalSlow    = "SIM-SLOW-"    // never answers (until cancelled or its caller gives up)
	SimTerminalOffline = "SIM-OFFLINE-" // offline
)

// SimTerminals are the simulator's card terminals. It remembers the
// orders it approved or declined, in memory, so that InquireOrder finds
// them as the gateway would (until the process ends); and the sales under
// way, so that CancelTerminal ends them. Safe for concurrent use.
type SimTerminals struct {
	// TerminalDelay is how long a customer takes at a terminal that answers.
	TerminalDelay time.Duration

	mu      sync.Mutex
	orders  map[string]TerminalResult
	waiting map[string]context.CancelCauseFunc // by HSN
}

// NewSimTerminals returns the simulator's terminals, answering after 2 s.
func NewSimTerminals() *SimTerminals {
	return &SimTerminals{TerminalDelay: 2 * time.Second, orders: map[string]TerminalResult{},
		waiting: map[string]context.CancelCauseFunc{}}
}

var _ Terminals = (*SimTerminals)(nil)

func simOnline(hsn string) bool {
	for _, p := range []string{SimTerminalOK, SimTerminalChip, SimTerminalDecline, SimTerminalSlow} {
		if strings.HasPrefix(hsn, p) {
			return true
		}
	}
	return false
}

// Ping: every simulated terminal is connected but SIM-OFFLINE-… (and HSNs
// the simulator does not know).
func (s *SimTerminals) Ping(ctx context.Context, merchantID, hsn string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simulator: ping %s: %w: %w", hsn, ErrUnavailable, err)
	}
	if !simOnline(hsn) {
		return fmt.Errorf("simulator: ping %s: %w", hsn, ErrTerminalOffline)
	}
	return nil
}

// AuthCard answers as the terminal's kind says; one sale at a time per
// terminal (another one meanwhile is ErrTerminalBusy).
func (s *SimTerminals) AuthCard(ctx context.Context, sale TerminalSale) (TerminalResult, error) {
	if !simOnline(sale.HSN) {
		return TerminalResult{}, fmt.Errorf("simulator: authCard order %s: %w", sale.OrderID, ErrTerminalOffline)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.mu.Lock()
	if _, busy := s.waiting[sale.HSN]; busy {
		s.mu.Unlock()
		return TerminalResult{}, fmt.Errorf("simulator: authCard order %s: %w", sale.OrderID, ErrTerminalBusy)
	}
	s.waiting[sale.HSN] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, sale.HSN)
		s.mu.Unlock()
	}()

	wait := s.TerminalDelay
	if strings.HasPrefix(sale.HSN, SimTerminalSlow) {
		wait = time.Duration(1<<63 - 1)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		if context.Cause(ctx) == ErrTerminalCancelled {
			return TerminalResult{}, fmt.Errorf("simulator: authCard order %s: %w", sale.OrderID, ErrTerminalCancelled)
		}
		return TerminalResult{}, fmt.Errorf("simulator: authCard order %s: %w: %w", sale.OrderID, ErrUnavailable, ctx.Err())
	case <-t.C:
	}
	res := TerminalResult{Token: "9411111111111111", CardBrand: "visa", LastFour: "1111", EntryMode: EntryContactless}
	switch {
	case strings.HasPrefix(sale.HSN, SimTerminalDecline):
		res.DeclineReason = "Insufficient funds"
	case strings.HasPrefix(sale.HSN, SimTerminalChip):
		res.EntryMode, res.ApplicationLabel, res.AID = EntryChip, "VISA CREDIT", "A0000000031010"
		fallthrough
	default:
		res.Approved, res.RetRef = true, digits("retref:"+sale.OrderID, 12)
	}
	s.mu.Lock()
	s.orders[sale.MerchantID+"/"+sale.OrderID] = res
	s.mu.Unlock()
	return res, nil
}

// CancelTerminal ends the sale under way on the terminal, if any.
func (s *SimTerminals) CancelTerminal(ctx context.Context, merchantID, hsn string) error {
	s.mu.Lock()
	cancel := s.waiting[hsn]
	s.mu.Unlock()
	if cancel != nil {
		cancel(ErrTerminalCancelled)
	}
	return nil
}

// InquireOrder finds the orders this simulator answered.
func (s *SimTerminals) InquireOrder(ctx context.Context, merchantID, orderID string) (TerminalResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return TerminalResult{}, false, fmt.Errorf("simulator: inquire order %s: %w: %w", orderID, ErrUnavailable, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.orders[merchantID+"/"+orderID]
	return res, ok, nil
}
