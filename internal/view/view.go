// Package view is the wire form of payreq's resources, as the API answers
// them and as events carry them: one rendering for both.
package view

import (
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/reseller"
)

// Invoice is the wire form of an invoice; full adds lineItems,
// payments and savedCards (single reads), which list items omit.
func Invoice(inv invoice.Invoice, link string, full bool) models.Invoice {
	out := models.Invoice{
		Id: inv.ID, MerchantAccountId: inv.MerchantAccountID, Mid: inv.MID, LocationName: inv.LocationName,
		InvoiceNumber: inv.InvoiceNumber, PoNumber: inv.PONumber,
		Amount:         jsonnum.Decimal{Decimal: inv.Amount},
		AmountPaid:     jsonnum.Decimal{Decimal: inv.AmountPaid},
		Balance:        jsonnum.Decimal{Decimal: inv.Balance()},
		AmountRefunded: jsonnum.Decimal{Decimal: inv.AmountRefunded},
		CustomerName:   inv.CustomerName, CustomerCompany: inv.CustomerCompany, CustomerEmail: &inv.CustomerEmail,
		CustomerPhone: inv.CustomerPhone, Delivery: models.Delivery(inv.Delivery),
		SentVia: (*models.Delivery)(inv.SentVia), SentAt: inv.SentAt, SendProblem: inv.SendProblem, Memo: inv.Memo,
		Lines: int32(inv.LineCount), Status: models.InvoiceStatus(inv.Status), FailedAttempts: int32(inv.FailedAttempts),
		Problem: inv.Problem, PaidAt: inv.PaidAt, Level3Sent: inv.Level3Sent, CreatedAt: inv.CreatedAt,
		CreatedByName: inv.CreatedByName, CancelledAt: inv.CancelledAt, CancelledByName: inv.CancelledByName,
		Link: &link, CustomerPrefers: (*models.Delivery)(inv.CustomerPrefers),
	}
	if inv.DueDate != nil {
		d := time.Date(inv.DueDate.Year(), inv.DueDate.Month(), inv.DueDate.Day(), 0, 0, 0, 0, time.UTC)
		out.DueDate = &d
	}
	if !full {
		return out
	}
	lines := make([]models.InvoiceLine, len(inv.Lines))
	for i, l := range inv.Lines {
		lines[i] = models.InvoiceLine{Description: l.Description, Quantity: jsonnum.Decimal{Decimal: invoice.Plain(l.Quantity)},
			UnitCost: jsonnum.Decimal{Decimal: invoice.Plain(l.UnitCost)}, Uom: l.UOM, CommodityCode: l.CommodityCode, Upc: l.UPC}
	}
	payments := make([]models.Payment, len(inv.Payments))
	for i, p := range inv.Payments {
		payments[i] = models.Payment{Id: p.ID, Amount: jsonnum.Decimal{Decimal: p.Amount}, RetRef: p.RetRef, LastFour: p.LastFour,
			PayerName: p.PayerName, PaidAt: p.PaidAt, Level3Sent: p.Level3Sent, SavedCard: p.SavedCard,
			AmountRefunded: jsonnum.Decimal{Decimal: p.AmountRefunded}}
	}
	cards := make([]models.SavedCard, len(inv.SavedCards))
	for i, c := range inv.SavedCards {
		cards[i] = SavedCard(c)
	}
	out.LineItems, out.Payments, out.SavedCards = &lines, &payments, &cards
	return out
}

// SavedCard is the wire form of a saved card.
func SavedCard(c invoice.SavedCard) models.SavedCard {
	return models.SavedCard{Id: c.ID, CardBrand: c.CardBrand, LastFour: c.LastFour, Expiry: c.Expiry,
		SavedAt: c.SavedAt, SavedByName: c.SavedByName}
}

// CardPayment is the wire form of a card payment.
func CardPayment(p payment.CardPayment) models.CardPayment {
	return models.CardPayment{
		Id: p.ID, Kind: models.CardPaymentKind(p.Kind), Status: models.CardPaymentStatus(p.Status),
		Amount: jsonnum.Decimal{Decimal: p.Amount}, InvoiceId: p.InvoiceID, InvoiceNumber: p.InvoiceNumber,
		MerchantAccountId: p.MerchantAccountID, Mid: p.MID, CardBrand: p.CardBrand, LastFour: p.LastFour,
		PayerName: p.PayerName, RetRef: p.RetRef, DeclineReason: p.DeclineReason, Level3Sent: p.Level3Sent,
		SavedCard: p.SavedCard, RefundOf: p.RefundOf, AmountRefunded: jsonnum.Decimal{Decimal: p.AmountRefunded},
		Reason: p.Reason, DepositId: p.DepositID, CreatedAt: p.CreatedAt, CreatedByName: p.CreatedByName,
	}
}

// Deposit is the wire form of a deposit (also what `payreq settle`
// prints).
func Deposit(d payment.Deposit) models.Deposit {
	return models.Deposit{
		Id: d.ID, MerchantAccountId: d.MerchantAccountID, Mid: d.MID,
		BatchDate: openapi_types.Date{Time: d.BatchDate}, ExpectedAt: openapi_types.Date{Time: d.ExpectedAt},
		Status: models.DepositStatus(d.Status), PaidAt: d.PaidAt,
		SalesCount: int32(d.SalesCount), SalesAmount: jsonnum.Decimal{Decimal: d.SalesAmount},
		RefundsCount: int32(d.RefundsCount), RefundsAmount: jsonnum.Decimal{Decimal: d.RefundsAmount},
		FeesAmount: jsonnum.Decimal{Decimal: d.FeesAmount}, NetAmount: jsonnum.Decimal{Decimal: d.NetAmount},
		CreatedAt: d.CreatedAt,
	}
}

// Application is the wire form of an application: last four digits of
// its tax id, SSNs and account number only.
func Application(a reseller.Application) models.Application {
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

// Location is the wire form of a location.
func Location(l directory.Location) models.Location {
	return models.Location{
		Id: l.ID, OrganizationId: l.OrganizationID, Name: l.Name, TimeZone: l.TimeZone,
		Status: models.LocationStatus(l.Status), CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt,
		ReceiptName: l.ReceiptName, AddressLine1: l.AddressLine1, AddressLine2: l.AddressLine2,
		City: l.City, State: l.State, PostalCode: l.PostalCode, Phone: l.Phone, Email: l.Email,
	}
}

// MerchantAccount is the wire form of a MID.
func MerchantAccount(a directory.MerchantAccount) models.MerchantAccount {
	return models.MerchantAccount{Id: a.ID, OrganizationId: a.OrganizationID, LocationId: a.LocationID, Mid: a.MID, CreatedAt: a.CreatedAt}
}
