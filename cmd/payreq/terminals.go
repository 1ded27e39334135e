package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/terminal"
)

// terminalsCmd registers, lists and removes card terminals:
// payreq terminals add|list|remove.
func terminalsCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"terminals: a subcommand is required (add, list, remove)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "add":
		fs := flag.NewFlagSet("terminals add", flag.ContinueOnError)
		mid := fs.String("mid", "", "the MID's id (uuid) whose sales the terminal makes")
		hsn := fs.String("hsn", "", "the terminal's hardware serial number")
		name := fs.String("name", "", "what the merchant calls it")
		asJSON := fs.Bool("json", false, "print the terminal as JSON")
		if err := parseFlags(fs, args, 0, ""); err != nil {
			return err
		}
		midID, err := uuid.Parse(*mid)
		if err != nil {
			return usageError{fmt.Sprintf("terminals add: --mid must be a MID's id (uuid), got %q", *mid)}
		}
		a, err := openApp(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		t, err := a.Terminals.Add(ctx, terminal.NewTerminal{MerchantAccountID: midID, HSN: *hsn, Name: *name})
		if err != nil {
			return onboardErr("terminals add", err)
		}
		return onboardResult(stdout, *asJSON, t.Model(), fmt.Sprintf("terminal %s %s (%s) on MID %s", t.ID, t.Name, t.HSN, t.MID))
	case "list":
		fs := flag.NewFlagSet("terminals list", flag.ContinueOnError)
		org := fs.String("org", "", "only this organization's terminals")
		asJSON := fs.Bool("json", false, "print the terminals as a JSON array")
		if err := parseFlags(fs, args, 0, ""); err != nil {
			return err
		}
		var orgID *uuid.UUID
		if *org != "" {
			id, err := parseOrg("--org", *org)
			if err != nil {
				return err
			}
			orgID = &id
		}
		a, err := openApp(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		ts, err := a.Terminals.List(ctx, orgID)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]models.Terminal, len(ts))
			for i, t := range ts {
				out[i] = t.Model()
			}
			return json.NewEncoder(stdout).Encode(out)
		}
		for _, t := range ts {
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.HSN, t.Status, t.MID, t.Name)
		}
		return nil
	case "remove":
		fs := flag.NewFlagSet("terminals remove", flag.ContinueOnError)
		if err := parseFlags(fs, args, 1, "TERMINAL"); err != nil {
			return err
		}
		id, err := uuid.Parse(fs.Arg(0))
		if err != nil {
			return usageError{fmt.Sprintf("terminals remove: TERMINAL must be a terminal id (uuid), got %q", fs.Arg(0))}
		}
		a, err := openApp(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		t, err := a.Terminals.Remove(ctx, id)
		if err != nil {
			return onboardErr("terminals remove", err)
		}
		fmt.Fprintf(stdout, "terminal %s (%s) removed\n", t.ID, t.HSN)
		return nil
	}
	return usageError{fmt.Sprintf("terminals: unknown subcommand %q (add, list, remove)", sub)}
}
