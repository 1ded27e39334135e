// Command payreq is the payreq service and its operator tools.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	// Locations' time zones, for the times customers are shown, even on a
	// host without a zoneinfo database.
	_ "time/tzdata"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/demo"
	"github.com/payreq/payreq/internal/devdb"
	"github.com/payreq/payreq/internal/directory"
)

const usage = `usage: payreq COMMAND
  serve                                  serve the API (configuration from PAYREQ_* and DATABASE_URL)
  migrate                                apply database migrations
  demo [--json]                          seed a demo merchant and reseller, print their keys
  keys create --org ORG --name NAME --permissions p1,p2 [--json]
  keys list --org ORG
  keys revoke KEY_ID
  orgs create --kind merchant|reseller --name NAME [--reseller ORG] [--json]
  orgs suspend ORG | orgs reinstate ORG
  users create --org ORG --name NAME --email EMAIL --role Owner|Admin|Member [--permissions p1,p2] [--json]
  users remove --org ORG --email EMAIL
  locations create --org ORG --name NAME --time-zone TZ --address-line1 A --city C --state S --postal-code P
                   [--address-line2 A] [--receipt-name N] [--phone P] [--email E] [--json]
  locations deactivate [--json] LOC
  mids create --org ORG --location LOC --mid MID [--json]
  terminals add --mid MID_ID --hsn HSN --name NAME [--json]
  terminals list [--org ORG] [--json] | terminals remove TERMINAL
  applications add --org RESELLER --file application.json
  applications stage ID STAGE [--note TEXT]
  secrets init --dir DIR                 write a new signing key, pepper and encryption key (never over a file)
  secrets database --dir DIR             write the passwords of the highly available PostgreSQL cluster, deploy/ha (never over a file)
  secrets reencrypt [--lock-timeout 30s] re-seal stored tax ids, SSNs, account numbers, webhook secrets, TOTP secrets and notices under the current key
  settle --org ORG                       close the organization's open batches now, print the deposits made
  db-stop                                stop the private PostgreSQL cluster under PAYREQ_DATA_DIR`

// usageError is a bad flag or argument: one line on stderr, exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	var ue usageError
	var se *app.SecretError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "payreq: "+ue.msg)
		os.Exit(2)
	case errors.As(err, &se):
		fmt.Fprintln(os.Stderr, "payreq: "+oneLine(se.Error()))
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "payreq: "+oneLine(err.Error()))
		os.Exit(1)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"a command is required (serve, migrate, demo, keys, orgs, users, locations, mids, terminals, applications, settle, secrets); run payreq help"}
	}
	if text, ok := helpFor(args); ok {
		fmt.Fprintln(stdout, text)
		return nil
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return usageError{err.Error()}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve", "migrate", "db-stop":
		if len(rest) > 0 {
			return usageError{fmt.Sprintf("%s takes no arguments, got %q", cmd, rest[0])}
		}
	}
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	case "serve":
		return serve(ctx, cfg)
	case "migrate":
		a, err := openApp(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	case "db-stop":
		return devdb.Stop(cfg.DataDir)
	case "demo":
		return demoCmd(ctx, cfg, rest, stdout)
	case "keys":
		return keysCmd(ctx, cfg, rest, stdout)
	case "orgs":
		return orgsCmd(ctx, cfg, rest, stdout)
	case "applications":
		return applicationsCmd(ctx, cfg, rest, stdout)
	case "settle":
		return settleCmd(ctx, cfg, rest, stdout)
	case "users":
		switch {
		case len(rest) > 0 && rest[0] == "create":
			return usersCreate(ctx, cfg, rest[1:], stdout)
		case len(rest) > 0 && rest[0] == "remove":
			return usersRemove(ctx, cfg, rest[1:], stdout)
		}
		return usageError{"users: a subcommand is required (create, remove)"}
	case "locations":
		return locationsCmd(ctx, cfg, rest, stdout)
	case "mids":
		if len(rest) == 0 || rest[0] != "create" {
			return usageError{"mids: the subcommand is create"}
		}
		return midsCreate(ctx, cfg, rest[1:], stdout)
	case "secrets":
		return secretsCmd(ctx, cfg, rest, stdout)
	case "terminals":
		return terminalsCmd(ctx, cfg, rest, stdout)
	}
	return usageError{fmt.Sprintf("unknown command %q; run payreq help", cmd)}
}

