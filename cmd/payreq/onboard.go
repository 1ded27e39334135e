package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/rule"
)

// onboardResult prints what an onboarding command made: as JSON with
// --json, else one line.
func onboardResult(stdout io.Writer, asJSON bool, v any, line string) error {
	if asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	_, err := fmt.Fprintln(stdout, line)
	return err
}

// onboardErr turns a refused argument into a usage error (exit 2).
func onboardErr(cmd string, err error) error {
	if r := rule.As(err); r != nil {
		msg := r.Message
		if len(r.Fields) > 0 {
			msg = r.Error()
		}
		return usageError{cmd + ": " + oneLine(msg)}
	}
	return err
}

// signUpURL is the address of a reseller's sign-up page.
func signUpURL(cfg config.Config, slug string) string { return reseller.SignUpURL(cfg.PublicURL, slug) }

// orgsCreate makes an organization: payreq orgs create --kind K --name N [--slug S] [--reseller ORG] [--json].
func orgsCreate(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("orgs create", flag.ContinueOnError)
	kind := fs.String("kind", "", "merchant or reseller")
	name := fs.String("name", "", "the organization's name")
	resellerFlag := fs.String("reseller", "", "a reseller whose portfolio the merchant joins")
	slug := fs.String("slug", "", "a reseller's sign-up page name (default: made from --name)")
	asJSON := fs.Bool("json", false, "print the organization as JSON")
	if err := parseFlags(fs, args, 0, ""); err != nil {
		return err
	}
	var reseller *uuid.UUID
	if *resellerFlag != "" {
		id, err := parseOrg("--reseller", *resellerFlag)
		if err != nil {
			return err
		}
		reseller = &id
	}
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	o, err := a.Directory.CreateOrganization(ctx, *kind, *name, *slug, reseller)
	if err != nil {
		return onboardErr("orgs create", err)
	}
	out := struct {
		directory.Organization
		SignUpURL string `json:"signUpUrl,omitempty"`
	}{Organization: o}
	line := fmt.Sprintf("organization %s (%s) %s", o.ID, o.Kind, o.Name)
	if o.Slug != nil {
		out.SignUpURL = signUpURL(cfg, *o.Slug)
		line += "\nsign-up page " + out.SignUpURL
	}
	return onboardResult(stdout, *asJSON, out, line)
}

// usersCreate invites a member: payreq users create --org ORG --name N --email E --role R [--permissions p1,p2] [--json].
func usersCreate(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("users create", flag.ContinueOnError)
	org := fs.String("org", "", "organization id")
	name := fs.String("name", "", "the person's name")
	email := fs.String("email", "", "the person's email address")
	role := fs.String("role", "", "Owner, Admin or Member")
	perms := fs.String("permissions", "", "comma-separated; default: every permission offered to the organization")
	asJSON := fs.Bool("json", false, "print the membership and its invitation URL as JSON")
	orgID, err := parseOrgFlags(fs, args, org)
	if err != nil {
		return err
	}
	if strings.TrimSpace(*name) == "" {
		return usageError{"users create: --name is required"}
	}
	var permissions []string // nil: every permission offered
	if *perms != "" {
		if permissions = commaList(*perms); len(permissions) == 0 {
			return usageError{"users create: --permissions names no permission"}
		}
	}
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	inv, err := a.People.Invite(ctx, people.Actor{Address: "command line"}, orgID,
		people.NewMember{Name: *name, Email: *email, Role: *role, Permissions: permissions})
	if err != nil {
		return onboardErr("users create", err)
	}
	return onboardResult(stdout, *asJSON, inv, fmt.Sprintf("member %s (%s) %s invited: %s", inv.MembershipID, inv.Role, inv.Email, inv.InvitationURL))
}

