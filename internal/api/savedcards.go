package api

import (
	"context"
	"net/http"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/web"
)

// DeleteSavedCard removes a saved card at the processor, then in payreq.
func (s *Server) DeleteSavedCard(ctx context.Context, req gen.DeleteSavedCardRequestObject) (gen.DeleteSavedCardResponseObject, error) {
	err := s.payments.DeleteSavedCard(ctx, principalFrom(ctx).OrganizationID, req.Id, nil)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.DeleteSavedCard404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	switch {
	case web.OutageOf(err) == web.Processor:
		s.log.WarnContext(ctx, "saved card kept: card processor failed", "saved_card_id", req.Id.String(), "error", err.Error())
		return gen.DeleteSavedCard502ApplicationProblemPlusJSONResponse{BadGatewayApplicationProblemPlusJSONResponse: s.badGatewayBody(badGateway(
			"Card processor unavailable", "The card processor did not confirm the removal, so the saved card is kept. Retry later."))}, nil
	case err != nil:
		return nil, err
	}
	return gen.DeleteSavedCard204Response{}, nil
}
