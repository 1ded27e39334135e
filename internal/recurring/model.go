package recurring

import (
	"time"

	"github.com/cockroachdb/apd/v3"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/optional"
)

func date(t time.Time) openapi_types.Date { return openapi_types.Date{Time: t} }

// Model is the series as the API shows it.
func (sr Series) Model() models.RecurringInvoice {
	var amount apd.Decimal
	_, _ = decimals.Quantize(&amount, &sr.Amount, -2)
	m := models.RecurringInvoice{
		Id: sr.ID, Status: models.RecurringInvoiceStatus(sr.Status), MerchantAccountId: sr.MerchantAccountID,
		CustomerId: sr.CustomerID, InvoiceNumberPrefix: sr.Prefix, Amount: jsonnum.Decimal{Decimal: amount}, Memo: sr.Memo,
		PoNumber: sr.PONumber, Delivery: models.Delivery(optional.Value(sr.Delivery)), Reminders: sr.Reminders,
		Interval: models.RecurringInterval(sr.Interval), IntervalCount: int32(sr.Count), StartOn: date(sr.StartOn),
		DueDays: int32(sr.DueDays), Send: sr.Send, IssuedCount: int32(sr.IssuedCount),
		SkippedCount: int32(sr.SkippedCount), LastInvoiceId: sr.LastInvoiceID, CreatedAt: sr.CreatedAt, UpdatedAt: sr.UpdatedAt,
		Upcoming: []openapi_types.Date{},
	}
	if sr.AutoPay != nil {
		m.AutoPay = &models.AutoPay{SavedCardId: *sr.AutoPay}
	}
	if sr.EndAfter != nil {
		n := int32(*sr.EndAfter)
		m.EndAfter = &n
	}
	if sr.EndOn != nil {
		d := date(*sr.EndOn)
		m.EndOn = &d
	}
	if sr.Lines != nil {
		lines := make([]models.InvoiceLineInput, len(sr.Lines))
		for i, l := range sr.Lines {
			lines[i] = models.InvoiceLineInput{Description: l.Description, Quantity: jsonnum.Decimal{Decimal: invoice.Plain(l.Quantity)},
				UnitCost: jsonnum.Decimal{Decimal: invoice.Plain(l.UnitCost)}, Uom: l.UOM, CommodityCode: l.CommodityCode, Upc: l.UPC}
			if l.TaxRate != nil {
				lines[i].TaxRate = &jsonnum.Decimal{Decimal: invoice.Plain(*l.TaxRate)}
			}
		}
		m.Lines = &lines
	}
	if day, ok := sr.NextOn(); ok {
		d := date(day)
		m.NextIssueOn = &d
	}
	for _, day := range sr.Upcoming() {
		m.Upcoming = append(m.Upcoming, date(day))
	}
	return m
}

// decimals is the arithmetic of amounts: exact at any amount payreq takes.
var decimals = apd.BaseContext.WithPrecision(34)
