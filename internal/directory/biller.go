package directory

import (
	"database/sql"
	"strings"
	"sync"
	"time"
)

// Biller is who bills, as a customer sees it on a pay page, a receipt or a
// message: the merchant organization, and the location of the invoice's
// MID with its receipt name, address, phone, email and time zone.
type Biller struct {
	Organization string
	Location     string
	ReceiptName  string   // "" when the location has none
	Address      []string // "12 Main St", "Suite 4", "Austin, TX 78701"
	Phone        string   // "" when unset
	Email        string   // "" when unset
	TimeZone     string   // IANA name: America/Chicago
}

// Zone is the location's time zone, in which the customer is shown times;
// UTC when its name is unknown.
func (b Biller) Zone() *time.Location { return Zone(b.TimeZone) }

// Name is what the customer knows the business by: the location's receipt
// name, else its name.
func (b Biller) Name() string {
	if strings.TrimSpace(b.ReceiptName) != "" {
		return b.ReceiptName
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

// BillerColumns select, from organizations o and the location l, what
// BillerRow scans.
const BillerColumns = `o.name, l.name, l.receipt_name, l.address_line1, l.address_line2, l.city, l.state,
	l.postal_code, l.phone, l.email, l.time_zone`

// BillerRow receives BillerColumns.
type BillerRow [11]sql.NullString

// Dest is the row's scan destinations, in BillerColumns' order.
func (r *BillerRow) Dest() []any {
	dest := make([]any, len(r))
	for i := range r {
		dest[i] = &r[i]
	}
	return dest
}

// Biller is the row as a Biller.
func (r *BillerRow) Biller() Biller {
	b := Biller{
		Organization: r[0].String, Location: r[1].String, ReceiptName: r[2].String,
		Phone: r[8].String, Email: r[9].String, TimeZone: r[10].String,
	}
	for _, line := range []string{r[3].String, r[4].String, strings.TrimSpace(r[5].String + ", " + r[6].String + " " + r[7].String)} {
		if line = strings.TrimSpace(line); line != "" && line != "," {
			b.Address = append(b.Address, line)
		}
	}
	return b
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
