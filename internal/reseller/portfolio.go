package reseller

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/directory"
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
// each with its products ordered by key (directory's portfolio).
func (p *Store) Merchants(ctx context.Context, resellerID uuid.UUID) ([]Merchant, error) {
	portfolio, err := directory.Portfolio(ctx, p.DB, resellerID)
	if err != nil {
		return nil, fmt.Errorf("reseller: unable to list portfolio: %w", err)
	}
	merchants := make([]Merchant, 0, len(portfolio))
	for _, pm := range portfolio {
		m := Merchant{ID: pm.ID, Name: pm.Name, Status: pm.Status, LogoURL: pm.LogoURL, Products: make([]Product, 0, len(pm.Products))}
		for _, pr := range pm.Products {
			m.Products = append(m.Products, Product{Key: pr.Key, Name: pr.Name})
		}
		merchants = append(merchants, m)
	}
	return merchants, nil
}
