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
		exec := func(q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		}
		if err := exec(`INSERT INTO products (key, name) VALUES
			('invoicing', 'Invoicing'), ('terminal', 'Card terminal'), ('online', 'Online checkout')
			ON CONFLICT (key) DO NOTHING`); err != nil {
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
			for _, p := range o.products {
				if err := exec(`INSERT INTO organization_products (organization_id, product_key) VALUES ($1, $2)`, o.id, p); err != nil {
					return err
				}
			}
			if o.kind == auth.KindMerchant {
				if err := exec(`INSERT INTO portfolio_merchants (reseller_id, merchant_id) VALUES ($1, $2)`, partner, o.id); err != nil {
					return err
				}
			}
		}
		locations := []struct {
			id                          uuid.UUID
			name, street, city, zone, s string
			mids                        int
		}{
			{uuid.Must(uuid.NewV7()), "Downtown", "120 Main St", "Portland", "America/Los_Angeles", "active", 2},
			{uuid.Must(uuid.NewV7()), "Airport Kiosk", "7000 NE Airport Way", "Portland", "America/Los_Angeles", "active", 1},
		}
		made := 0 // MIDs
		for _, l := range locations {
			if err := exec(`INSERT INTO locations (id, organization_id, name, time_zone, status, receipt_name,
				address_line1, city, state, postal_code, phone, email)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'OR', '97201', '+15035550100', 'hello@bluefern.example.com')`,
				l.id, merchant, l.name, l.zone, l.s, "Blue Fern "+l.name, l.street, l.city); err != nil {
				return err
			}
			// A MID belongs to one organization: each run draws its own,
			// drawing again when one is held (ON CONFLICT waits for a
			// concurrent run's insert, so two runs never share one). The
			// digit after 4961 is the MID's place, so that by mid they are
			// listed in the order made: Downtown's two, then the kiosk's.
			for added := 0; added < l.mids; {
				mid := fmt.Sprintf("4961%d%07d", made, rand.IntN(1e7))
				res, err := tx.ExecContext(ctx, `INSERT INTO merchant_accounts (id, organization_id, location_id, mid) VALUES ($1, $2, $3, $4)
					ON CONFLICT (mid) DO NOTHING`, uuid.Must(uuid.NewV7()), merchant, l.id, mid)
				if err != nil {
					return err
				}
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				added, made = added+int(n), made+int(n)
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
