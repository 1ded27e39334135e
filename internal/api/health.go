package api

import (
	"context"
	"time"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/postgres"
)

// GetHealth answers while the process is up.
func (s *Server) GetHealth(context.Context, gen.GetHealthRequestObject) (gen.GetHealthResponseObject, error) {
	return gen.GetHealth200JSONResponse{Status: models.HealthStatusOk}, nil
}

// GetReadiness answers 200 only while the database answers and takes
// writes: a replica, or a primary in recovery or set read-only (after a
// failover gone wrong), cannot serve payreq; nor can a leader in strict
// synchronous mode with no standby streaming, whose commits wait until
// one holds them (deploy/ha).
func (s *Server) GetReadiness(ctx context.Context, _ gen.GetReadinessRequestObject) (gen.GetReadinessResponseObject, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	state, err := postgres.Writes(ctx, s.db)
	if err != nil {
		s.log.Warn("readiness: database unreachable", "error", err.Error())
		return gen.GetReadiness503ApplicationProblemPlusJSONResponse(s.body(unavailable("The database is not reachable."))), nil
	}
	switch state {
	case postgres.ReadOnly:
		s.log.Warn("readiness: database is read-only")
		return gen.GetReadiness503ApplicationProblemPlusJSONResponse(s.body(unavailable("The database is read-only: a replica, or a primary in recovery."))), nil
	case postgres.NoStandby:
		s.log.Warn("readiness: no synchronous standby streaming")
		return gen.GetReadiness503ApplicationProblemPlusJSONResponse(s.body(unavailable("The database takes no commit: no synchronous standby is streaming from it."))), nil
	}
	return gen.GetReadiness200JSONResponse{Status: models.HealthStatusOk}, nil
}
