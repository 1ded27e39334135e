package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
)

// FinalizePaymentRequest opens a draft: its pay link made and, unless told
// otherwise, sent.
func (s *Server) FinalizePaymentRequest(ctx context.Context, req gen.FinalizePaymentRequestRequestObject) (gen.FinalizePaymentRequestResponseObject, error) {
	var b models.FinalizePaymentRequest
	if req.Body != nil {
		b = *req.Body
	}
	p := principalFrom(ctx)
	inv, err := s.invoices.Finalize(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, req.Id, b.Send, b.SendAt)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			return gen.FinalizePaymentRequest400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusNotFound:
			return gen.FinalizePaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.FinalizePaymentRequest422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return invoiceAnswer{status: http.StatusOK, body: s.invoiceBody(inv, true)}, nil
}

// DeletePaymentRequest removes a draft.
func (s *Server) DeletePaymentRequest(ctx context.Context, req gen.DeletePaymentRequestRequestObject) (gen.DeletePaymentRequestResponseObject, error) {
	p := principalFrom(ctx)
	err := s.invoices.Delete(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, req.Id)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusNotFound:
			return gen.DeletePaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.DeletePaymentRequest422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.DeletePaymentRequest204Response{}, nil
}

// UpdatePaymentRequest changes an invoice by a merge patch: the members the
// body names (keepMembers read them) replace the invoice's.
func (s *Server) UpdatePaymentRequest(ctx context.Context, req gen.UpdatePaymentRequestRequestObject) (gen.UpdatePaymentRequestResponseObject, error) {
	var b models.PaymentRequestChange
	switch {
	case req.ApplicationMergePatchPlusJSONBody != nil:
		b = *req.ApplicationMergePatchPlusJSONBody
	case req.JSONBody != nil:
		b = *req.JSONBody
	}
	c := invoice.Change{Given: map[string]bool{}, IfMatch: ifMatch(req.Params.IfMatch), To: invoice.Draft{
		InvoiceNumber: optional.Value(b.InvoiceNumber), PONumber: b.PoNumber, CustomerName: b.CustomerName,
		CustomerCompany: b.CustomerCompany, CustomerEmail: b.CustomerEmail, CustomerPhone: b.CustomerPhone,
		Delivery: (*string)(b.Delivery), Memo: b.Memo, Lines: linesOf(b.Lines), Reminders: b.Reminders,
	}}
	c.To.CustomerID = b.CustomerId
	if b.MerchantAccountId != nil {
		c.To.MerchantAccountID = *b.MerchantAccountId
	}
	if b.Amount != nil {
		c.To.Amount = b.Amount.Decimal
	}
	if b.DueDate != nil {
		c.To.DueDate = &b.DueDate.Time
	}
	given, _ := ctx.Value(membersKey{}).(map[string]bool)
	for _, name := range invoice.Changeable {
		if given[name] {
			c.Given[name] = true
		}
	}
	p := principalFrom(ctx)
	inv, err := s.invoices.Update(ctx, invoice.Actor{OrganizationID: p.OrganizationID, Name: p.KeyName}, req.Id, c)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			return gen.UpdatePaymentRequest400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusNotFound:
			return gen.UpdatePaymentRequest404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusPreconditionFailed:
			return gen.UpdatePaymentRequest412ApplicationProblemPlusJSONResponse{PreconditionFailedApplicationProblemPlusJSONResponse: gen.PreconditionFailedApplicationProblemPlusJSONResponse(s.body(r))}, nil
		case http.StatusUnprocessableEntity:
			return gen.UpdatePaymentRequest422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return invoiceAnswer{status: http.StatusOK, body: s.invoiceBody(inv, true)}, nil
}

// ifMatch is what If-Match asks: nil for any version (absent, or *),
// else the versions its entity tags name ("3", compared strongly: a weak
// tag, or one that is no version, names none).
func ifMatch(h *string) []int {
	if h == nil || strings.TrimSpace(*h) == "*" {
		return nil
	}
	versions := []int{}
	for _, tag := range strings.Split(*h, ",") {
		tag = strings.TrimSpace(tag)
		if len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
			continue
		}
		digits := tag[1 : len(tag)-1]
		if n, err := strconv.Atoi(digits); err == nil && n > 0 && strconv.Itoa(n) == digits {
			versions = append(versions, n)
		}
	}
	return versions
}

// membersKey holds, in a merge patch's request context, the names of the
// members its body gives (null ones too), which the decoded body cannot
// tell from those left out.
type membersKey struct{}

// keepMembers reads the names of the top-level members of a JSON object
// body into the request's context and leaves the body to be read again.
// A body that is no JSON object names none; validation refuses it.
func keepMembers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var members map[string]json.RawMessage
		if json.Unmarshal(body, &members) == nil {
			given := make(map[string]bool, len(members))
			for name := range members {
				given[name] = true
			}
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), membersKey{}, given)))
		}
		return next(c)
	}
}
