package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/rule"
)

// maxApplicationFile bounds what applications add reads.
const maxApplicationFile = 1 << 20

// applicationsCmd lets an operator drive merchant applications through
// onboarding: add one submitted through a reseller, move one to a stage.
func applicationsCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"applications: a subcommand is required (add, stage)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "add":
		return applicationsAdd(ctx, cfg, args, stdout)
	case "stage":
		return applicationsStage(ctx, cfg, args, stdout)
	}
	return usageError{fmt.Sprintf("applications: unknown subcommand %q (add, stage)", sub)}
}

func applicationsAdd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("applications add", flag.ContinueOnError)
	org := fs.String("org", "", "reseller organization id")
	file := fs.String("file", "", "application JSON document")
	orgID, err := parseOrgFlags(fs, args, org)
	if err != nil {
		return err
	}
	if *file == "" {
		return usageError{"applications add: --file is required (the application as JSON)"}
	}
	data, err := readApplicationFile(*file)
	if err != nil {
		return err
	}
	// Every message names fields, never their values, so no full number
	// reaches the terminal.
	application, err := reseller.ParseApplication(data)
	if e := rule.As(err); e != nil {
		return usageError{"applications add: " + *file + ": " + refusalText(e)}
	}
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	id, err := a.Resellers.Submit(ctx, reseller.Submission{Reseller: orgID, Application: application})
	if errors.Is(err, reseller.ErrNotReseller) {
		return usageError{fmt.Sprintf("applications add: --org %s is not a reseller organization", orgID)}
	}
	if e := rule.As(err); e != nil {
		return usageError{"applications add: " + *file + ": " + refusalText(e)}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "application %s submitted through reseller %s\n", id, orgID)
	return nil
}

// refusalText is a refusal in one line: each field's messages after its
// name ("owners.0.ssn must be 9 digits, …"), in the order of the names,
// else its message.
func refusalText(e *rule.Error) string {
	if len(e.Fields) == 0 {
		return e.Message
	}
	var problems []string
	for _, field := range slices.Sorted(maps.Keys(e.Fields)) {
		for _, msg := range e.Fields[field] {
			problems = append(problems, field+" "+msg)
		}
	}
	return strings.Join(problems, "; ")
}

func readApplicationFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError{"applications add: --file: " + err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxApplicationFile+1))
	if err != nil {
		return nil, usageError{"applications add: --file: " + err.Error()}
	}
	if len(data) > maxApplicationFile {
		return nil, usageError{fmt.Sprintf("applications add: %s is over %d bytes", path, maxApplicationFile)}
	}
	return data, nil
}

func applicationsStage(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("applications stage", flag.ContinueOnError)
	note := fs.String("note", "", "note for the history")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		return usageError{"applications stage: exactly an application ID and a STAGE are required"}
	}
	id, err := uuid.Parse(positional[0])
	if err != nil {
		return usageError{fmt.Sprintf("applications stage: ID must be an application id (uuid), got %q", positional[0])}
	}
	stage := positional[1]
	if !reseller.ValidStage(stage) {
		return usageError{fmt.Sprintf("applications stage: unknown stage %q (%s)", stage, strings.Join(reseller.Stages, ", "))}
	}
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	err = a.Resellers.SetStage(ctx, id, stage, strings.TrimSpace(*note))
	switch {
	case errors.Is(err, reseller.ErrNotFound):
		return usageError{fmt.Sprintf("applications stage: no application %s", id)}
	case errors.Is(err, reseller.ErrStageChange):
		return usageError{"applications stage: " + strings.TrimPrefix(err.Error(), "reseller: ")}
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "application %s moved to %s\n", id, stage)
	return nil
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments (ID STAGE --note TEXT), and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{fs.Name() + ": " + err.Error()}
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
