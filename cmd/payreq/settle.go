package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/payment"
)

// settleCmd closes every open batch of an organization now and prints the
// deposits made, one JSON object per line, as GET /deposits/{id} shows them.
func settleCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("settle", flag.ContinueOnError)
	org := fs.String("org", "", "merchant organization id")
	a, orgID, err := openForOrg(ctx, cfg, fs, args, org)
	if err != nil {
		return err
	}
	defer a.Close()
	made, err := a.Payments.SettleOrganization(ctx, orgID, cfg.Logger(os.Stderr))
	if errors.Is(err, payment.ErrUnknownOrganization) {
		return usageError{fmt.Sprintf("settle: --org %s: no such organization", orgID)}
	}
	enc := json.NewEncoder(stdout)
	for _, d := range made {
		if err := enc.Encode(d.Model()); err != nil {
			return err
		}
	}
	return err
}
