package invoice

import (
	"time"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/jsonnum"
)

// Model is the invoice as the API answers it and its events carry it, with
// its pay link (none for a draft); full adds lineItems, payments and savedCards (single
// reads and events), which list items omit.
func (inv Invoice) Model(link string, full bool) models.Invoice {
	// What the answer points to, in one allocation (a pointer to
	// inv.CustomerEmail had put a copy of the whole invoice on the heap).
	texts := &struct{ link, email string }{link, inv.CustomerEmail}
	out := models.Invoice{
		Id: inv.ID, MerchantAccountId: inv.MerchantAccountID, Mid: inv.MID, LocationName: inv.LocationName,
		InvoiceNumber: inv.InvoiceNumber, PoNumber: inv.PONumber,
		Amount:         jsonnum.Decimal{Decimal: inv.Amount},
		AmountPaid:     jsonnum.Decimal{Decimal: inv.AmountPaid},
		Balance:        jsonnum.Decimal{Decimal: inv.Balance()},
		AmountRefunded: jsonnum.Decimal{Decimal: inv.AmountRefunded},
		Subtotal:       jsonnum.Decimal{Decimal: inv.Subtotal()},
		TaxAmount:      jsonnum.Decimal{Decimal: cents(inv.TaxAmount)},
		CustomerId:     inv.CustomerID, CustomerName: inv.CustomerName, CustomerCompany: inv.CustomerCompany, CustomerEmail: &texts.email,
		CustomerPhone: inv.CustomerPhone, Delivery: models.Delivery(inv.Delivery),
		SentVia: (*models.Delivery)(inv.SentVia), SentAt: inv.SentAt, SendProblem: inv.SendProblem, Memo: inv.Memo,
		Lines: int32(inv.LineCount), Status: models.InvoiceStatus(inv.Status), FailedAttempts: int32(inv.FailedAttempts),
		Problem: inv.Problem, PaidAt: inv.PaidAt, Level3Sent: inv.Level3Sent, CreatedAt: inv.CreatedAt,
		CreatedByName: inv.CreatedByName, CancelledAt: inv.CancelledAt, CancelledByName: inv.CancelledByName,
		Link: &texts.link, CustomerPrefers: (*models.Delivery)(inv.CustomerPrefers),
		ScheduledSendAt: inv.ScheduledSendAt, Reminders: inv.Reminders, RemindersSent: int32(inv.RemindersSent),
		LastRemindedAt: inv.LastRemindedAt, Version: int32(inv.Version),
	}
	if inv.Status == InDraft {
		out.Link = nil // no pay link until it is finalized
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
		lines[i] = models.InvoiceLine{Description: l.Description, Quantity: jsonnum.Decimal{Decimal: Plain(l.Quantity)},
			UnitCost: jsonnum.Decimal{Decimal: Plain(l.UnitCost)}, Uom: l.UOM, CommodityCode: l.CommodityCode, Upc: l.UPC,
			Amount: jsonnum.Decimal{Decimal: LineTotal(l)}, TaxAmount: jsonnum.Decimal{Decimal: LineTax(l)}}
		if l.TaxRate != nil {
			lines[i].TaxRate = &jsonnum.Decimal{Decimal: Plain(*l.TaxRate)}
		}
	}
	payments := make([]models.Payment, len(inv.Payments))
	for i, p := range inv.Payments {
		payments[i] = p.Model()
	}
	cards := make([]models.SavedCard, len(inv.SavedCards))
	for i, c := range inv.SavedCards {
		cards[i] = c.Model()
	}
	out.LineItems, out.Payments, out.SavedCards = &lines, &payments, &cards
	return out
}

// Model is the payment as the invoice's payments show it.
func (p Payment) Model() models.Payment {
	return models.Payment{Id: p.ID, Amount: jsonnum.Decimal{Decimal: p.Amount}, Method: models.PaymentMethod(p.Method),
		Reference: p.Reference, RetRef: p.RetRef, LastFour: p.LastFour, PayerName: p.PayerName, PaidAt: p.PaidAt,
		Level3Sent: p.Level3Sent, SavedCard: p.SavedCard, AmountRefunded: jsonnum.Decimal{Decimal: p.AmountRefunded}}
}

// Model is the saved card as the API answers it and its event carries it.
func (c SavedCard) Model() models.SavedCard {
	return models.SavedCard{Id: c.ID, CardBrand: c.CardBrand, LastFour: c.LastFour, Expiry: c.Expiry,
		SavedAt: c.SavedAt, SavedByName: c.SavedByName, ChargeConsentAt: c.ChargeConsentAt}
}
