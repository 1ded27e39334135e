package reseller

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// Merchant is a merchant in a reseller's portfolio.
type Merchant struct {
	ID       uuid.UUID
	Name     string
	Status   string
	LogoURL  *string
	Products []Product
}

// Product is a product a merchant has switched on.
type Product struct {
	Key  string
	Name string
}

// Merchants lists the merchants in the reseller's portfolio ordered by name,
// each with its products ordered by key, in one query.
func (p *Store) Merchants(ctx context.Context, resellerID uuid.UUID) ([]Merchant, error) {
	var rows []struct {
		ID          uuid.UUID `db:"id"`
		Name        string    `db:"name"`
		Status      string    `db:"status"`
		LogoURL     *string   `db:"logo_url"`
		ProductKey  *string   `db:"product_key"`
		ProductName *string   `db:"product_name"`
	}
	err := p.DB.SelectContext(ctx, &rows, `
		SELECT o.id, o.name, o.status, o.logo_url, pr.key AS product_key, pr.name AS product_name
		FROM portfolio_merchants pm
		JOIN organizations o ON o.id = pm.merchant_id
		LEFT JOIN organization_products op ON op.organization_id = o.id
		LEFT JOIN products pr ON pr.key = op.product_key
		WHERE pm.reseller_id = $1
		ORDER BY o.name, o.id, pr.key`, resellerID)
	if err != nil {
		return nil, fmt.Errorf("reseller: unable to list portfolio: %w", err)
	}
	merchants := []Merchant{}
	for _, r := range rows {
		if n := len(merchants); n == 0 || merchants[n-1].ID != r.ID {
			merchants = append(merchants, Merchant{ID: r.ID, Name: r.Name, Status: r.Status, LogoURL: r.LogoURL, Products: []Product{}})
		}
		if r.ProductKey != nil && r.ProductName != nil {
			m := &merchants[len(merchants)-1]
			m.Products = append(m.Products, Product{Key: *r.ProductKey, Name: *r.ProductName})
		}
	}
	return merchants, nil
}
