package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/payment"
)

// ListDeposits lists deposits newest first, a page at a time.
func (s *Server) ListDeposits(ctx context.Context, req gen.ListDepositsRequestObject) (gen.ListDepositsResponseObject, error) {
	q := req.Params
	pg := pageOf(q.Limit, q.Cursor)
	f := payment.DepositFilter{
		MerchantAccountID: q.MerchantAccountId, Status: (*string)(q.Status), CreatedFrom: q.CreatedFrom, CreatedTo: q.CreatedTo,
	}
	list, next, err := s.payments.Deposits(ctx, principalFrom(ctx).OrganizationID, f, pg.limit, pg.cursor)
	if errors.Is(err, keyset.ErrInvalid) {
		return gen.ListDeposits400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	out := gen.ListDeposits200JSONResponse{Body: make([]models.Deposit, len(list))}
	for i, d := range list {
		out.Body[i] = d.Model()
	}
	fs := filters{}
	fs.id("merchantAccountId", f.MerchantAccountID)
	fs.text("status", f.Status)
	fs.time("createdFrom", f.CreatedFrom)
	fs.time("createdTo", f.CreatedTo)
	out.Headers.Link = s.nextLink("/deposits", fs, pg, next)
	return out, nil
}

// GetDeposit reads one deposit.
func (s *Server) GetDeposit(ctx context.Context, req gen.GetDepositRequestObject) (gen.GetDepositResponseObject, error) {
	d, err := s.payments.Deposit(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetDeposit404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetDeposit200JSONResponse(d.Model()), nil
}
