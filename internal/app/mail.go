package app

import (
	"bytes"
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/payment"
)

// MailDocuments draws the PDFs the outbox's emails carry
// (delivery.Documents): the invoice's, as the API and the pay page serve
// it, and the receipts of its card payments.
func (a *App) MailDocuments() delivery.Documents {
	return mailDocuments{invoices: a.Invoices, payments: a.Payments, pdfs: a.PDFs}
}

type mailDocuments struct {
	invoices *invoice.Store
	payments *payment.Store
	pdfs     *invoicepdf.Documents
}

func (m mailDocuments) Invoice(ctx context.Context, org, id uuid.UUID) (delivery.Attachment, error) {
	inv, err := m.invoices.Document(ctx, org, id, nil)
	if err != nil {
		return delivery.Attachment{}, err
	}
	doc, err := m.pdfs.Invoice(ctx, inv, m.invoices.Link(&inv))
	return delivery.Attachment{Name: inv.InvoiceNumber, PDF: doc}, err
}

func (m mailDocuments) Receipt(ctx context.Context, org, invoiceID, paymentID uuid.UUID) (delivery.Receipt, error) {
	inv, err := m.invoices.Document(ctx, org, invoiceID, nil)
	if err != nil {
		return delivery.Receipt{}, err
	}
	cp, err := m.payments.CardPayment(ctx, org, paymentID)
	if err != nil {
		return delivery.Receipt{}, err
	}
	saleID := cp.ID
	if cp.RefundOf != nil {
		saleID = *cp.RefundOf
	}
	var sale *invoice.Payment
	for i, p := range inv.Payments {
		if p.ID == saleID && p.Method == invoice.MethodCard {
			sale = &inv.Payments[i]
		}
	}
	if sale == nil || cp.InvoiceID != inv.ID || cp.Status != payment.Approved {
		return delivery.Receipt{}, fmt.Errorf("app: card payment %s is no approved payment of invoice %s", paymentID, invoiceID)
	}
	var buf bytes.Buffer
	r := delivery.Receipt{Amount: invoice.Money(cp.Amount), Method: invoicepdf.MethodText(*sale), At: cp.CreatedAt,
		Reference: optional.Value(cp.RetRef)}
	if cp.Kind == payment.Refund {
		r.Refund = true
		err = invoicepdf.RefundReceipt(ctx, &buf, inv, *sale, cp.Amount, cp.CreatedAt, r.Reference)
		r.Document = delivery.Attachment{Name: "refund-receipt-" + inv.InvoiceNumber, PDF: buf.Bytes()}
	} else {
		balance := inv.BalanceAfter(*sale)
		r.Balance = invoice.Money(balance)
		err = invoicepdf.Receipt(ctx, &buf, inv, *sale, balance)
		r.Document = delivery.Attachment{Name: "receipt-" + inv.InvoiceNumber, PDF: buf.Bytes()}
	}
	return r, err
}
