package directory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/postgres"
)

// The reads below take q so that a caller runs them inside its own
// transaction where it needs one snapshot.

const organizationColumns = `id, name, kind, status, logo_url, slug, created_at`

// OrganizationByID reads the organization id; ErrNoOrganization when there
// is none.
func OrganizationByID(ctx context.Context, q sqlx.QueryerContext, id uuid.UUID) (Organization, error) {
	var o Organization
	err := sqlx.GetContext(ctx, q, &o, `SELECT `+organizationColumns+` FROM organizations WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Organization{}, ErrNoOrganization
	}
	if err != nil {
		return Organization{}, fmt.Errorf("directory: unable to read organization: %w", err)
	}
	return o, nil
}

// OrganizationBySlug reads the organization whose sign-up page slug names;
// ErrNoOrganization when there is none.
func OrganizationBySlug(ctx context.Context, q sqlx.QueryerContext, slug string) (Organization, error) {
	var o Organization
	err := sqlx.GetContext(ctx, q, &o, `SELECT `+organizationColumns+` FROM organizations WHERE slug = $1`, slug)
	if errors.Is(err, sql.ErrNoRows) {
		return Organization{}, ErrNoOrganization
	}
	if err != nil {
		return Organization{}, fmt.Errorf("directory: unable to read organization: %w", err)
	}
	return o, nil
}

// OrganizationsByID reads the organizations of ids, by id; an id no
// organization has is absent from the map.
func OrganizationsByID(ctx context.Context, q sqlx.QueryerContext, ids []uuid.UUID) (map[uuid.UUID]Organization, error) {
	byID := make(map[uuid.UUID]Organization, len(ids))
	if len(ids) == 0 {
		return byID, nil
	}
	var os []Organization
	err := sqlx.SelectContext(ctx, q, &os, `SELECT `+organizationColumns+` FROM organizations WHERE id = ANY($1)`,
		pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("directory: unable to read organizations: %w", err)
	}
	for _, o := range os {
		byID[o.ID] = o
	}
	return byID, nil
}

// Lock is how LockOrganization takes an organization's row.
type Lock string

const (
	// NoKeyUpdate orders the transactions that lock the organization one
	// after the other.
	NoKeyUpdate Lock = "FOR NO KEY UPDATE"
	// Update also holds off, and waits for, every write that references
	// the organization (its events among them) until the transaction ends.
	Update Lock = "FOR UPDATE"
)

// LockOrganization takes the organization's row for tx until it ends.
func LockOrganization(ctx context.Context, tx *sqlx.Tx, id uuid.UUID, lock Lock) error {
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM organizations WHERE id = $1 `+string(lock), id); err != nil {
		return fmt.Errorf("directory: unable to lock organization: %w", err)
	}
	return nil
}

// PortfolioMerchant is a merchant in a reseller's portfolio, with the
// products it has switched on.
type PortfolioMerchant struct {
	Organization
	Products []Product
}

// Portfolio lists the merchants in the reseller's portfolio ordered by
// name, each with its products ordered by key, in one query.
func Portfolio(ctx context.Context, q sqlx.QueryerContext, reseller uuid.UUID) ([]PortfolioMerchant, error) {
	var rows []struct {
		Organization
		ProductKey  *string `db:"product_key"`
		ProductName *string `db:"product_name"`
	}
	err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT o.id, o.name, o.kind, o.status, o.logo_url, o.slug, o.created_at,
			pr.key AS product_key, pr.name AS product_name
		FROM portfolio_merchants pm
		JOIN organizations o ON o.id = pm.merchant_id
		LEFT JOIN organization_products op ON op.organization_id = o.id
		LEFT JOIN products pr ON pr.key = op.product_key
		WHERE pm.reseller_id = $1
		ORDER BY o.name, o.id, pr.key`, reseller)
	if err != nil {
		return nil, fmt.Errorf("directory: unable to list portfolio: %w", err)
	}
	merchants := []PortfolioMerchant{}
	for _, r := range rows {
		if n := len(merchants); n == 0 || merchants[n-1].ID != r.ID {
			merchants = append(merchants, PortfolioMerchant{Organization: r.Organization, Products: []Product{}})
		}
		if r.ProductKey != nil && r.ProductName != nil {
			m := &merchants[len(merchants)-1]
			m.Products = append(m.Products, Product{Key: *r.ProductKey, Name: *r.ProductName})
		}
	}
	return merchants, nil
}

// OrganizationStatus is the organization's status (auth.Organizations).
func (d *Store) OrganizationStatus(ctx context.Context, org uuid.UUID) (string, error) {
	o, err := OrganizationByID(ctx, d.DB, org)
	return o.Status, err
}

// Receipts reports whether the organization's customers get a receipt by
// email after each approved card payment and refund (on unless turned
// off), read in q, the transaction that records the payment.
func Receipts(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID) (bool, error) {
	var on bool
	err := sqlx.GetContext(ctx, q, &on, `SELECT receipts FROM organizations WHERE id = $1`, org)
	if errors.Is(err, sql.ErrNoRows) {
		return false, ErrNoOrganization
	}
	if err != nil {
		return false, fmt.Errorf("directory: unable to read the receipts setting: %w", err)
	}
	return on, nil
}

// Receipts reports whether the organization's customers get receipts
// (the package function, on the store's database).
func (d *Store) Receipts(ctx context.Context, org uuid.UUID) (bool, error) {
	return Receipts(ctx, d.DB, org)
}

// SetReceipts turns the organization's receipts on or off, with its audit
// entry when a person does it (actor not nil).
func (d *Store) SetReceipts(ctx context.Context, actor *audit.Actor, org uuid.UUID, on bool, at time.Time) error {
	return postgres.InTx(ctx, d.DB, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE organizations SET receipts = $2 WHERE id = $1`, org, on)
		if err != nil {
			return fmt.Errorf("directory: unable to set the receipts setting: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, ErrNoOrganization)
		}
		if actor == nil {
			return nil
		}
		detail := "receipts to customers turned off"
		if on {
			detail = "receipts to customers turned on"
		}
		return audit.Append(ctx, tx, audit.Entry{Organization: &org, Actor: *actor, Action: audit.ReceiptsChanged, Detail: detail, At: at})
	})
}
