package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/web"
)

// ListCardPayments lists card payments newest first, a page at a time.
func (s *Server) ListCardPayments(ctx context.Context, req gen.ListCardPaymentsRequestObject) (gen.ListCardPaymentsResponseObject, error) {
	q := req.Params
	pg := pageOf(q.Limit, q.Cursor)
	f := payment.Filter{
		Kind: (*string)(q.Kind), Status: (*string)(q.Status), MerchantAccountID: q.MerchantAccountId,
		InvoiceID: q.InvoiceId, DepositID: q.DepositId, CreatedFrom: q.CreatedFrom, CreatedTo: q.CreatedTo,
	}
	list, next, err := s.payments.CardPayments(ctx, principalFrom(ctx).OrganizationID, f, pg.limit, pg.cursor)
	if errors.Is(err, keyset.ErrInvalid) {
		return gen.ListCardPayments400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	out := gen.ListCardPayments200JSONResponse{Body: make([]models.CardPayment, len(list))}
	for i, p := range list {
		out.Body[i] = p.Model()
	}
	fs := filters{}
	fs.text("kind", f.Kind)
	fs.text("status", f.Status)
	fs.id("merchantAccountId", f.MerchantAccountID)
	fs.id("invoiceId", f.InvoiceID)
	fs.id("depositId", f.DepositID)
	fs.time("createdFrom", f.CreatedFrom)
	fs.time("createdTo", f.CreatedTo)
	out.Headers.Link = s.nextLink("/card-payments", fs, pg, next)
	return out, nil
}

// GetCardPayment reads one card payment.
func (s *Server) GetCardPayment(ctx context.Context, req gen.GetCardPaymentRequestObject) (gen.GetCardPaymentResponseObject, error) {
	p, err := s.payments.CardPayment(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetCardPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetCardPayment200JSONResponse(p.Model()), nil
}

// RefundCardPayment refunds an approved sale, in whole or in part; a
// repeated Idempotency-Key with the same body answers 200 with the refund
// already made.
func (s *Server) RefundCardPayment(ctx context.Context, req gen.RefundCardPaymentRequestObject) (gen.RefundCardPaymentResponseObject, error) {
	body := models.RefundRequest{}
	if req.Body != nil {
		body = *req.Body
	}
	p := principalFrom(ctx)
	r := payment.RefundRequest{Actor: invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, SaleID: req.Id,
		Reason: body.Reason, Key: req.Params.IdempotencyKey}
	if body.Amount != nil {
		r.Amount = &body.Amount.Decimal
	}
	refund, replayed, err := s.payments.Refund(ctx, r)
	if pr := refusal(err); pr != nil {
		switch pr.status {
		case http.StatusBadRequest:
			return gen.RefundCardPayment400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(pr)}, nil
		case http.StatusNotFound:
			return gen.RefundCardPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(pr)}, nil
		case http.StatusUnprocessableEntity:
			return gen.RefundCardPayment422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(pr)}, nil
		}
	}
	switch {
	case web.OutageOf(err) == web.Processor:
		s.log.WarnContext(ctx, "refund not made: card processor failed", "card_payment_id", req.Id.String(), "error", err.Error())
		return gen.RefundCardPayment502ApplicationProblemPlusJSONResponse{BadGatewayApplicationProblemPlusJSONResponse: s.badGatewayBody(badGateway(
			"Card processor unavailable", "The card processor failed, so no refund is recorded. Retry with the same Idempotency-Key: a refund is never made twice."))}, nil
	case err != nil:
		return nil, err
	}
	if replayed {
		return gen.RefundCardPayment200JSONResponse{Body: refund.Model(),
			Headers: gen.RefundCardPayment200ResponseHeaders{IdempotentReplayed: "true"}}, nil
	}
	return gen.RefundCardPayment201JSONResponse(refund.Model()), nil
}
