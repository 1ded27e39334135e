package directory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/mailaddr"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// refuse is an onboarding argument refused (nothing was written), titled
// by what was not done, in words for the operator, who gives each value as
// a flag (field).
func refuse(k rule.Kind, title, field, format string, args ...any) error {
	e := rule.Newf(k, field, title, format, args...)
	if k == rule.Invalid {
		e.Fields = map[string][]string{field: {e.Message}}
	}
	return e
}

// What an onboarding refusal did not do.
const (
	orgNotCreated       = "Organization not created"
	userNotCreated      = "User not created"
	locationNotCreated  = "Location not created"
	locationNotInactive = "Location not deactivated"
	midNotCreated       = "MID not created"
)

// Organization is a merchant or a reseller.
type Organization struct {
	ID     uuid.UUID `db:"id" json:"id"`
	Name   string    `db:"name" json:"name"`
	Kind   string    `db:"kind" json:"kind"`
	Status string    `db:"status" json:"status"`
	// LogoURL is shown beside the name in a reseller's portfolio.
	LogoURL    *string    `db:"logo_url" json:"-"`
	ResellerID *uuid.UUID `db:"-" json:"resellerId"`
	// Slug names a reseller's sign-up page, /apply/{slug}; null for a
	// merchant.
	Slug      *string   `db:"slug" json:"slug"`
	CreatedAt time.Time `db:"created_at" json:"createdAt"`
}

// CreateOrganization makes an active organization of kind, a merchant
// optionally in a reseller's portfolio, a reseller with slug ("": one made
// from its name).
func (d *Store) CreateOrganization(ctx context.Context, kind, name, slug string, reseller *uuid.UUID) (Organization, error) {
	name = strings.TrimSpace(name)
	switch {
	case kind != auth.KindMerchant && kind != auth.KindReseller:
		return Organization{}, refuse(rule.Invalid, orgNotCreated, "--kind", "--kind must be merchant or reseller, got %q", kind)
	case name == "" || len(name) > 200:
		return Organization{}, refuse(rule.Invalid, orgNotCreated, "--name", "--name must be 1 to 200 characters")
	case reseller != nil && kind != auth.KindMerchant:
		return Organization{}, refuse(rule.Invalid, orgNotCreated, "--reseller", "--reseller is for merchants: a reseller has no reseller")
	case slug != "" && kind != auth.KindReseller:
		return Organization{}, refuse(rule.Invalid, orgNotCreated, "--slug", "--slug is for resellers: it names their sign-up page")
	case slug != "" && !ValidSlug(slug):
		return Organization{}, refuse(rule.Invalid, orgNotCreated, "--slug", "--slug must be 3 to 40 of a-z, 0-9 and -, got %q", slug)
	}
	o := Organization{ID: uuid.Must(uuid.NewV7()), Name: name, Kind: kind, Status: "active", ResellerID: reseller}
	err := postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		if reseller != nil {
			var k string
			err := tx.GetContext(ctx, &k, `SELECT kind FROM organizations WHERE id = $1`, *reseller)
			if errors.Is(err, sql.ErrNoRows) {
				return refuse(rule.Unprocessable, orgNotCreated, "--reseller", "--reseller %s: no such organization", *reseller)
			}
			if err != nil {
				return err
			}
			if k != auth.KindReseller {
				return refuse(rule.Unprocessable, orgNotCreated, "--reseller", "--reseller %s is a %s, not a reseller", *reseller, k)
			}
		}
		made, createdAt, err := InsertOrganization(ctx, tx, NewOrganization{ID: o.ID, Name: o.Name, Kind: o.Kind, Status: o.Status, Slug: slug})
		if errors.Is(err, ErrSlugTaken) {
			return refuse(rule.Conflict, orgNotCreated, "--slug", "--slug %s: another organization has this slug", slug)
		}
		if err != nil {
			return err
		}
		o.CreatedAt = createdAt
		if made != "" {
			o.Slug = &made
		}
		if reseller != nil {
			return AddToPortfolio(ctx, tx, *reseller, o.ID)
		}
		return nil
	})
	return o, err
}

// AddToPortfolio puts the merchant in the reseller's portfolio, inside tx.
func AddToPortfolio(ctx context.Context, tx *sqlx.Tx, reseller, merchant uuid.UUID) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO portfolio_merchants (reseller_id, merchant_id) VALUES ($1, $2)`, reseller, merchant)
	if err != nil {
		return fmt.Errorf("directory: unable to add to a portfolio: %w", err)
	}
	return nil
}

// Product is a product an organization may be offered.
type Product struct{ Key, Name string }

// InsertProducts adds the products not yet known, inside tx.
func InsertProducts(ctx context.Context, tx *sqlx.Tx, products []Product) error {
	for _, p := range products {
		_, err := tx.ExecContext(ctx, `INSERT INTO products (key, name) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, p.Key, p.Name)
		if err != nil {
			return fmt.Errorf("directory: unable to add product: %w", err)
		}
	}
	return nil
}

// AddProducts gives the organization the products of keys, inside tx.
func AddProducts(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, keys []string) error {
	for _, k := range keys {
		_, err := tx.ExecContext(ctx, `INSERT INTO organization_products (organization_id, product_key) VALUES ($1, $2)`, org, k)
		if err != nil {
			return fmt.Errorf("directory: unable to give a product: %w", err)
		}
	}
	return nil
}

