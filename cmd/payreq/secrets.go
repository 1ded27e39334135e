package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

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
		return secretsReencrypt(ctx, cfg, args, stdout)
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

// secretsReencrypt re-seals every value under the current key and says so
// only when none is left under an older one; otherwise it fails (exit 1)
// naming what remains, so that no older key is removed while needed.
func secretsReencrypt(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("secrets reencrypt", flag.ContinueOnError)
	lockTimeout := fs.Duration("lock-timeout", 30*time.Second, "how long to wait for rows other transactions hold")
	if err := parseFlags(fs, args, 0, ""); err != nil {
		return err
	}
	if *lockTimeout < 0 {
		return usageError{"secrets reencrypt: --lock-timeout must not be negative"}
	}
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	n, err := a.Reencrypt(ctx, *lockTimeout)
	var remain *app.RemainError
	if errors.As(err, &remain) {
		return fmt.Errorf("secrets reencrypt: %w (--lock-timeout %v); keep every older key in the key file and run it again", err, *lockTimeout)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "re-sealed %d values under key %s\n", n, a.Vault.Current())
	return nil
}
