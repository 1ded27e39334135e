package api

import (
	"context"
	"net/http"

	"github.com/payreq/payreq/gen"
)

// ListLocations lists the caller's locations ordered by name.
func (s *Server) ListLocations(ctx context.Context, _ gen.ListLocationsRequestObject) (gen.ListLocationsResponseObject, error) {
	locs, err := s.directory.Locations(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	out := make(gen.ListLocations200JSONResponse, len(locs))
	for i, l := range locs {
		out[i] = l.Model()
	}
	return out, nil
}

// GetLocation reads one of the caller's locations; others' ids are 404.
func (s *Server) GetLocation(ctx context.Context, req gen.GetLocationRequestObject) (gen.GetLocationResponseObject, error) {
	loc, err := s.directory.Location(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetLocation404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetLocation200JSONResponse(loc.Model()), nil
}

// ListAccounts lists the caller's MIDs ordered by mid, optionally of one location.
func (s *Server) ListAccounts(ctx context.Context, req gen.ListAccountsRequestObject) (gen.ListAccountsResponseObject, error) {
	accounts, err := s.directory.MerchantAccounts(ctx, principalFrom(ctx).OrganizationID, req.Params.LocationId)
	if err != nil {
		return nil, err
	}
	out := make(gen.ListAccounts200JSONResponse, len(accounts))
	for i, a := range accounts {
		out[i] = a.Model()
	}
	return out, nil
}
