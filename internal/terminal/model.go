package terminal

import (
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/jsonnum"
)

// Model is the terminal as the API answers it.
func (t Terminal) Model() models.Terminal {
	return models.Terminal{
		Id: t.ID, MerchantAccountId: t.MerchantAccountID, LocationId: t.LocationID, Name: t.Name, Hsn: t.HSN,
		Status: models.TerminalStatus(t.Status), LastSeenAt: t.LastSeenAt,
	}
}

// Model is the terminal payment as the API answers it and its events carry it.
func (p Payment) Model() models.TerminalPayment {
	return models.TerminalPayment{
		Id: p.ID, TerminalId: p.TerminalID, InvoiceId: p.InvoiceID, Amount: jsonnum.Decimal{Decimal: p.Amount.Decimal},
		Status: models.TerminalPaymentStatus(p.Status), CardPaymentId: p.CardPaymentID, DeclineReason: p.DeclineReason,
		EntryMode: (*models.TerminalPaymentEntryMode)(p.EntryMode), CardBrand: p.CardBrand, LastFour: p.LastFour,
		ApplicationLabel: p.ApplicationLabel, Aid: p.AID, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
}
