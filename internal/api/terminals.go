package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/terminal"
)

// ListTerminals lists the caller's card terminals ordered by name.
func (s *Server) ListTerminals(ctx context.Context, _ gen.ListTerminalsRequestObject) (gen.ListTerminalsResponseObject, error) {
	org := principalFrom(ctx).OrganizationID
	ts, err := s.terminals.List(ctx, &org)
	if err != nil {
		return nil, err
	}
	out := make(gen.ListTerminals200JSONResponse, len(ts))
	for i, t := range ts {
		out[i] = t.Model()
	}
	return out, nil
}

// GetTerminal reads one of the caller's terminals; others' ids are 404.
func (s *Server) GetTerminal(ctx context.Context, req gen.GetTerminalRequestObject) (gen.GetTerminalResponseObject, error) {
	t, err := s.terminals.Get(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetTerminal404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetTerminal200JSONResponse(t.Model()), nil
}

// CreateTerminalPayment asks a terminal for a payment toward an invoice:
// 202 with it pending (the worker asks the terminal); a repeated
// Idempotency-Key with the same body answers 200 with it as it is now.
func (s *Server) CreateTerminalPayment(ctx context.Context, req gen.CreateTerminalPaymentRequestObject) (gen.CreateTerminalPaymentResponseObject, error) {
	n := terminal.NewPayment{TerminalID: req.Body.TerminalId, InvoiceID: req.Body.InvoiceId}
	if req.Body.Amount != nil {
		n.Amount = new(apd.Decimal)
		n.Amount.Set(&req.Body.Amount.Decimal)
	}
	p, replayed, err := s.terminals.Create(ctx, principalFrom(ctx).OrganizationID, n, req.Params.IdempotencyKey)
	if pr := refusal(err); pr != nil {
		switch pr.status {
		case http.StatusBadRequest:
			return gen.CreateTerminalPayment400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(pr)}, nil
		case http.StatusConflict:
			return gen.CreateTerminalPayment409ApplicationProblemPlusJSONResponse{ConflictApplicationProblemPlusJSONResponse: gen.ConflictApplicationProblemPlusJSONResponse(s.body(pr))}, nil
		case http.StatusUnprocessableEntity:
			return gen.CreateTerminalPayment422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(pr)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if replayed {
		return gen.CreateTerminalPayment200JSONResponse{Body: p.Model(),
			Headers: gen.CreateTerminalPayment200ResponseHeaders{IdempotentReplayed: "true"}}, nil
	}
	return gen.CreateTerminalPayment202JSONResponse(p.Model()), nil
}

// ListTerminalPayments lists terminal payments newest first, a page at a time.
func (s *Server) ListTerminalPayments(ctx context.Context, req gen.ListTerminalPaymentsRequestObject) (gen.ListTerminalPaymentsResponseObject, error) {
	q := req.Params
	pg := pageOf(q.Limit, q.Cursor)
	f := terminal.Filter{TerminalID: q.TerminalId, InvoiceID: q.InvoiceId, Status: (*string)(q.Status)}
	list, next, err := s.terminals.Payments(ctx, principalFrom(ctx).OrganizationID, f, pg.limit, pg.cursor)
	if errors.Is(err, keyset.ErrInvalid) {
		return gen.ListTerminalPayments400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	out := gen.ListTerminalPayments200JSONResponse{Body: make([]models.TerminalPayment, len(list))}
	for i, p := range list {
		out.Body[i] = p.Model()
	}
	fs := filters{}
	fs.id("terminalId", f.TerminalID)
	fs.id("invoiceId", f.InvoiceID)
	fs.text("status", f.Status)
	out.Headers.Link = s.nextLink("/terminal-payments", fs, pg, next)
	return out, nil
}

// GetTerminalPayment reads one terminal payment.
func (s *Server) GetTerminalPayment(ctx context.Context, req gen.GetTerminalPaymentRequestObject) (gen.GetTerminalPaymentResponseObject, error) {
	p, err := s.terminals.Payment(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetTerminalPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetTerminalPayment200JSONResponse(p.Model()), nil
}

// CancelTerminalPayment cancels a pending terminal payment.
func (s *Server) CancelTerminalPayment(ctx context.Context, req gen.CancelTerminalPaymentRequestObject) (gen.CancelTerminalPaymentResponseObject, error) {
	p, err := s.terminals.Cancel(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if pr := refusal(err); pr != nil {
		switch pr.status {
		case http.StatusNotFound:
			return gen.CancelTerminalPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(pr)}, nil
		case http.StatusUnprocessableEntity:
			return gen.CancelTerminalPayment422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(pr)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.CancelTerminalPayment200JSONResponse(p.Model()), nil
}
