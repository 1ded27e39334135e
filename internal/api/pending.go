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

func (s *Server) ListApplications(context.Context, gen.ListApplicationsRequestObject) (gen.ListApplicationsResponseObject, error) {
	return nil, pending()
}

func (s *Server) GetApplication(context.Context, gen.GetApplicationRequestObject) (gen.GetApplicationResponseObject, error) {
	return nil, pending()
}

func (s *Server) GetPortfolio(context.Context, gen.GetPortfolioRequestObject) (gen.GetPortfolioResponseObject, error) {
	return nil, pending()
}

func (s *Server) ListPaymentRequests(context.Context, gen.ListPaymentRequestsRequestObject) (gen.ListPaymentRequestsResponseObject, error) {
	return nil, pending()
}

func (s *Server) CreatePaymentRequest(context.Context, gen.CreatePaymentRequestRequestObject) (gen.CreatePaymentRequestResponseObject, error) {
	return nil, pending()
}

func (s *Server) GetPaymentRequest(context.Context, gen.GetPaymentRequestRequestObject) (gen.GetPaymentRequestResponseObject, error) {
	return nil, pending()
}

func (s *Server) CancelPaymentRequest(context.Context, gen.CancelPaymentRequestRequestObject) (gen.CancelPaymentRequestResponseObject, error) {
	return nil, pending()
}

func (s *Server) SendPaymentRequest(context.Context, gen.SendPaymentRequestRequestObject) (gen.SendPaymentRequestResponseObject, error) {
	return nil, pending()
}

func (s *Server) DeleteSavedCard(context.Context, gen.DeleteSavedCardRequestObject) (gen.DeleteSavedCardResponseObject, error) {
	return nil, pending()
}
