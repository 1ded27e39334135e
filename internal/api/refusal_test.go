package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/web"
)

// unlisted answers GetCardPayment with err, which that handler does not
// list (it lists NotFound only).
type unlisted struct {
	gen.StrictServerInterface
	err error
}

func (u unlisted) GetCardPayment(context.Context, gen.GetCardPaymentRequestObject) (gen.GetCardPaymentResponseObject, error) {
	return nil, u.err
}

// A refusal no handler lists, returned through the strict handler, is its
// problem document at its kind's status (rule.Kind.Status), never a 500;
// so is an outage of the card processor, a 503 with the one Retry-After.
func TestUnlistedRefusalIsItsProblem(t *testing.T) {
	s := &Server{publicURL: "http://payreq.test"}
	for _, c := range []struct {
		err        error
		status     int
		kind       string
		title      string
		retryAfter string
	}{
		{rule.New(rule.Conflict, "", "Card payment busy", "Another change is under way."), 422, kindUnprocessable, "Card payment busy", ""},
		{rule.New(rule.Unprocessable, "", "Not allowed", "A rule refuses it."), 422, kindUnprocessable, "Not allowed", ""},
		{rule.New(rule.KeyReused, "", "Idempotency key reused", "Used before."), 422, kindKeyReused, "Idempotency key reused", ""},
		{&rule.Error{Kind: rule.Forbidden, Title: "Permission required", Message: "It needs payments.refund."}, 403, kindForbidden, "Permission required", ""},
		{&rule.Error{Kind: rule.Limited, Title: "Too many", Message: "Too many just now.", RetryAfter: 90 * time.Second}, 429, kindRateLimited, "Too many requests", "90"},
		{rule.InvalidField("amount", "must be more than 0"), 400, kindValidation, "Invalid request", ""},
		{rule.New(rule.Changed, "", "Invoice changed", "At version 3."), 412, kindPreconditionFailed, "Invoice changed", ""},
		{rule.New(rule.Kind(99), "", "Some refusal", "Of a kind to come."), 422, kindUnprocessable, "Some refusal", ""},
		{fmt.Errorf("charge: %w", processor.ErrUnavailable), 503, kindUnavailable, "Service unavailable", strconv.Itoa(web.RetryAfter)},
	} {
		t.Run(c.title, func(t *testing.T) {
			e := echo.New()
			e.HTTPErrorHandler = s.handleError
			rec := httptest.NewRecorder()
			ctx := e.NewContext(httptest.NewRequest(http.MethodGet, "/card-payments/"+uuid.NewString(), nil), rec)
			if err := gen.NewStrictHandler(unlisted{err: fmt.Errorf("payment: reading: %w", c.err)}, nil).GetCardPayment(ctx, uuid.New()); err != nil {
				e.HTTPErrorHandler(err, ctx)
			}
			if rec.Code != c.status || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s %s, want %d application/problem+json", rec.Code, rec.Header().Get("Content-Type"), rec.Body, c.status)
			}
			var p models.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Type != "http://payreq.test/problems/"+c.kind || p.Title != c.title || int(p.Status) != c.status || p.Detail == "" {
				t.Errorf("problem %+v, want type %s, title %q", p, c.kind, c.title)
			}
			if got := rec.Header().Get("Retry-After"); got != c.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, c.retryAfter)
			}
		})
	}
}