// orgKind is the kind of organization org, for an operation titled title.
func orgKind(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, title string) (string, error) {
	var kind string
	err := sqlx.GetContext(ctx, q, &kind, `SELECT kind FROM organizations WHERE id = $1`, org)
	if errors.Is(err, sql.ErrNoRows) {
		return "", refuse(rule.Unprocessable, title, "--org", "--org %s: no such organization", org)
	}
	return kind, err
}

// NewLocation is a location as the operator gives it.
type NewLocation struct {
	Name, TimeZone, AddressLine1, City, State, PostalCode string
	AddressLine2, ReceiptName, Phone, Email               *string
}

// CreateLocation adds an active location to a merchant.
func (d *Store) CreateLocation(ctx context.Context, org uuid.UUID, n NewLocation) (Location, error) {
	for flag, v := range map[string]string{"--name": n.Name, "--address-line1": n.AddressLine1, "--city": n.City,
		"--state": n.State, "--postal-code": n.PostalCode} {
		if strings.TrimSpace(v) == "" || len(v) > 200 {
			return Location{}, refuse(rule.Invalid, locationNotCreated, flag, "%s must be 1 to 200 characters", flag)
		}
	}
	if _, err := time.LoadLocation(n.TimeZone); err != nil || n.TimeZone == "" || n.TimeZone == "Local" {
		return Location{}, refuse(rule.Invalid, locationNotCreated, "--time-zone", "--time-zone must be an IANA time zone such as America/Los_Angeles, got %q", n.TimeZone)
	}
	if n.Email != nil && !mailaddr.Valid(*n.Email) {
		return Location{}, refuse(rule.Invalid, locationNotCreated, "--email", "--email must be an email address, got %q", *n.Email)
	}
	var l Location
	err := postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		kind, err := orgKind(ctx, tx, org, locationNotCreated)
		if err != nil {
			return err
		}
		if kind != auth.KindMerchant {
			return refuse(rule.Unprocessable, locationNotCreated, "--org", "--org %s is a %s: only merchants have locations", org, kind)
		}
		l, err = InsertLocation(ctx, tx, org, n)
		return err
	})
	return l, err
}

// InsertLocation adds an active location to the organization inside tx,
// as given (CreateLocation checks it).
func InsertLocation(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, n NewLocation) (Location, error) {
	var l Location
	err := tx.GetContext(ctx, &l, `INSERT INTO locations (id, organization_id, name, time_zone, status, receipt_name,
			address_line1, address_line2, city, state, postal_code, phone, email)
		VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $8, $9, $10, $11, $12) RETURNING `+locationColumns,
		uuid.Must(uuid.NewV7()), org, n.Name, n.TimeZone, n.ReceiptName, n.AddressLine1, n.AddressLine2, n.City,
		n.State, n.PostalCode, n.Phone, n.Email)
	return l, err
}

// DeactivateLocation stops a location taking invoices; its MIDs stay.
func (d *Store) DeactivateLocation(ctx context.Context, id uuid.UUID) (Location, error) {
	var l Location
	err := d.DB.GetContext(ctx, &l, `UPDATE locations SET status = 'inactive', updated_at = now() WHERE id = $1
		RETURNING `+locationColumns, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Location{}, refuse(rule.NotFound, locationNotInactive, "", "location %s: no such location", id)
	}
	return l, err
}

var midPattern = regexp.MustCompile(`^[0-9]{6,16}$`)

// CreateMID adds a merchant account to a location of the merchant. A MID
// belongs to one organization: one that any organization holds is refused.
func (d *Store) CreateMID(ctx context.Context, org, location uuid.UUID, mid string) (MerchantAccount, error) {
	if !midPattern.MatchString(mid) {
		return MerchantAccount{}, refuse(rule.Invalid, midNotCreated, "--mid", "--mid must be 6 to 16 digits, got %q", mid)
	}
	var m MerchantAccount
	err := postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		var owner uuid.UUID
		err := tx.GetContext(ctx, &owner, `SELECT organization_id FROM locations WHERE id = $1`, location)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && owner != org) {
			return refuse(rule.Unprocessable, midNotCreated, "--location", "--location %s: no such location in organization %s", location, org)
		}
		if err != nil {
			return err
		}
		// The holder read below is the one that won (InsertMID).
		var made bool
		if m, made, err = InsertMID(ctx, tx, org, location, mid); err != nil || made {
			return err
		}
		var holder uuid.UUID
		if err := tx.GetContext(ctx, &holder, `SELECT organization_id FROM merchant_accounts WHERE mid = $1`, mid); err != nil {
			return err
		}
		if holder == org {
			return refuse(rule.Conflict, midNotCreated, "--mid", "--mid %s: the organization has this MID already", mid)
		}
		return refuse(rule.Unprocessable, midNotCreated, "--mid", "--mid %s: another organization (%s) holds this MID; a MID belongs to one organization", mid, holder)
	})
	return m, err
}

// InsertMID adds the merchant account mid to the organization's location
// inside tx, unless an organization holds it already (made false). ON
// CONFLICT waits for a concurrent insert of the same MID, so a MID is
// never made twice.
func InsertMID(ctx context.Context, tx *sqlx.Tx, org, location uuid.UUID, mid string) (m MerchantAccount, made bool, err error) {
	err = tx.GetContext(ctx, &m, `INSERT INTO merchant_accounts (id, organization_id, location_id, mid) VALUES ($1, $2, $3, $4)
		ON CONFLICT (mid) DO NOTHING RETURNING id, organization_id, location_id, mid, created_at`, uuid.Must(uuid.NewV7()), org, location, mid)
	if errors.Is(err, sql.ErrNoRows) {
		return MerchantAccount{}, false, nil
	}
	return m, err == nil, err
}
