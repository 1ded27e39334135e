// Package directory holds organizations and their locations and merchant
// accounts (MIDs), and what customers see of a business (branding.go).
//
// It owns the tables organizations, locations, merchant_accounts,
// products, organization_products, portfolio_merchants and logos. (People and
// their memberships are internal/people's.)
package directory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/rule"
)

// ErrNotFound: no location with this id in the organization.
var ErrNotFound = rule.New(rule.NotFound, "", "Location not found", "No location with this id exists in your organization.")

// ErrNoOrganization: no organization with this id.
var ErrNoOrganization = rule.New(rule.NotFound, "", "Organization not found", "No organization with this id exists.")

// Location is a merchant's store.
type Location struct {
	ID             uuid.UUID `db:"id"`
	OrganizationID uuid.UUID `db:"organization_id"`
	Name           string    `db:"name"`
	TimeZone       string    `db:"time_zone"`
	Status         string    `db:"status"`
	ReceiptName    *string   `db:"receipt_name"`
	AddressLine1   string    `db:"address_line1"`
	AddressLine2   *string   `db:"address_line2"`
	City           string    `db:"city"`
	State          string    `db:"state"`
	PostalCode     string    `db:"postal_code"`
	Phone          *string   `db:"phone"`
	Email          *string   `db:"email"`
	CreatedAt      time.Time `db:"created_at"`
	UpdatedAt      time.Time `db:"updated_at"`
}

// Zone is the location's time zone, in which its merchant reads times.
func (l Location) Zone() *time.Location { return Zone(l.TimeZone) }

// MerchantAccount is a MID at the card processor, belonging to a location.
type MerchantAccount struct {
	ID             uuid.UUID `db:"id"`
	OrganizationID uuid.UUID `db:"organization_id"`
	LocationID     uuid.UUID `db:"location_id"`
	MID            string    `db:"mid"`
	CreatedAt      time.Time `db:"created_at"`
}

// Store keeps organizations, locations and MIDs; its reads are always
// within one organization.
type Store struct {
	DB *sqlx.DB
}

const locationColumns = `id, organization_id, name, time_zone, status, receipt_name, address_line1,
	address_line2, city, state, postal_code, phone, email, created_at, updated_at`

// Locations lists the organization's locations ordered by name.
func (d *Store) Locations(ctx context.Context, org uuid.UUID) ([]Location, error) {
	locs := []Location{}
	err := d.DB.SelectContext(ctx, &locs, `SELECT `+locationColumns+` FROM locations
		WHERE organization_id = $1 ORDER BY name, id`, org)
	if err != nil {
		return nil, fmt.Errorf("directory: unable to list locations: %w", err)
	}
	return locs, nil
}

// Location reads one of the organization's locations.
func (d *Store) Location(ctx context.Context, org, id uuid.UUID) (Location, error) {
	var loc Location
	err := d.DB.GetContext(ctx, &loc, `SELECT `+locationColumns+` FROM locations
		WHERE organization_id = $1 AND id = $2`, org, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Location{}, ErrNotFound
	}
	if err != nil {
		return Location{}, fmt.Errorf("directory: unable to read location: %w", err)
	}
	return loc, nil
}

// MerchantAccounts lists the organization's MIDs ordered by mid, narrowed to
// one location when location is not nil.
func (d *Store) MerchantAccounts(ctx context.Context, org uuid.UUID, location *uuid.UUID) ([]MerchantAccount, error) {
	accounts := []MerchantAccount{}
	err := d.DB.SelectContext(ctx, &accounts, `
		SELECT id, organization_id, location_id, mid, created_at FROM merchant_accounts
		WHERE organization_id = $1 AND ($2::uuid IS NULL OR location_id = $2)
		ORDER BY mid, id`, org, location)
	if err != nil {
		return nil, fmt.Errorf("directory: unable to list merchant accounts: %w", err)
	}
	return accounts, nil
}

// SetOrganizationStatus suspends or reinstates an organization.
func (d *Store) SetOrganizationStatus(ctx context.Context, org uuid.UUID, status string) error {
	res, err := d.DB.ExecContext(ctx, `UPDATE organizations SET status = $2 WHERE id = $1`, org, status)
	if err != nil {
		return fmt.Errorf("directory: unable to set organization status: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNoOrganization
	}
	return nil
}

// Place is a location as the fronts name it beside its MIDs.
type Place struct {
	ID       uuid.UUID
	Name     string
	TimeZone string
	Status   string
}

// Zone is the place's time zone.
func (p Place) Zone() *time.Location { return Zone(p.TimeZone) }

// Places are, in one statement, what Locations and MerchantAccounts (with
// no location) read that a page naming MIDs needs: the organization's
// locations (their name, time zone and status, in no particular order)
// and its MIDs (by mid and id, as MerchantAccounts orders them).
func (d *Store) Places(ctx context.Context, org uuid.UUID) ([]Place, []MerchantAccount, error) {
	rows, err := d.DB.QueryContext(ctx, `
		SELECT l.id, l.name, l.time_zone, l.status, m.id, m.location_id, m.mid, m.created_at
		FROM (SELECT id, name, time_zone, status FROM locations WHERE organization_id = $1) l
		FULL JOIN (SELECT id, location_id, mid, created_at FROM merchant_accounts WHERE organization_id = $1) m
			ON m.location_id = l.id
		ORDER BY m.mid, m.id, l.id`, org)
	if err != nil {
		return nil, nil, fmt.Errorf("directory: unable to list locations and merchant accounts: %w", err)
	}
	defer rows.Close()
	places, accounts := []Place{}, []MerchantAccount{}
	seen := map[uuid.UUID]bool{}
	for rows.Next() {
		var (
			lid, mid, mloc uuid.NullUUID
			name, zone     sql.NullString
			status, code   sql.NullString
			created        sql.NullTime
		)
		if err := rows.Scan(&lid, &name, &zone, &status, &mid, &mloc, &code, &created); err != nil {
			return nil, nil, fmt.Errorf("directory: unable to list locations and merchant accounts: %w", err)
		}
		if lid.Valid && !seen[lid.UUID] {
			seen[lid.UUID] = true
			places = append(places, Place{ID: lid.UUID, Name: name.String, TimeZone: zone.String, Status: status.String})
		}
		if mid.Valid {
			accounts = append(accounts, MerchantAccount{ID: mid.UUID, OrganizationID: org, LocationID: mloc.UUID,
				MID: code.String, CreatedAt: created.Time})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("directory: unable to list locations and merchant accounts: %w", err)
	}
	return places, accounts, nil
}
