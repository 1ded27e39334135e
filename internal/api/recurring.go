package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/recurring"
)

// CreateRecurringInvoice creates a series; a repeated Idempotency-Key with
// the same body answers 200 with the series as it is now.
func (s *Server) CreateRecurringInvoice(ctx context.Context, req gen.CreateRecurringInvoiceRequestObject) (gen.CreateRecurringInvoiceResponseObject, error) {
	b := req.Body
	t := recurring.Terms{
		MerchantAccountID: b.MerchantAccountId, CustomerID: b.CustomerId, Prefix: b.InvoiceNumberPrefix,
		Amount: b.Amount.Decimal, Memo: b.Memo, PONumber: b.PoNumber, Delivery: (*string)(b.Delivery),
		Reminders: b.Reminders, DueDays: int(b.DueDays), Send: b.Send,
	}
	t.Lines = linesOf(b.Lines)
	if b.AutoPay != nil {
		t.AutoPay = &b.AutoPay.SavedCardId
	}
	sc := recurring.Schedule{StartOn: b.StartOn.Time, Interval: recurring.Interval(b.Interval), Count: int(b.IntervalCount)}
	if b.EndAfter != nil {
		n := int(*b.EndAfter)
		sc.EndAfter = &n
	}
	if b.EndOn != nil {
		sc.EndOn = &b.EndOn.Time
	}
	sr, replayed, err := s.recurring.Create(ctx, principalFrom(ctx).OrganizationID, t, sc, req.Params.IdempotencyKey)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			return gen.CreateRecurringInvoice400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.CreateRecurringInvoice422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if replayed {
		return gen.CreateRecurringInvoice200JSONResponse{Body: sr.Model(),
			Headers: gen.CreateRecurringInvoice200ResponseHeaders{IdempotentReplayed: "true"}}, nil
	}
	return gen.CreateRecurringInvoice201JSONResponse(sr.Model()), nil
}

// ListRecurringInvoices lists series newest first, a page at a time.
func (s *Server) ListRecurringInvoices(ctx context.Context, req gen.ListRecurringInvoicesRequestObject) (gen.ListRecurringInvoicesResponseObject, error) {
	q := req.Params
	pg := pageOf(q.Limit, q.Cursor)
	f := recurring.Filter{Status: (*string)(q.Status), CustomerID: q.CustomerId}
	list, next, err := s.recurring.List(ctx, principalFrom(ctx).OrganizationID, f, pg.limit, pg.cursor)
	if errors.Is(err, keyset.ErrInvalid) {
		return gen.ListRecurringInvoices400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	out := gen.ListRecurringInvoices200JSONResponse{Body: make([]models.RecurringInvoice, len(list))}
	for i, sr := range list {
		out.Body[i] = sr.Model()
	}
	fs := filters{}
	fs.text("status", f.Status)
	fs.id("customerId", f.CustomerID)
	out.Headers.Link = s.nextLink("/recurring-invoices", fs, pg, next)
	return out, nil
}

// GetRecurringInvoice reads one series.
func (s *Server) GetRecurringInvoice(ctx context.Context, req gen.GetRecurringInvoiceRequestObject) (gen.GetRecurringInvoiceResponseObject, error) {
	sr, err := s.recurring.Get(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetRecurringInvoice404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetRecurringInvoice200JSONResponse(sr.Model()), nil
}

// UpdateRecurringInvoice changes, pauses or resumes a series.
func (s *Server) UpdateRecurringInvoice(ctx context.Context, req gen.UpdateRecurringInvoiceRequestObject) (gen.UpdateRecurringInvoiceResponseObject, error) {
	b := req.Body
	c := recurring.Change{
		SetLines: b.Lines.Set, SetMemo: b.Memo.Set, Memo: b.Memo.Value, SetPONumber: b.PoNumber.Set, PONumber: b.PoNumber.Value,
		SetEndAfter: b.EndAfter.Set, SetEndOn: b.EndOn.Set, SetAutoPay: patched(ctx)["autoPay"],
	}
	if b.AutoPay != nil {
		c.AutoPay = &b.AutoPay.SavedCardId
	}
	if b.Status != nil {
		st := recurring.Status(*b.Status)
		c.Status = &st
	}
	if b.Amount != nil {
		c.Amount = &b.Amount.Decimal
	}
	c.Lines = linesOf(b.Lines.Value)
	if b.DueDays != nil {
		n := int(*b.DueDays)
		c.DueDays = &n
	}
	if b.EndAfter.Value != nil {
		n := int(*b.EndAfter.Value)
		c.EndAfter = &n
	}
	if b.EndOn.Value != nil {
		c.EndOn = &b.EndOn.Value.Time
	}
	sr, err := s.recurring.Update(ctx, principalFrom(ctx).OrganizationID, req.Id, c)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			return gen.UpdateRecurringInvoice400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusNotFound:
			return gen.UpdateRecurringInvoice404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.UpdateRecurringInvoice422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.UpdateRecurringInvoice200JSONResponse(sr.Model()), nil
}

// EndRecurringInvoice ends a series (DELETE): it issues nothing more.
func (s *Server) EndRecurringInvoice(ctx context.Context, req gen.EndRecurringInvoiceRequestObject) (gen.EndRecurringInvoiceResponseObject, error) {
	sr, err := s.recurring.End(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.EndRecurringInvoice404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.EndRecurringInvoice200JSONResponse(sr.Model()), nil
}
