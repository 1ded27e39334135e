package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/keyset"
)

// CreatePaymentRequest creates an invoice; a repeated Idempotency-Key with the
// same body answers 200 with the invoice as it is now.
func (s *Server) CreatePaymentRequest(ctx context.Context, req gen.CreatePaymentRequestRequestObject) (gen.CreatePaymentRequestResponseObject, error) {
	b := req.Body
	draft := invoice.Draft{
		MerchantAccountID: b.MerchantAccountId,
		InvoiceNumber:     b.InvoiceNumber,
		Amount:            b.Amount.Decimal,
		PONumber:          b.PoNumber,
		CustomerName:      b.CustomerName,
		CustomerCompany:   b.CustomerCompany,
		CustomerEmail:     b.CustomerEmail,
		CustomerPhone:     b.CustomerPhone,
		Delivery:          (*string)(b.Delivery),
		Memo:              b.Memo,
		Send:              b.Send,
		SendAt:            b.SendAt,
		Reminders:         b.Reminders,
		Lines:             linesOf(b.Lines),
		AsDraft:           b.Draft != nil && *b.Draft,
		CustomerID:        b.CustomerId,
	}
	if b.DueDate != nil {
		draft.DueDate = &b.DueDate.Time
	}
	p := principalFrom(ctx)
	inv, replayed, err := s.invoices.Create(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, draft, req.Params.IdempotencyKey)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			return gen.CreatePaymentRequest400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.CreatePaymentRequest422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if replayed {
		return invoiceAnswer{status: http.StatusOK, body: s.invoiceBody(inv, true), replayed: true}, nil
	}
	return invoiceAnswer{status: http.StatusCreated, body: s.invoiceBody(inv, true)}, nil
}

// linesOf are the lines of a request (nil: none given, or null).
func linesOf(in *[]models.InvoiceLineInput) []invoice.Line {
	if in == nil {
		return nil
	}
	lines := make([]invoice.Line, len(*in))
	for i, l := range *in {
		lines[i] = invoice.Line{Description: l.Description, Quantity: l.Quantity.Decimal, UnitCost: l.UnitCost.Decimal,
			UOM: l.Uom, CommodityCode: l.CommodityCode, UPC: l.Upc}
		if l.TaxRate != nil {
			lines[i].TaxRate = &l.TaxRate.Decimal
		}
	}
	return lines
}

