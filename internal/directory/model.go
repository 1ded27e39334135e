package directory

import "github.com/payreq/payreq/gen/models"

// Model is the location as the API answers it (and payreq locations
// create --json prints it).
func (l Location) Model() models.Location {
	return models.Location{
		Id: l.ID, OrganizationId: l.OrganizationID, Name: l.Name, TimeZone: l.TimeZone,
		Status: models.LocationStatus(l.Status), CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt,
		ReceiptName: l.ReceiptName, AddressLine1: l.AddressLine1, AddressLine2: l.AddressLine2,
		City: l.City, State: l.State, PostalCode: l.PostalCode, Phone: l.Phone, Email: l.Email,
	}
}

// Model is the MID as the API answers it (and payreq mids create --json
// prints it).
func (a MerchantAccount) Model() models.MerchantAccount {
	return models.MerchantAccount{Id: a.ID, OrganizationId: a.OrganizationID, LocationId: a.LocationID, Mid: a.MID, CreatedAt: a.CreatedAt}
}
