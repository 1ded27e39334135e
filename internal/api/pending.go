package api

import (
	"context"
	"net/http"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/httpx"
)

// Operations of later issues: described in openapi.yaml, answered 501 until built.
func pending() error {
	return &httpx.Problem{Kind: "not-implemented", Status: http.StatusNotImplemented, Title: "Not implemented",
		Detail: "This operation is described in the contract but not available yet."}
}

func (s *Server) DeleteSavedCard(context.Context, gen.DeleteSavedCardRequestObject) (gen.DeleteSavedCardResponseObject, error) {
	return nil, pending()
}
