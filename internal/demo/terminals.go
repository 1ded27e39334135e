package demo

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/terminal"
)

// SeedTerminals registers one of each of the simulator's five kinds of
// terminal on the merchant's first MID (of its first location, Downtown),
// each HSN ending in a number of its own so that demos side by side never
// share one.
func SeedTerminals(ctx context.Context, dir *directory.Store, terminals *terminal.Store, merchant uuid.UUID) ([]terminal.Terminal, error) {
	mids, err := dir.MerchantAccounts(ctx, merchant, nil)
	if err != nil || len(mids) == 0 {
		return nil, fmt.Errorf("demo: the merchant's MIDs: %w", err)
	}
	n := fmt.Sprintf("%06d", rand.IntN(1e6))
	var out []terminal.Terminal
	for _, k := range []struct{ prefix, name string }{
		{processor.SimTerminalOK, "Front counter (approves)"},
		{processor.SimTerminalChip, "Back counter (chip)"},
		{processor.SimTerminalDecline, "Patio (declines)"},
		{processor.SimTerminalSlow, "Drive-through (never answers)"},
		{processor.SimTerminalOffline, "Storeroom (offline)"},
	} {
		t, err := terminals.Add(ctx, terminal.NewTerminal{MerchantAccountID: mids[0].ID, HSN: k.prefix + n, Name: k.name})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
