package directory

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// Biller is who bills, as a customer sees it on a pay page, a receipt or a
// message: the merchant organization, and the location of the invoice's
// MID with its receipt name, address, phone, email and time zone.
type Biller struct {
	// Suspended: the organization is suspended, so its pay links take no
	// payment.
	Suspended    bool
	Organization string
	Location     string
	ReceiptName  string   // "" when the location has none
	Address      []string // "12 Main St", "Suite 4", "Austin, TX 78701"
	Phone        string   // "" when unset
	Email        string   // "" when unset
	TimeZone     string   // IANA name: America/Chicago
	// Branding is the organization's (BrandingOf).
	Branding Branding
}

// Zone is the location's time zone, in which the customer is shown times;
// UTC when its name is unknown.
func (b Biller) Zone() *time.Location { return Zone(b.TimeZone) }

// Name is what the customer knows the business by: the location's receipt
// name, else the business's display name (its branding), else the
// location's name.
func (b Biller) Name() string {
	if strings.TrimSpace(b.ReceiptName) != "" {
		return b.ReceiptName
	}
	if b.Branding.DisplayName != "" {
		return b.Branding.DisplayName
	}
	return b.Location
}

// LegalName is the organization's name when it is not already the Name
// ("" otherwise), shown beside it so that the customer knows who bills.
func (b Biller) LegalName() string {
	if strings.EqualFold(strings.TrimSpace(b.Organization), strings.TrimSpace(b.Name())) {
		return ""
	}
	return b.Organization
}

// Contact is how to reach the business in a sentence: "(512) 555-0100 or
// billing@example.com"; "" when the location has neither.
func (b Biller) Contact() string {
	switch {
	case b.Phone != "" && b.Email != "":
		return b.Phone + " or " + b.Email
	case b.Phone != "":
		return b.Phone
	}
	return b.Email
}

// BillerOf reads who bills for the organization's merchant account, through
// q, with the organization's branding. The location's phone and email
// are the business's support ones where the location has none.
func BillerOf(ctx context.Context, q sqlx.QueryerContext, org, merchantAccountID uuid.UUID) (Biller, error) {
	var r struct {
		brandingRow
		Suspended    bool           `db:"suspended"`
		Location     string         `db:"location"`
		ReceiptName  sql.NullString `db:"receipt_name"`
		AddressLine1 string         `db:"address_line1"`
		AddressLine2 sql.NullString `db:"address_line2"`
		City         string         `db:"city"`
		State        string         `db:"state"`
		PostalCode   string         `db:"postal_code"`
		Phone        sql.NullString `db:"phone"`
		Email        sql.NullString `db:"email"`
		TimeZone     string         `db:"time_zone"`
	}
	err := sqlx.GetContext(ctx, q, &r, `SELECT o.status = 'suspended' AS suspended, l.name AS location, l.receipt_name,
			l.address_line1, l.address_line2, l.city, l.state, l.postal_code, l.phone, l.email, l.time_zone, `+brandingColumns+`
		FROM merchant_accounts ma
		JOIN locations l ON l.id = ma.location_id
		JOIN organizations o ON o.id = ma.organization_id
		LEFT JOIN logos lg ON lg.sha256 = o.logo_sha256
		WHERE ma.id = $1 AND ma.organization_id = $2`, merchantAccountID, org)
	if err != nil {
		return Biller{}, fmt.Errorf("directory: unable to read who bills: %w", err)
	}
	b := Biller{
		Suspended: r.Suspended, Organization: r.Organization, Location: r.Location, ReceiptName: r.ReceiptName.String,
		Phone: r.Phone.String, Email: r.Email.String, TimeZone: r.TimeZone, Branding: r.branding(),
	}
	if b.Phone == "" {
		b.Phone = b.Branding.SupportPhone
	}
	if b.Email == "" {
		b.Email = b.Branding.SupportEmail
	}
	for _, line := range []string{r.AddressLine1, r.AddressLine2.String, strings.TrimSpace(r.City + ", " + r.State + " " + r.PostalCode)} {
		if line = strings.TrimSpace(line); line != "" && line != "," {
			b.Address = append(b.Address, line)
		}
	}
	return b, nil
}

var zones sync.Map // IANA name → *time.Location

// Zone is the time zone of an IANA name, UTC for one that is unknown or
// empty; each is loaded once.
func Zone(name string) *time.Location {
	if z, ok := zones.Load(name); ok {
		return z.(*time.Location)
	}
	z, err := time.LoadLocation(name)
	if err != nil || name == "" {
		z = time.UTC
	}
	zones.Store(name, z)
	return z
}