// usersRemove ends a membership: payreq users remove --org ORG --email EMAIL.
func usersRemove(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("users remove", flag.ContinueOnError)
	org := fs.String("org", "", "organization id")
	email := fs.String("email", "", "the member's email address")
	orgID, err := parseOrgFlags(fs, args, org)
	if err != nil {
		return err
	}
	if strings.TrimSpace(*email) == "" {
		return usageError{"users remove: --email is required"}
	}
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.People.RemoveByEmail(ctx, people.Actor{Address: "command line"}, orgID, *email); err != nil {
		return onboardErr("users remove", err)
	}
	_, err = fmt.Fprintf(stdout, "%s removed from %s; the API keys they made keep working\n", *email, orgID)
	return err
}

// locationsCmd: payreq locations create … | payreq locations deactivate LOC.
func locationsCmd(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"locations: a subcommand is required (create, deactivate)"}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "create":
		fs := flag.NewFlagSet("locations create", flag.ContinueOnError)
		org := fs.String("org", "", "merchant organization id")
		var n directory.NewLocation
		fs.StringVar(&n.Name, "name", "", "the location's name")
		fs.StringVar(&n.TimeZone, "time-zone", "", "IANA time zone, such as America/Los_Angeles")
		fs.StringVar(&n.AddressLine1, "address-line1", "", "street address")
		line2 := fs.String("address-line2", "", "more of the address")
		fs.StringVar(&n.City, "city", "", "city")
		fs.StringVar(&n.State, "state", "", "state")
		fs.StringVar(&n.PostalCode, "postal-code", "", "postal code")
		receipt := fs.String("receipt-name", "", "the name on receipts")
		phone := fs.String("phone", "", "phone number")
		email := fs.String("email", "", "email address")
		asJSON := fs.Bool("json", false, "print the location as JSON")
		orgID, err := parseOrgFlags(fs, args, org)
		if err != nil {
			return err
		}
		n.AddressLine2, n.ReceiptName, n.Phone, n.Email = optional.String(*line2), optional.String(*receipt), optional.String(*phone), optional.String(*email)
		a, err := openApp(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		l, err := a.Directory.CreateLocation(ctx, orgID, n)
		if err != nil {
			return onboardErr("locations create", err)
		}
		return onboardResult(stdout, *asJSON, l.Model(), fmt.Sprintf("location %s %s (%s)", l.ID, l.Name, l.TimeZone))
	case "deactivate":
		fs := flag.NewFlagSet("locations deactivate", flag.ContinueOnError)
		asJSON := fs.Bool("json", false, "print the location as JSON")
		if err := parseFlags(fs, args, 1, "LOC"); err != nil {
			return err
		}
		id, err := uuid.Parse(fs.Arg(0))
		if err != nil {
			return usageError{fmt.Sprintf("locations deactivate: LOC must be a location id (uuid), got %q", fs.Arg(0))}
		}
		a, err := openApp(ctx, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		l, err := a.Directory.DeactivateLocation(ctx, id)
		if err != nil {
			return onboardErr("locations deactivate", err)
		}
		return onboardResult(stdout, *asJSON, l.Model(), fmt.Sprintf("location %s inactive", l.ID))
	}
	return usageError{fmt.Sprintf("locations: unknown subcommand %q (create, deactivate)", sub)}
}

// midsCreate adds a MID: payreq mids create --org ORG --location LOC --mid MID [--json].
func midsCreate(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mids create", flag.ContinueOnError)
	org := fs.String("org", "", "merchant organization id")
	loc := fs.String("location", "", "the location's id")
	mid := fs.String("mid", "", "the merchant id at the card processor")
	asJSON := fs.Bool("json", false, "print the MID as JSON")
	orgID, err := parseOrgFlags(fs, args, org)
	if err != nil {
		return err
	}
	locID, err := uuid.Parse(*loc)
	if err != nil {
		return usageError{fmt.Sprintf("mids create: --location must be a location id (uuid), got %q", *loc)}
	}
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	m, err := a.Directory.CreateMID(ctx, orgID, locID, *mid)
	if err != nil {
		return onboardErr("mids create", err)
	}
	return onboardResult(stdout, *asJSON, m.Model(), fmt.Sprintf("MID %s (%s)", m.MID, m.ID))
}
