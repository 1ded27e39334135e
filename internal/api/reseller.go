package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/httpx"
	"github.com/payreq/payreq/internal/reseller"
)

// defaultPageSize is the page size of lists when the client sends no limit.
const defaultPageSize = 25

// GetPortfolio lists the merchants in the caller's portfolio, ordered by
// name. Only the caller's own organization id is accepted.
func (s *Server) GetPortfolio(ctx context.Context, req gen.GetPortfolioRequestObject) (gen.GetPortfolioResponseObject, error) {
	org := principalFrom(ctx).OrganizationID
	if req.Id != org {
		p := &httpx.Problem{Kind: httpx.KindForbidden, Status: http.StatusForbidden, Title: "Not your organization",
			Detail: "A key reads only its own organization's portfolio: use the organization_id of your token response, " + org.String() + "."}
		return gen.GetPortfolio403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: gen.ForbiddenApplicationProblemPlusJSONResponse(s.problemBody(p))}, nil
	}
	merchants, err := s.portfolio.Merchants(ctx, org)
	if err != nil {
		return nil, err
	}
	out := make(gen.GetPortfolio200JSONResponse, len(merchants))
	for i, m := range merchants {
		products := make([]gen.Product, len(m.Products))
		for j, p := range m.Products {
			products[j] = gen.Product{Key: p.Key, Name: p.Name}
		}
		out[i] = gen.PortfolioMerchant{Id: m.ID, Name: m.Name, Status: gen.PortfolioMerchantStatus(m.Status), LogoUrl: m.LogoURL, Products: products}
	}
	return out, nil
}

// ListApplications answers one page of the caller's applications, newest
// first, with the next page's address in the Link header.
func (s *Server) ListApplications(ctx context.Context, req gen.ListApplicationsRequestObject) (gen.ListApplicationsResponseObject, error) {
	limit := defaultPageSize
	if req.Params.Limit != nil {
		limit = int(*req.Params.Limit)
	}
	var stage *string
	if req.Params.Stage != nil {
		v := string(*req.Params.Stage)
		stage = &v
	}
	after := ""
	if req.Params.Cursor != nil {
		after = *req.Params.Cursor
	}
	apps, next, err := s.applications.List(ctx, principalFrom(ctx).OrganizationID, stage, limit, after)
	if errors.Is(err, reseller.ErrInvalidCursor) {
		p := httpx.Validation("query.cursor", "is not a cursor of this list; follow the Link header of the previous page as it is")
		return gen.ListApplications400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: gen.BadRequestApplicationProblemPlusJSONResponse(s.problemBody(p))}, nil
	}
	if err != nil {
		return nil, err
	}
	resp := gen.ListApplications200JSONResponse{Body: make([]gen.Application, len(apps))}
	for i, a := range apps {
		resp.Body[i] = applicationBody(a)
	}
	if next != "" {
		q := url.Values{"limit": {strconv.Itoa(limit)}, "cursor": {next}}
		if stage != nil {
			q.Set("stage", *stage)
		}
		link := "<" + s.publicURL + "/applications?" + q.Encode() + `>; rel="next"`
		resp.Headers.Link = &link
	}
	return resp, nil
}

// GetApplication reads one of the caller's applications; others' ids are 404.
func (s *Server) GetApplication(ctx context.Context, req gen.GetApplicationRequestObject) (gen.GetApplicationResponseObject, error) {
	a, err := s.applications.Get(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if errors.Is(err, reseller.ErrNotFound) {
		return gen.GetApplication404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: gen.NotFoundApplicationProblemPlusJSONResponse(s.problemBody(httpx.NotFound("application")))}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetApplication200JSONResponse(applicationBody(a)), nil
}

func applicationBody(a reseller.Application) gen.Application {
	b := a.Business
	owners := make([]gen.ApplicationOwner, len(a.Owners))
	for i, o := range a.Owners {
		owners[i] = gen.ApplicationOwner{Name: o.Name, Title: o.Title, OwnershipPercent: o.OwnershipPercent, SsnLastFour: o.SSNLastFour}
	}
	history := make([]gen.ApplicationHistoryEntry, len(a.History))
	for i, h := range a.History {
		history[i] = gen.ApplicationHistoryEntry{Stage: gen.ApplicationStage(h.Stage), At: h.At, Note: h.Note}
	}
	return gen.Application{
		Id: a.ID, Stage: gen.ApplicationStage(a.Stage), SubmittedAt: a.SubmittedAt, UpdatedAt: a.UpdatedAt,
		Business: gen.ApplicationBusiness{
			LegalName: b.LegalName, DbaName: b.DBAName, EntityType: b.EntityType, TaxIdLastFour: b.TaxIDLastFour,
			Phone: b.Phone, Email: b.Email, Website: b.Website,
			Address: gen.Address{AddressLine1: b.Address.Line1, AddressLine2: b.Address.Line2, City: b.Address.City,
				State: b.Address.State, PostalCode: b.Address.PostalCode},
		},
		Owners:  owners,
		Bank:    gen.ApplicationBank{RoutingNumber: a.Bank.RoutingNumber, AccountLastFour: a.Bank.AccountLastFour},
		History: history,
	}
}
