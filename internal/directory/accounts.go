package directory

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Account is a MID as the records made on it show it (an invoice, a card
// payment, a deposit): the MID, and its location's name, time zone and
// status.
type Account struct {
	ID             uuid.UUID `db:"id"`
	OrganizationID uuid.UUID `db:"organization_id"`
	LocationID     uuid.UUID `db:"location_id"`
	MID            string    `db:"mid"`
	Location       string    `db:"location"`
	TimeZone       string    `db:"time_zone"`
	LocationStatus string    `db:"location_status"`
}

const selectAccounts = `
	SELECT ma.id, ma.organization_id, ma.location_id, ma.mid, l.name AS location, l.time_zone, l.status AS location_status
	FROM merchant_accounts ma JOIN locations l ON l.id = ma.location_id`

// AccountsByID reads the merchant accounts with these ids through q, in
// one statement (a page of records reads its MIDs at once), by id.
func AccountsByID(ctx context.Context, q sqlx.QueryerContext, ids []uuid.UUID) (map[uuid.UUID]Account, error) {
	var list []Account
	if len(ids) > 0 {
		if err := sqlx.SelectContext(ctx, q, &list, selectAccounts+` WHERE ma.id = ANY($1::uuid[])`, pq.Array(ids)); err != nil {
			return nil, fmt.Errorf("directory: unable to read merchant accounts: %w", err)
		}
	}
	by := make(map[uuid.UUID]Account, len(list))
	for _, a := range list {
		by[a.ID] = a
	}
	return by, nil
}

// AccountsOf reads the organization's merchant accounts through q, by
// MID; every organization's when org is nil (the loops that serve them
// all).
func AccountsOf(ctx context.Context, q sqlx.QueryerContext, org *uuid.UUID) ([]Account, error) {
	var list []Account
	if err := sqlx.SelectContext(ctx, q, &list, selectAccounts+` WHERE $1::uuid IS NULL OR ma.organization_id = $1 ORDER BY ma.mid`, org); err != nil {
		return nil, fmt.Errorf("directory: unable to read merchant accounts: %w", err)
	}
	return list, nil
}

// Zones are accounts' ids and their locations' time zones as two arrays
// in the same order, for a statement that reckons in each one's zone
// (JOIN unnest($n::uuid[], $m::text[]) AS z(merchant_account_id, time_zone)).
func Zones(accounts []Account) (ids, zones any) {
	id, zone := make([]string, len(accounts)), make([]string, len(accounts))
	for i, a := range accounts {
		id[i], zone[i] = a.ID.String(), a.TimeZone
	}
	return pq.Array(id), pq.Array(zone)
}

// OrganizationExists says whether an organization with this id exists.
func OrganizationExists(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID) (bool, error) {
	var exists bool
	if err := sqlx.GetContext(ctx, q, &exists, `SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $1)`, org); err != nil {
		return false, fmt.Errorf("directory: unable to read organization: %w", err)
	}
	return exists, nil
}
