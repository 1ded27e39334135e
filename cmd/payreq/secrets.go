package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/secretfile"
)

// secretsCmd manages the server's secret files and what they seal.
func secretsCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"secrets: a subcommand is required (init, database, reencrypt)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "init":
		return secretsInit(args, stdout)
	case "database":
		return secretsDatabase(args, stdout)
	case "reencrypt":
		return secretsReencrypt(ctx, cfg, args, stdout)
	}
	return usageError{fmt.Sprintf("secrets: unknown subcommand %q (init, database, reencrypt)", sub)}
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

// databaseSecrets are the passwords of the highly available PostgreSQL
// cluster (deploy/ha): its superuser, its standbys' replication role,
// Patroni's REST API and payreq's own role.
var databaseSecrets = []string{"postgres-superuser-password", "postgres-replication-password",
	"patroni-restapi-password", "postgres-payreq-password"}

// secretsDatabase writes the cluster's passwords into --dir, as secretsInit
// does its keys: never over an existing file, each 256 random bits as
// base32 text (no character a connection string or a pgpass file escapes).
func secretsDatabase(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("secrets database", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write the password files into")
	if err := parseFlags(fs, args, 0, ""); err != nil {
		return err
	}
	if *dir == "" {
		return usageError{"secrets database: --dir is required"}
	}
	paths := make([]string, len(databaseSecrets))
	for i, name := range databaseSecrets {
		paths[i] = filepath.Join(*dir, name)
		if _, err := os.Stat(paths[i]); err == nil {
			return usageError{"secrets database: " + paths[i] + " exists already; payreq secrets never overwrites a secret"}
		}
	}
	for _, p := range paths {
		if err := secretfile.Create(p, []byte(rand.Text()+rand.Text()+"\n")); err != nil {
			return err
		}
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
