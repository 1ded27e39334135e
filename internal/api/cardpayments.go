package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/apd/v3"
	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/processor"
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
	if errors.Is(err, payment.ErrInvalidCursor) {
		return gen.ListCardPayments400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	out := gen.ListCardPayments200JSONResponse{Body: make([]models.CardPayment, len(list))}
	for i, p := range list {
		out.Body[i] = p.Wire()
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
	if errors.Is(err, payment.ErrNotFound) {
		return gen.GetCardPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFoundBody("card payment")}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetCardPayment200JSONResponse(p.Wire()), nil
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
	r := payment.RefundRequest{Actor: invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, SaleID: req.Id, Reason: body.Reason}
	if body.Amount != nil {
		if msg := invoice.AmountProblem(body.Amount.Decimal); msg != "" {
			return gen.RefundCardPayment400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidField("amount", msg))}, nil
		}
		// In cents, so that 10, "10" and "10.00" are one request.
		var amount jsonnum.Decimal
		if _, err := apd.BaseContext.WithPrecision(34).Quantize(&amount.Decimal, &body.Amount.Decimal, -2); err != nil {
			return nil, err
		}
		body.Amount, r.Amount = &amount, &amount.Decimal
	}
	if req.Params.IdempotencyKey != nil {
		// The sale and the body as decoded and encoded again, as for
		// invoices (the amount in cents): the same key on another sale is
		// another request.
		normal, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(append(req.Id[:], normal...))
		r.Idempotency = &invoice.Idempotency{Key: *req.Params.IdempotencyKey, Hash: sum[:]}
	}
	refund, replayed, err := s.payments.Refund(ctx, r)
	var exceeds *payment.ExceedsError
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return gen.RefundCardPayment404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFoundBody("card payment")}, nil
	case errors.Is(err, payment.ErrNotRefundable):
		return gen.RefundCardPayment422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(
			unprocessable(kindUnprocessable, "Not refundable", "Only an approved sale can be refunded; this card payment is a declined sale or a refund."))}, nil
	case errors.As(err, &exceeds):
		return gen.RefundCardPayment422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(
			unprocessable(kindUnprocessable, "Refund exceeds refundable amount",
				fmt.Sprintf("At most %s of this sale can still be refunded.", exceeds.Refundable.Text('f'))))}, nil
	case errors.Is(err, payment.ErrKeyReused):
		return gen.RefundCardPayment422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(
			unprocessable("idempotency-key-reused", "Idempotency key reused",
				"This Idempotency-Key was used in the last 24 hours with a different refund; use a new key for a new refund."))}, nil
	case errors.Is(err, processor.ErrUnavailable):
		s.log.WarnContext(ctx, "refund not made: card processor failed", "card_payment_id", req.Id.String(), "error", err.Error())
		return gen.RefundCardPayment502ApplicationProblemPlusJSONResponse{BadGatewayApplicationProblemPlusJSONResponse: s.badGatewayBody(badGateway(
			"Card processor unavailable", "The card processor failed, so no refund is recorded. Retry with the same Idempotency-Key: a refund is never made twice."))}, nil
	case err != nil:
		return nil, err
	}
	if replayed {
		return gen.RefundCardPayment200JSONResponse{Body: refund.Wire(),
			Headers: gen.RefundCardPayment200ResponseHeaders{IdempotentReplayed: "true"}}, nil
	}
	return gen.RefundCardPayment201JSONResponse(refund.Wire()), nil
}
