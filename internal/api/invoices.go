package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/invoice"
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
	}
	if b.DueDate != nil {
		draft.DueDate = &b.DueDate.Time
	}
	if b.Lines != nil {
		draft.Lines = make([]invoice.Line, len(*b.Lines))
		for i, l := range *b.Lines {
			draft.Lines[i] = invoice.Line{Description: l.Description, Quantity: l.Quantity.Decimal, UnitCost: l.UnitCost.Decimal,
				UOM: l.Uom, CommodityCode: l.CommodityCode, UPC: l.Upc}
		}
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
		return gen.CreatePaymentRequest200JSONResponse{Body: s.invoiceBody(inv, true),
			Headers: gen.CreatePaymentRequest200ResponseHeaders{IdempotentReplayed: "true"}}, nil
	}
	return gen.CreatePaymentRequest201JSONResponse(s.invoiceBody(inv, true)), nil
}

// GetPaymentRequest reads an invoice with its lines, payments and saved cards.
func (s *Server) GetPaymentRequest(ctx context.Context, req gen.GetPaymentRequestRequestObject) (gen.GetPaymentRequestResponseObject, error) {
	inv, err := s.invoices.Get(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetPaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetPaymentRequest200JSONResponse(s.invoiceBody(inv, true)), nil
}

// ListPaymentRequests lists invoices newest first, a page at a time.
func (s *Server) ListPaymentRequests(ctx context.Context, req gen.ListPaymentRequestsRequestObject) (gen.ListPaymentRequestsResponseObject, error) {
	q := req.Params
	pg := pageOf(q.Limit, q.Cursor)
	f := invoice.Filter{
		Status: (*string)(q.Status), MerchantAccountID: q.MerchantAccountId, LocationID: q.LocationId,
		InvoiceNumber: q.InvoiceNumber, CustomerEmail: q.CustomerEmail, CreatedFrom: q.CreatedFrom, CreatedTo: q.CreatedTo,
	}
	list, next, err := s.invoices.List(ctx, principalFrom(ctx).OrganizationID, f, pg.limit, pg.cursor)
	if errors.Is(err, invoice.ErrInvalidCursor) {
		return gen.ListPaymentRequests400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	out := gen.ListPaymentRequests200JSONResponse{Body: make([]models.Invoice, len(list))}
	for i, inv := range list {
		out.Body[i] = s.invoiceBody(inv, false)
	}
	fs := filters{}
	fs.text("status", f.Status)
	fs.id("merchantAccountId", f.MerchantAccountID)
	fs.id("locationId", f.LocationID)
	fs.text("invoiceNumber", f.InvoiceNumber)
	fs.text("customerEmail", f.CustomerEmail)
	fs.time("createdFrom", f.CreatedFrom)
	fs.time("createdTo", f.CreatedTo)
	out.Headers.Link = s.nextLink("/payment-requests", fs, pg, next)
	return out, nil
}

// SendPaymentRequest sends the pay link again.
func (s *Server) SendPaymentRequest(ctx context.Context, req gen.SendPaymentRequestRequestObject) (gen.SendPaymentRequestResponseObject, error) {
	inv, err := s.invoices.Send(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusNotFound:
			return gen.SendPaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.SendPaymentRequest422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.SendPaymentRequest200JSONResponse(s.invoiceBody(inv, true)), nil
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
	return gen.CancelPaymentRequest200JSONResponse(s.invoiceBody(inv, true)), nil
}

// invoiceBody is the wire form of an invoice with its pay link; full adds
// lineItems, payments and savedCards (single reads), which list items omit.
func (s *Server) invoiceBody(inv invoice.Invoice, full bool) models.Invoice {
	return inv.Wire(s.invoices.Link(&inv), full)
}