// parseFlags parses a subcommand's flags, turning every failure into a
// usage error, and requires exactly nArgs positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, nArgs int, argName string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usageError{fs.Name() + ": " + err.Error()}
	}
	if fs.NArg() != nArgs {
		if nArgs == 0 {
			return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
		}
		return usageError{fmt.Sprintf("%s: exactly one %s is required", fs.Name(), argName)}
	}
	return nil
}

// commaList is a comma-separated flag's items, trimmed, empty ones left out.
func commaList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseOrgFlags is parseFlags for a subcommand without positional
// arguments, then its --org (org): the organization it acts on.
func parseOrgFlags(fs *flag.FlagSet, args []string, org *string) (uuid.UUID, error) {
	if err := parseFlags(fs, args, 0, ""); err != nil {
		return uuid.Nil, err
	}
	return parseOrg("--org", *org)
}

// openWithFlags is parseFlags, then openApp: a usage error opens nothing.
// The caller closes the app.
func openWithFlags(ctx context.Context, cfg config.Config, fs *flag.FlagSet, args []string, nArgs int, argName string) (*app.App, error) {
	if err := parseFlags(fs, args, nArgs, argName); err != nil {
		return nil, err
	}
	return openApp(ctx, cfg)
}

// openForOrg is parseOrgFlags, then openApp: a usage error opens nothing.
// The caller closes the app.
func openForOrg(ctx context.Context, cfg config.Config, fs *flag.FlagSet, args []string, org *string) (*app.App, uuid.UUID, error) {
	orgID, err := parseOrgFlags(fs, args, org)
	if err != nil {
		return nil, uuid.Nil, err
	}
	a, err := openApp(ctx, cfg)
	return a, orgID, err
}

func parseOrg(flagName, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usageError{fmt.Sprintf("%s must be an organization id (uuid), got %q", flagName, s)}
	}
	return id, nil
}

func demoCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	bare := fs.Bool("bare", false, "leave out the merchant's 60 days of customers, invoices and payments")
	if err := parseFlags(fs, args, 0, ""); err != nil {
		return err
	}
	cfg, opts, err := database(ctx, cfg)
	if err != nil {
		return err
	}
	// The merchant's past is made on a clock moved back to each moment of it.
	clock := &demo.RealClock{}
	opts.Now = clock.Now
	a, err := app.Open(ctx, cfg, opts)
	if err != nil {
		return err
	}
	defer a.Close()
	res, err := demo.Seed(ctx, a.DB, a.Auth, a.Resellers, a.People)
	if err != nil {
		return err
	}
	if _, err := demo.SeedTerminals(ctx, a.Directory, a.Terminals, res.Merchant.OrganizationID); err != nil {
		return err
	}
	if !*bare {
		if err := demo.SeedActivity(ctx, a, clock, res.Merchant.OrganizationID); err != nil {
			return err
		}
	}
	res.Reseller.SignUpURL = signUpURL(cfg, res.Reseller.Slug)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "merchant organization %s\n  key id %s\n  secret %s\nreseller organization %s\n  key id %s\n  secret %s\n  sign-up page %s\n",
		res.Merchant.OrganizationID, res.Merchant.KeyID, res.Merchant.Secret,
		res.Reseller.OrganizationID, res.Reseller.KeyID, res.Reseller.Secret, res.Reseller.SignUpURL)
	return nil
}

func keysCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"keys: a subcommand is required (create, list, revoke)"}
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	switch sub {
	case "create":
		org := fs.String("org", "", "organization id")
		name := fs.String("name", "", "key name")
		perms := fs.String("permissions", "", "comma-separated permissions")
		asJSON := fs.Bool("json", false, "print JSON")
		orgID, err := parseOrgFlags(fs, args, org)
		if err != nil {
			return err
		}
		if strings.TrimSpace(*name) == "" {
			return usageError{"keys create: --name is required"}
		}
		permissions := commaList(*perms)
		a, err := openApp(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		owner, err := a.People.Owner(ctx, orgID)
		if err != nil {
			return onboardErr("keys create", err)
		}
		k, _, err := a.Auth.CreateKey(ctx, nil, owner.ID, *name, permissions, nil)
		if err != nil {
			return onboardErr("keys create", err)
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(k)
		}
		fmt.Fprintf(stdout, "key id %s\nsecret %s (shown once: store it now)\npermissions %s\n", k.KeyID, k.Secret, strings.Join(k.Permissions, ","))
		return nil
	case "list":
		org := fs.String("org", "", "organization id")
		a, orgID, err := openForOrg(ctx, cfg, fs, args, org)
		if err != nil {
			return err
		}
		defer a.Close()
		keys, err := a.Auth.Keys(ctx, orgID)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "KEY ID\tNAME\tPERMISSIONS\tSTATE")
		for _, k := range keys {
			revoked := "active"
			if k.RevokedAt != nil {
				revoked = "revoked " + k.RevokedAt.UTC().Format("2006-01-02T15:04:05Z")
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\n", k.ID, k.Name, strings.Join(k.Permissions, ","), revoked)
		}
		return nil
	case "revoke":
		a, err := openWithFlags(ctx, cfg, fs, args, 1, "KEY_ID")
		if err != nil {
			return err
		}
		defer a.Close()
		k, err := a.Auth.Key(ctx, fs.Arg(0))
		if err == nil {
			_, err = a.Auth.RevokeKey(ctx, nil, k.OrganizationID, k.ID)
		}
		if err != nil {
			return onboardErr("keys revoke", err)
		}
		fmt.Fprintf(stdout, "key %s revoked\n", fs.Arg(0))
		return nil
	}
	return usageError{fmt.Sprintf("keys: unknown subcommand %q (create, list, revoke)", sub)}
}

func orgsCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"orgs: a subcommand is required (create, suspend, reinstate)"}
	}
	sub, args := args[0], args[1:]
	if sub == "create" {
		return orgsCreate(ctx, cfg, args, stdout)
	}
	status := map[string]string{"suspend": "suspended", "reinstate": "active"}[sub]
	if status == "" {
		return usageError{fmt.Sprintf("orgs: unknown subcommand %q (create, suspend, reinstate)", sub)}
	}
	fs := flag.NewFlagSet("orgs "+sub, flag.ContinueOnError)
	if err := parseFlags(fs, args, 1, "ORG"); err != nil {
		return err
	}
	orgID, err := parseOrg("ORG", fs.Arg(0))
	if err != nil {
		return err
	}
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Directory.SetOrganizationStatus(ctx, orgID, status); errors.Is(err, directory.ErrNoOrganization) {
		return usageError{fmt.Sprintf("orgs %s: organization %s not found", sub, orgID)}
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "organization %s %s\n", orgID, status)
	return nil
}

// openApp opens the service's database and secrets (see database).
func openApp(ctx context.Context, cfg config.Config) (*app.App, error) {
	cfg, opts, err := database(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return app.Open(ctx, cfg, opts)
}

// database is cfg with the database to open: the one at DATABASE_URL or,
// when it is unset, the private development cluster under the data
// directory, started here if need be. Only that cluster makes its own
// secrets; with DATABASE_URL every instance must be given the same files.
func database(ctx context.Context, cfg config.Config) (config.Config, app.Options, error) {
	if cfg.DatabaseURL != "" {
		return cfg, app.Options{}, nil
	}
	dsn, err := devdb.Ensure(ctx, cfg.DataDir)
	if err != nil {
		return cfg, app.Options{}, err
	}
	cfg.DatabaseURL = dsn
	return cfg, app.Options{GenerateSecrets: true}, nil
}
