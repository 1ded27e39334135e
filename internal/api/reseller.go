package api

import (
	"context"
	"errors"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/reseller"
)

// GetPortfolio lists the merchants in the caller's portfolio, ordered by
// name. Only the caller's own organization id is accepted.
func (s *Server) GetPortfolio(ctx context.Context, req gen.GetPortfolioRequestObject) (gen.GetPortfolioResponseObject, error) {
	org := principalFrom(ctx).OrganizationID
	if req.Id != org {
		return gen.GetPortfolio403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: s.forbiddenBody(forbidden("Not your organization",
			"A key reads only its own organization's portfolio: use the organization_id of your token response, "+org.String()+"."))}, nil
	}
	merchants, err := s.resellers.Merchants(ctx, org)
	if err != nil {
		return nil, err
	}
	out := make(gen.GetPortfolio200JSONResponse, len(merchants))
	for i, m := range merchants {
		products := make([]models.Product, len(m.Products))
		for j, p := range m.Products {
			products[j] = models.Product{Key: p.Key, Name: p.Name}
		}
		out[i] = models.PortfolioMerchant{Id: m.ID, Name: m.Name, Status: models.PortfolioMerchantStatus(m.Status), LogoUrl: m.LogoURL, Products: products}
	}
	return out, nil
}

// ListApplications answers one page of the caller's applications, newest
// first, with the next page's address in the Link header.
func (s *Server) ListApplications(ctx context.Context, req gen.ListApplicationsRequestObject) (gen.ListApplicationsResponseObject, error) {
	pg := pageOf(req.Params.Limit, req.Params.Cursor)
	var stage *string
	if req.Params.Stage != nil {
		v := string(*req.Params.Stage)
		stage = &v
	}
	apps, next, err := s.resellers.Applications(ctx, principalFrom(ctx).OrganizationID, stage, pg.limit, pg.cursor)
	if errors.Is(err, keyset.ErrInvalid) {
		return gen.ListApplications400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	resp := gen.ListApplications200JSONResponse{Body: make([]models.Application, len(apps))}
	for i, a := range apps {
		resp.Body[i] = a.Model()
	}
	fs := filters{}
	fs.text("stage", stage)
	resp.Headers.Link = s.nextLink("/applications", fs, pg, next)
	return resp, nil
}

// GetApplication reads one of the caller's applications; others' ids are 404.
func (s *Server) GetApplication(ctx context.Context, req gen.GetApplicationRequestObject) (gen.GetApplicationResponseObject, error) {
	a, err := s.resellers.Application(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if errors.Is(err, reseller.ErrNotFound) {
		return gen.GetApplication404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFoundBody("application")}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetApplication200JSONResponse(a.Model()), nil
}