// GetPaymentRequest reads an invoice with its lines, payments and saved
// cards; as a PDF document when the request prefers one (Accept).
func (s *Server) GetPaymentRequest(ctx context.Context, req gen.GetPaymentRequestRequestObject) (gen.GetPaymentRequestResponseObject, error) {
	org := principalFrom(ctx).OrganizationID
	if acceptsPDF(ctx) {
		inv, err := s.invoices.Document(ctx, org, req.Id, nil)
		if r := refusal(err); r != nil && r.status == http.StatusNotFound {
			return gen.GetPaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		}
		if err != nil {
			return nil, err
		}
		doc, err := s.pdfs.Invoice(ctx, inv, s.invoices.Link(&inv))
		if err != nil {
			return nil, err
		}
		disposition := invoicepdf.Disposition("invoice-" + inv.InvoiceNumber)
		return gen.GetPaymentRequest200ApplicationpdfResponse{Body: bytes.NewReader(doc), ContentLength: int64(len(doc)),
			Headers: gen.GetPaymentRequest200ResponseHeaders{ContentDisposition: &disposition, ETag: etag(inv.Version)}}, nil
	}
	inv, err := s.invoices.Get(ctx, org, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetPaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return invoiceAnswer{status: http.StatusOK, body: s.invoiceBody(inv, true)}, nil
}

// RecordPayment records a payment made outside the card processor; a
// repeated Idempotency-Key with the same body answers 200 with the invoice
// as it is now.
func (s *Server) RecordPayment(ctx context.Context, req gen.RecordPaymentRequestObject) (gen.RecordPaymentResponseObject, error) {
	b := req.Body
	p := principalFrom(ctx)
	inv, replayed, err := s.invoices.RecordPayment(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, req.Id,
		invoice.RecordedPayment{Amount: b.Amount.Decimal, Method: string(b.Method), Reference: b.Reference, ReceivedAt: b.ReceivedAt},
		req.Params.IdempotencyKey)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			return gen.RecordPayment400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusNotFound:
			return gen.RecordPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.RecordPayment422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if replayed {
		return invoiceAnswer{status: http.StatusOK, body: s.invoiceBody(inv, true), replayed: true}, nil
	}
	return invoiceAnswer{status: http.StatusCreated, body: s.invoiceBody(inv, true)}, nil
}

// RemoveRecordedPayment removes a recorded payment and moves the invoice back.
func (s *Server) RemoveRecordedPayment(ctx context.Context, req gen.RemoveRecordedPaymentRequestObject) (gen.RemoveRecordedPaymentResponseObject, error) {
	p := principalFrom(ctx)
	inv, err := s.invoices.RemovePayment(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, req.Id, req.PaymentId)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusNotFound:
			return gen.RemoveRecordedPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.RemoveRecordedPayment422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return invoiceAnswer{status: http.StatusOK, body: s.invoiceBody(inv, true)}, nil
}

// GetReminderSettings reads the organization's reminder schedule.
func (s *Server) GetReminderSettings(ctx context.Context, _ gen.GetReminderSettingsRequestObject) (gen.GetReminderSettingsResponseObject, error) {
	rs, err := s.invoices.ReminderSettings(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	return gen.GetReminderSettings200JSONResponse(reminderSettingsBody(rs)), nil
}

// PutReminderSettings replaces the organization's reminder schedule.
func (s *Server) PutReminderSettings(ctx context.Context, req gen.PutReminderSettingsRequestObject) (gen.PutReminderSettingsResponseObject, error) {
	in := invoice.ReminderSettings{Enabled: req.Body.Enabled, OffsetsDays: make([]int, len(req.Body.OffsetsDays))}
	for i, o := range req.Body.OffsetsDays {
		in.OffsetsDays[i] = int(o)
	}
	p := principalFrom(ctx)
	rs, err := s.invoices.SetReminderSettings(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, in)
	if r := refusal(err); r != nil && r.status == http.StatusBadRequest {
		return gen.PutReminderSettings400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.PutReminderSettings200JSONResponse(reminderSettingsBody(rs)), nil
}

func reminderSettingsBody(rs invoice.ReminderSettings) models.ReminderSettings {
	out := models.ReminderSettings{Enabled: rs.Enabled, OffsetsDays: make([]int32, len(rs.OffsetsDays))}
	for i, o := range rs.OffsetsDays {
		out.OffsetsDays[i] = int32(o)
	}
	return out
}

// ListPaymentRequests lists invoices newest first, a page at a time.
func (s *Server) ListPaymentRequests(ctx context.Context, req gen.ListPaymentRequestsRequestObject) (gen.ListPaymentRequestsResponseObject, error) {
	q := req.Params
	pg := pageOf(q.Limit, q.Cursor)
	f := invoice.Filter{
		Status: (*string)(q.Status), MerchantAccountID: q.MerchantAccountId, LocationID: q.LocationId,
		InvoiceNumber: q.InvoiceNumber, CustomerEmail: q.CustomerEmail, CustomerID: q.CustomerId, CreatedFrom: q.CreatedFrom,
		CreatedTo: q.CreatedTo,
	}
	list, next, err := s.invoices.List(ctx, principalFrom(ctx).OrganizationID, f, pg.limit, pg.cursor)
	if errors.Is(err, keyset.ErrInvalid) {
		return gen.ListPaymentRequests400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	out := invoicePage{items: make([]models.Invoice, len(list))}
	for i, inv := range list {
		out.items[i] = s.invoiceBody(inv, false)
	}
	fs := filters{}
	fs.text("status", f.Status)
	fs.id("merchantAccountId", f.MerchantAccountID)
	fs.id("locationId", f.LocationID)
	fs.text("invoiceNumber", f.InvoiceNumber)
	fs.text("customerEmail", f.CustomerEmail)
	fs.id("customerId", f.CustomerID)
	fs.time("createdFrom", f.CreatedFrom)
	fs.time("createdTo", f.CreatedTo)
	out.link = s.nextLink("/payment-requests", fs, pg, next)
	return out, nil
}

// SendPaymentRequest sends the pay link again.
func (s *Server) SendPaymentRequest(ctx context.Context, req gen.SendPaymentRequestRequestObject) (gen.SendPaymentRequestResponseObject, error) {
	p := principalFrom(ctx)
	inv, err := s.invoices.Send(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, req.Id)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusNotFound:
			return gen.SendPaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.SendPaymentRequest422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		case http.StatusTooManyRequests:
			return gen.SendPaymentRequest429ApplicationProblemPlusJSONResponse{Body: s.body(r),
				Headers: gen.SendPaymentRequest429ResponseHeaders{RetryAfter: r.retryAfter()}}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return invoiceAnswer{status: http.StatusOK, body: s.invoiceBody(inv, true)}, nil
}

// CancelPaymentRequest cancels an open or part-paid invoice.
func (s *Server) CancelPaymentRequest(ctx context.Context, req gen.CancelPaymentRequestRequestObject) (gen.CancelPaymentRequestResponseObject, error) {
	p := principalFrom(ctx)
	inv, err := s.invoices.Cancel(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, req.Id)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusNotFound:
			return gen.CancelPaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.CancelPaymentRequest422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return invoiceAnswer{status: http.StatusOK, body: s.invoiceBody(inv, true)}, nil
}

// invoiceBody is the wire form of an invoice with its pay link; full adds
// lineItems, payments and savedCards (single reads), which list items omit.
func (s *Server) invoiceBody(inv invoice.Invoice, full bool) models.Invoice {
	return inv.Model(s.invoices.Link(&inv), full)
}
