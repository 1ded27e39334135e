package api

import (
	"context"
	"time"

	"github.com/payreq/payreq/gen"
)

// GetHealth answers while the process is up.
func (s *Server) GetHealth(context.Context, gen.GetHealthRequestObject) (gen.GetHealthResponseObject, error) {
	return gen.GetHealth200JSONResponse{Status: gen.HealthStatusOk}, nil
}

// GetReadiness answers 200 only while the database answers.
func (s *Server) GetReadiness(ctx context.Context, _ gen.GetReadinessRequestObject) (gen.GetReadinessResponseObject, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.db.PingContext(ctx); err != nil {
		s.log.Warn("readiness: database unreachable", "error", err.Error())
		return gen.GetReadiness503ApplicationProblemPlusJSONResponse(s.body(unavailable("The database is not reachable."))), nil
	}
	return gen.GetReadiness200JSONResponse{Status: gen.HealthStatusOk}, nil
}
