package payment

import (
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/jsonnum"
)

// Model is the card payment as the API answers it and its events carry it.
func (p CardPayment) Model() models.CardPayment {
	return models.CardPayment{
		Id: p.ID, Kind: models.CardPaymentKind(p.Kind), Status: models.CardPaymentStatus(p.Status),
		Amount: jsonnum.Decimal{Decimal: p.Amount}, InvoiceId: p.InvoiceID, InvoiceNumber: p.InvoiceNumber,
		MerchantAccountId: p.MerchantAccountID, Mid: p.MID, CardBrand: p.CardBrand, LastFour: p.LastFour,
		PayerName: p.PayerName, RetRef: p.RetRef, DeclineReason: p.DeclineReason, Level3Sent: p.Level3Sent,
		SavedCard: p.SavedCard, RefundOf: p.RefundOf, AmountRefunded: jsonnum.Decimal{Decimal: p.AmountRefunded},
		Reason: p.Reason, DepositId: p.DepositID, CreatedAt: p.CreatedAt, CreatedByName: p.CreatedByName,
		EntryMode: (*models.CardPaymentEntryMode)(p.EntryMode), TerminalId: p.TerminalID,
	}
}

// Model is the deposit as the API answers it, its events carry it and
// payreq settle prints it.
func (d Deposit) Model() models.Deposit {
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
