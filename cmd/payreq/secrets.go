package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
)

// secretsCmd manages the server's secret files and what they seal.
func secretsCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"secrets: a subcommand is required (init, reencrypt)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "init":
		return secretsInit(args, stdout)
	case "reencrypt":
		if err := noArgs("secrets reencrypt", args); err != nil {
			return err
		}
		a, err := openApp(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		apps, err := a.Applications.Reencrypt(ctx)
		if err != nil {
			return err
		}
		hooks, err := a.Webhooks.Reencrypt(ctx, a.Vault.Current())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "re-sealed %d values under key %s\n", apps+hooks, a.Vault.Current())
		return nil
	}
	return usageError{fmt.Sprintf("secrets: unknown subcommand %q (init, reencrypt)", sub)}
}

// secretsInit writes a new signing key, pepper and encryption key into
// --dir, never over an existing file, and prints their paths.
func secretsInit(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("secrets init", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write the secret files into")
	if err := parseFlags(fs, args, 0, ""); err != nil {
		return err
	}
	if *dir == "" {
		return usageError{"secrets init: --dir is required"}
	}
	paths, err := app.InitSecrets(*dir)
	var se *app.SecretError
	if errors.As(err, &se) {
		return usageError{"secrets init: " + se.Error()}
	}
	if err != nil {
		return err
	}
	for _, p := range paths {
		fmt.Fprintln(stdout, p)
	}
	return nil
}
