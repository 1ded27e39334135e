// Package demo seeds a demonstration merchant and reseller, so a new user
// has real data to read right after `make run`.
package demo

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/reseller"
)

// Credentials of one seeded organization's key, and its Owner's portal
// sign-in.
type Credentials struct {
	OrganizationID uuid.UUID `json:"organizationId"`
	KeyID          string    `json:"keyId"`
	Secret         string    `json:"secret"`
	OwnerEmail     string    `json:"ownerEmail"`
	OwnerPassword  string    `json:"ownerPassword"`
}

// Result is what `payreq demo --json` prints.
type Result struct {
	Merchant Credentials `json:"merchant"`
	Reseller Reseller    `json:"reseller"`
}

// Reseller is the seeded reseller's key and Owner, and its sign-up page.
type Reseller struct {
	Credentials
	// Slug names its sign-up page, /apply/{slug}.
	Slug string `json:"slug"`
	// SignUpURL is the page's address under the public URL, which the
	// caller knows (payreq demo sets it).
	SignUpURL string `json:"signUpUrl,omitempty"`
}

// Seed creates a new demo merchant (an Owner, two locations, three MIDs no
// other organization holds), a reseller (with its sign-up page's slug)
// whose portfolio holds it and two more merchants, five applications in different stages, and one
// all-permission key for each of the two organizations. Each call makes
// new organizations and new MIDs.
func Seed(ctx context.Context, db *sqlx.DB, keys *auth.Store, apps *reseller.Store, ppl *people.Store) (Result, error) {
	suffix := fmt.Sprintf("%04d", rand.IntN(10000))
	merchant := uuid.Must(uuid.NewV7())
	partner := uuid.Must(uuid.NewV7())
	var orgIDs []uuid.UUID
	var slug string // the reseller's
	err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		err := directory.InsertProducts(ctx, tx, []directory.Product{
			{Key: "invoicing", Name: "Invoicing"}, {Key: "terminal", Name: "Card terminal"}, {Key: "online", Name: "Online checkout"}})
		if err != nil {
			return err
		}
		orgs := []struct {
			id       uuid.UUID
			name     string
			kind     string
			status   string
			products []string
		}{
			{partner, "Northwind Payments " + suffix, auth.KindReseller, "active", nil},
			{merchant, "Blue Fern Coffee " + suffix, auth.KindMerchant, "active", []string{"invoicing", "terminal"}},
			{uuid.Must(uuid.NewV7()), "Alder Street Books " + suffix, auth.KindMerchant, "onboarding", []string{"online"}},
			{uuid.Must(uuid.NewV7()), "Cedar Hardware " + suffix, auth.KindMerchant, "suspended", []string{"invoicing", "online", "terminal"}},
		}
		for _, o := range orgs {
			orgIDs = append(orgIDs, o.id)
			logo := "https://example.com/logos/" + o.id.String() + ".png"
			made, _, err := directory.InsertOrganization(ctx, tx, directory.NewOrganization{
				ID: o.id, Name: o.name, Kind: o.kind, Status: o.status, LogoURL: &logo})
			if err != nil {
				return err
			}
			if o.id == partner {
				slug = made
			}
			if err := directory.AddProducts(ctx, tx, o.id, o.products); err != nil {
				return err
			}
			if o.kind == auth.KindMerchant {
				if err := directory.AddToPortfolio(ctx, tx, partner, o.id); err != nil {
					return err
				}
			}
		}
		receipt := func(name string) *string { r := "Blue Fern " + name; return &r }
		phone, email := "+15035550100", "hello@bluefern.example.com"
		locations := []struct {
			directory.NewLocation
			mids int
		}{
			{directory.NewLocation{Name: "Downtown", TimeZone: "America/Los_Angeles", AddressLine1: "120 Main St", City: "Portland",
				State: "OR", PostalCode: "97201", ReceiptName: receipt("Downtown"), Phone: &phone, Email: &email}, 2},
			{directory.NewLocation{Name: "Airport Kiosk", TimeZone: "America/Los_Angeles", AddressLine1: "7000 NE Airport Way",
				City: "Portland", State: "OR", PostalCode: "97201", ReceiptName: receipt("Airport Kiosk"), Phone: &phone, Email: &email}, 1},
		}
		made := 0 // MIDs
		for _, n := range locations {
			l, err := directory.InsertLocation(ctx, tx, merchant, n.NewLocation)
			if err != nil {
				return err
			}
			// A MID belongs to one organization: each run draws its own,
			// drawing again when one is held (InsertMID waits for a
			// concurrent run's insert, so two runs never share one). The
			// digit after 4961 is the MID's place, so that by mid they are
			// listed in the order made: Downtown's two, then the kiosk's.
			for added := 0; added < n.mids; {
				_, ok, err := directory.InsertMID(ctx, tx, merchant, l.ID, fmt.Sprintf("4961%d%07d", made, rand.IntN(1e7)))
				if err != nil {
					return err
				}
				if ok {
					added, made = added+1, made+1
				}
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("demo: unable to seed organizations: %w", err)
	}
	// The two other merchants' Owners are invited (no sign-in yet).
	for _, o := range orgIDs[2:] {
		if _, err := ppl.AddMember(ctx, o, "Owner", "owner@"+o.String()+".example.com", "Owner", auth.PermissionsFor(auth.KindMerchant), "demo-"+randomText(16)); err != nil {
			return Result{}, err
		}
	}

	stages := [][]string{{}, {"in_review"}, {"in_review", "needs_info"}, {"in_review", "approved"}, {"in_review", "declined"}}
	for i, path := range stages {
		website := fmt.Sprintf("https://shop%d.example.com", i+1)
		id, err := apps.Submit(ctx, reseller.Submission{Reseller: partner, Application: reseller.NewApplication{
			Business: reseller.Business{
				LegalName: fmt.Sprintf("Applicant %d LLC", i+1), DBAName: fmt.Sprintf("Shop %d", i+1), EntityType: "llc",
				TaxID: fmt.Sprintf("9%08d", 12345670+i), Email: fmt.Sprintf("owner@shop%d.example.com", i+1), Website: &website,
				Address: reseller.Address{Line1: fmt.Sprintf("%d Oak Ave", 100+i), City: "Salem", State: "OR", PostalCode: "97301"},
			},
			Owners: []reseller.Owner{{Name: fmt.Sprintf("Owner %d", i+1), Title: "Managing member",
				OwnershipPercent: "100", SSN: fmt.Sprintf("5%08d", 23456780+i)}},
			Bank: reseller.Bank{RoutingNumber: "123456780", AccountNumber: fmt.Sprintf("00%010d", 9876543210+int64(i))},
		}})
		if err != nil {
			return Result{}, err
		}
		for _, stage := range path {
			if err := apps.SetStage(ctx, id, stage, "Moved to "+stage+" by the demo"); err != nil {
				return Result{}, err
			}
		}
	}

	// Every organization has an Owner holding every permission its kind
	// is offered; the merchant's and the reseller's sign in to the portal
	// with a password made here, and make the demo keys.
	res := Result{}
	for _, o := range []struct {
		id    uuid.UUID
		kind  string
		slug  string
		creds *Credentials
		key   string
	}{
		{partner, auth.KindReseller, "northwind", &res.Reseller.Credentials, "Demo reseller key"},
		{merchant, auth.KindMerchant, "bluefern", &res.Merchant, "Demo merchant key"},
	} {
		email := fmt.Sprintf("owner-%s@%s.example.com", suffix+strings.ToLower(randomText(4)), o.slug)
		password := "demo-" + randomText(16)
		owner, err := ppl.AddMember(ctx, o.id, "Demo Owner", email, "Owner", auth.PermissionsFor(o.kind), password)
		if err != nil {
			return Result{}, err
		}
		k, _, err := keys.CreateKey(ctx, nil, owner, o.key, auth.PermissionsFor(o.kind), nil)
		if err != nil {
			return Result{}, err
		}
		*o.creds = Credentials{OrganizationID: o.id, KeyID: k.KeyID, Secret: k.Secret, OwnerEmail: email, OwnerPassword: password}
	}
	res.Reseller.Slug = slug
	return res, nil
}

// randomText is n letters and digits from crypto/rand: a demo password.
func randomText(n int) string {
	return crand.Text()[:n]
}
