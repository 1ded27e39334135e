package reseller

import "github.com/payreq/payreq/gen/models"

// Model is the application as the API answers it and its event carries it:
// the last four digits of its tax id, SSNs and account number only.
func (a Application) Model() models.Application {
	b := a.Business
	owners := make([]models.ApplicationOwner, len(a.Owners))
	for i, o := range a.Owners {
		owners[i] = models.ApplicationOwner{Name: o.Name, Title: o.Title, OwnershipPercent: o.OwnershipPercent, SsnLastFour: o.SSNLastFour}
	}
	history := make([]models.ApplicationHistoryEntry, len(a.History))
	for i, h := range a.History {
		history[i] = models.ApplicationHistoryEntry{Stage: models.ApplicationStage(h.Stage), At: h.At, Note: h.Note}
	}
	return models.Application{
		Id: a.ID, Stage: models.ApplicationStage(a.Stage), SubmittedAt: a.SubmittedAt, UpdatedAt: a.UpdatedAt,
		Business: models.ApplicationBusiness{
			LegalName: b.LegalName, DbaName: b.DBAName, EntityType: b.EntityType, TaxIdLastFour: b.TaxIDLastFour,
			Phone: b.Phone, Email: b.Email, Website: b.Website,
			Address: models.Address{AddressLine1: b.Address.Line1, AddressLine2: b.Address.Line2, City: b.Address.City,
				State: b.Address.State, PostalCode: b.Address.PostalCode},
		},
		Owners:  owners,
		Bank:    models.ApplicationBank{RoutingNumber: a.Bank.RoutingNumber, AccountLastFour: a.Bank.AccountLastFour},
		History: history,
	}
}
