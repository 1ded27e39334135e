package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

func customerActor(ctx context.Context) customer.Actor {
	return customer.Actor{OrganizationID: principalFrom(ctx).OrganizationID}
}

// emailTaken is the 409 of an email another customer has, naming it.
func (s *Server) emailTaken(err error) (gen.EmailTakenApplicationProblemPlusJSONResponse, bool) {
	e := rule.As(err)
	if e == nil || e.Kind != rule.Taken {
		return gen.EmailTakenApplicationProblemPlusJSONResponse{}, false
	}
	b := s.body(&problem{kind: kindConflict, status: http.StatusConflict, title: e.Title, detail: e.Message})
	if id, err := uuid.Parse(e.Existing); err == nil && id != uuid.Nil {
		b.ExistingId = &id
	}
	return gen.EmailTakenApplicationProblemPlusJSONResponse(b), true
}

func addressOf(a *models.CustomerAddress) *customer.Address {
	if a == nil {
		return nil
	}
	out := &customer.Address{Line1: a.Line1, Line2: a.Line2, City: a.City, State: a.State, PostalCode: a.PostalCode}
	if a.Country != nil {
		out.Country = *a.Country
	}
	return out
}

// CreateCustomer makes a customer; a repeated Idempotency-Key with the
// same body answers 200 with the customer as it is now.
func (s *Server) CreateCustomer(ctx context.Context, req gen.CreateCustomerRequestObject) (gen.CreateCustomerResponseObject, error) {
	b := req.Body
	f := customer.Fields{Email: string(b.Email), Name: b.Name, Company: b.Company, Phone: b.Phone, Address: addressOf(b.Address),
		Notes: b.Notes}
	if b.TaxExempt != nil {
		f.TaxExempt = *b.TaxExempt
	}
	c, replayed, err := s.customers.Create(ctx, customerActor(ctx), f, req.Params.IdempotencyKey)
	if taken, ok := s.emailTaken(err); ok {
		return gen.CreateCustomer409ApplicationProblemPlusJSONResponse{EmailTakenApplicationProblemPlusJSONResponse: taken}, nil
	}
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			return gen.CreateCustomer400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.CreateCustomer422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if replayed {
		return gen.CreateCustomer200JSONResponse{Body: c.Model(), Headers: gen.CreateCustomer200ResponseHeaders{IdempotentReplayed: "true"}}, nil
	}
	return gen.CreateCustomer201JSONResponse(c.Model()), nil
}

// ListCustomers lists customers newest first, a page at a time.
func (s *Server) ListCustomers(ctx context.Context, req gen.ListCustomersRequestObject) (gen.ListCustomersResponseObject, error) {
	q := req.Params
	pg := pageOf(q.Limit, q.Cursor)
	f := customer.Filter{Q: q.Q, Email: q.Email}
	list, next, err := s.customers.List(ctx, principalFrom(ctx).OrganizationID, f, pg.limit, pg.cursor)
	if errors.Is(err, keyset.ErrInvalid) {
		return gen.ListCustomers400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if r := refusal(err); r != nil && r.status == http.StatusBadRequest {
		return gen.ListCustomers400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	out := gen.ListCustomers200JSONResponse{Body: make([]models.Customer, len(list))}
	for i, c := range list {
		out.Body[i] = c.Model()
	}
	fs := filters{}
	fs.text("q", f.Q)
	fs.text("email", f.Email)
	out.Headers.Link = s.nextLink("/customers", fs, pg, next)
	return out, nil
}

// GetCustomer reads a customer with its totals and saved cards.
func (s *Server) GetCustomer(ctx context.Context, req gen.GetCustomerRequestObject) (gen.GetCustomerResponseObject, error) {
	c, err := s.customers.Get(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetCustomer404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetCustomer200JSONResponse(c.Model()), nil
}

// UpdateCustomer applies a merge patch to a customer.
func (s *Server) UpdateCustomer(ctx context.Context, req gen.UpdateCustomerRequestObject) (gen.UpdateCustomerResponseObject, error) {
	var b models.CustomerUpdate
	switch {
	case req.ApplicationMergePatchPlusJSONBody != nil:
		b = *req.ApplicationMergePatchPlusJSONBody
	case req.JSONBody != nil:
		b = *req.JSONBody
	}
	given := patched(ctx)
	text := func(name string, v *string) customer.Change[string] {
		return customer.Change[string]{Set: given[name], Value: v}
	}
	p := customer.Patch{Email: (*string)(b.Email), Name: text("name", b.Name), Company: text("company", b.Company),
		Phone: text("phone", b.Phone), Notes: text("notes", b.Notes), TaxExempt: b.TaxExempt,
		Address: customer.Change[customer.Address]{Set: given["address"], Value: addressOf(b.Address)}}
	// email and taxExempt are not nullable: the validator refused a null.
	c, err := s.customers.Update(ctx, customerActor(ctx), req.Id, p)
	if taken, ok := s.emailTaken(err); ok {
		return gen.UpdateCustomer409ApplicationProblemPlusJSONResponse{EmailTakenApplicationProblemPlusJSONResponse: taken}, nil
	}
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			return gen.UpdateCustomer400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusNotFound:
			return gen.UpdateCustomer404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.UpdateCustomer200JSONResponse(c.Model()), nil
}

// DeleteCustomer removes a customer without invoices, its saved cards at
// the processor first.
func (s *Server) DeleteCustomer(ctx context.Context, req gen.DeleteCustomerRequestObject) (gen.DeleteCustomerResponseObject, error) {
	err := s.customers.Delete(ctx, customerActor(ctx), req.Id)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusNotFound:
			return gen.DeleteCustomer404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.DeleteCustomer422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	switch {
	case web.OutageOf(err) == web.Processor:
		s.log.WarnContext(ctx, "customer kept: card processor failed removing its saved cards", "customer_id", req.Id.String(), "error", err.Error())
		return gen.DeleteCustomer502ApplicationProblemPlusJSONResponse{BadGatewayApplicationProblemPlusJSONResponse: s.badGatewayBody(badGateway(
			"Card processor unavailable", "The card processor did not confirm the removal of the customer's saved cards, so the customer is kept. Retry later."))}, nil
	case err != nil:
		return nil, err
	}
	return gen.DeleteCustomer204Response{}, nil
}
