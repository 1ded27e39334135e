package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/rule"
	"github.com/payreq/payreq/internal/webhook"
)

// ListEvents lists the organization's events newest first, a page at a
// time, those the key may read.
func (s *Server) ListEvents(ctx context.Context, req gen.ListEventsRequestObject) (gen.ListEventsResponseObject, error) {
	q := req.Params
	pg := pageOf(q.Limit, q.Cursor)
	f := event.Filter{Type: (*string)(q.Type), CreatedFrom: q.CreatedFrom, CreatedTo: q.CreatedTo}
	p := principalFrom(ctx)
	list, next, err := s.events.List(ctx, p.OrganizationID, p.Permissions, f, pg.limit, pg.cursor)
	if r := refusal(err); r != nil && r.status == http.StatusForbidden {
		return gen.ListEvents403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: s.forbiddenBody(r)}, nil
	}
	if errors.Is(err, keyset.ErrInvalid) {
		return gen.ListEvents400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(invalidCursor())}, nil
	}
	if err != nil {
		return nil, err
	}
	out := gen.ListEvents200JSONResponse{Body: make([]models.Event, len(list))}
	for i, e := range list {
		if err := out.Body[i].UnmarshalJSON(e.JSON()); err != nil {
			return nil, err
		}
	}
	fs := filters{}
	fs.text("type", f.Type)
	fs.time("createdFrom", f.CreatedFrom)
	fs.time("createdTo", f.CreatedTo)
	out.Headers.Link = s.nextLink("/events", fs, pg, next)
	return out, nil
}

// GetEvent reads one event with its deliveries.
func (s *Server) GetEvent(ctx context.Context, req gen.GetEventRequestObject) (gen.GetEventResponseObject, error) {
	p := principalFrom(ctx)
	e, err := s.events.Get(ctx, p.OrganizationID, p.Permissions, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetEvent404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	deliveries, err := s.webhooks.Deliveries(ctx, e.ID)
	if err != nil {
		return nil, err
	}
	ds := make([]models.EventDelivery, len(deliveries))
	for i, d := range deliveries {
		ds[i] = models.EventDelivery{EndpointId: d.EndpointID, Status: models.EventDeliveryStatus(d.Status), Attempts: int32(d.Attempts),
			LastError: d.LastError, LastAttemptAt: d.LastAttemptAt, DeliveredAt: d.DeliveredAt}
		if d.LastStatusCode != nil {
			code := int32(*d.LastStatusCode)
			ds[i].LastStatusCode = &code
		}
	}
	// The event as delivered, and its deliveries beside its other keys.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.JSON(), &fields); err != nil {
		return nil, err
	}
	if fields["deliveries"], err = json.Marshal(ds); err != nil {
		return nil, err
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var out gen.GetEvent200JSONResponse
	if err := out.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return out, nil
}

// webhookActor is the key as package webhook checks what it may manage;
// keys are not audited (the audit log is the portal's members').
func webhookActor(p auth.Principal) webhook.Actor {
	return webhook.Actor{OrganizationID: p.OrganizationID, Permissions: p.Permissions}
}

// RedeliverEvent queues the event again for its endpoints.
func (s *Server) RedeliverEvent(ctx context.Context, req gen.RedeliverEventRequestObject) (gen.RedeliverEventResponseObject, error) {
	p := principalFrom(ctx)
	err := s.webhooks.Redeliver(ctx, webhookActor(p), req.Id)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusForbidden:
			return gen.RedeliverEvent403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: s.forbiddenBody(r)}, nil
		case http.StatusNotFound:
			return gen.RedeliverEvent404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusTooManyRequests:
			return gen.RedeliverEvent429ApplicationProblemPlusJSONResponse{Body: s.body(r),
				Headers: gen.RedeliverEvent429ResponseHeaders{RetryAfter: r.retryAfter()}}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.RedeliverEvent202JSONResponse{EventId: req.Id}, nil
}

func endpointBody(e webhook.Endpoint) models.WebhookEndpoint {
	types := make([]models.EventTypeOrAll, len(e.EventTypes))
	for i, t := range e.EventTypes {
		types[i] = models.EventTypeOrAll(t)
	}
	return models.WebhookEndpoint{Id: e.ID, Url: e.URL, Description: e.Description, EventTypes: types,
		Status: models.WebhookEndpointStatus(e.Status), DisabledReason: e.DisabledReason, CreatedAt: e.CreatedAt}
}

func withSecret(e webhook.Endpoint, secret string) models.WebhookEndpointWithSecret {
	b := endpointBody(e)
	return models.WebhookEndpointWithSecret{Id: b.Id, Url: b.Url, Description: b.Description, EventTypes: b.EventTypes,
		Status: b.Status, DisabledReason: b.DisabledReason, CreatedAt: b.CreatedAt, Secret: secret}
}

// eventTypes is a list of event types as stored: ["*"] when it holds "*".
func eventTypes(in []models.EventTypeOrAll) []string {
	out := make([]string, 0, len(in))
	for _, t := range in {
		if t == "*" {
			return []string{"*"}
		}
		if !slices.Contains(out, string(t)) {
			out = append(out, string(t))
		}
	}
	return out
}

// ListWebhookEndpoints lists the organization's endpoints, oldest first.
func (s *Server) ListWebhookEndpoints(ctx context.Context, _ gen.ListWebhookEndpointsRequestObject) (gen.ListWebhookEndpointsResponseObject, error) {
	list, err := s.webhooks.Endpoints(ctx, principalFrom(ctx).OrganizationID)
	if err != nil {
		return nil, err
	}
	out := make(gen.ListWebhookEndpoints200JSONResponse, len(list))
	for i, e := range list {
		out[i] = endpointBody(e)
	}
	return out, nil
}

// logURLRefused logs what an endpoint URL's refusal (err, a 400) holds
// beyond the answer: what its host resolved to, which the answer never
// tells.
func (s *Server) logURLRefused(err error) {
	if e := rule.As(err); e != nil && error(e) != err {
		s.log.Info("webhook endpoint url refused", "error", err.Error())
	}
}

// CreateWebhookEndpoint registers an endpoint and answers its secret, once;
// the same request with its Idempotency-Key again answers the endpoint it
// made, as it is now.
func (s *Server) CreateWebhookEndpoint(ctx context.Context, req gen.CreateWebhookEndpointRequestObject) (gen.CreateWebhookEndpointResponseObject, error) {
	b, p := req.Body, principalFrom(ctx)
	e, secret, replayed, err := s.webhooks.Create(ctx, webhookActor(p), webhook.NewEndpoint{
		URL: b.Url, Description: b.Description, EventTypes: eventTypes(b.EventTypes)}, req.Params.IdempotencyKey)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			s.logURLRefused(err)
			return gen.CreateWebhookEndpoint400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusForbidden:
			return gen.CreateWebhookEndpoint403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: s.forbiddenBody(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.CreateWebhookEndpoint422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if replayed {
		return gen.CreateWebhookEndpoint200JSONResponse{Body: withSecret(e, secret),
			Headers: gen.CreateWebhookEndpoint200ResponseHeaders{IdempotentReplayed: "true"}}, nil
	}
	return gen.CreateWebhookEndpoint201JSONResponse(withSecret(e, secret)), nil
}

// GetWebhookEndpoint reads one endpoint.
func (s *Server) GetWebhookEndpoint(ctx context.Context, req gen.GetWebhookEndpointRequestObject) (gen.GetWebhookEndpointResponseObject, error) {
	e, err := s.webhooks.Endpoint(ctx, principalFrom(ctx).OrganizationID, req.Id)
	if r := refusal(err); r != nil && r.status == http.StatusNotFound {
		return gen.GetWebhookEndpoint404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetWebhookEndpoint200JSONResponse(endpointBody(e)), nil
}

// UpdateWebhookEndpoint changes what the request names.
func (s *Server) UpdateWebhookEndpoint(ctx context.Context, req gen.UpdateWebhookEndpointRequestObject) (gen.UpdateWebhookEndpointResponseObject, error) {
	b := req.Body
	c := webhook.Change{URL: b.Url, Status: (*string)(b.Status), DisabledReason: "Disabled through the API."}
	if b.Description != nil {
		if *b.Description == "" {
			c.ClearDescription = true
		} else {
			c.Description = b.Description
		}
	}
	if b.EventTypes != nil {
		c.EventTypes = eventTypes(*b.EventTypes)
	}
	p := principalFrom(ctx)
	e, err := s.webhooks.Update(ctx, webhookActor(p), req.Id, c)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusBadRequest:
			s.logURLRefused(err)
			return gen.UpdateWebhookEndpoint400ApplicationProblemPlusJSONResponse{BadRequestApplicationProblemPlusJSONResponse: s.badRequest(r)}, nil
		case http.StatusForbidden:
			return gen.UpdateWebhookEndpoint403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: s.forbiddenBody(r)}, nil
		case http.StatusNotFound:
			return gen.UpdateWebhookEndpoint404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.UpdateWebhookEndpoint200JSONResponse(endpointBody(e)), nil
}

// DeleteWebhookEndpoint removes an endpoint.
func (s *Server) DeleteWebhookEndpoint(ctx context.Context, req gen.DeleteWebhookEndpointRequestObject) (gen.DeleteWebhookEndpointResponseObject, error) {
	err := s.webhooks.Delete(ctx, webhookActor(principalFrom(ctx)), req.Id)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusForbidden:
			return gen.DeleteWebhookEndpoint403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: s.forbiddenBody(r)}, nil
		case http.StatusNotFound:
			return gen.DeleteWebhookEndpoint404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.DeleteWebhookEndpoint204Response{}, nil
}

// RotateWebhookSecret gives the endpoint a new secret, answered once; the
// old one keeps signing for expireCurrentInSeconds, a day when absent. The
// same request with its Idempotency-Key again rotates nothing.
func (s *Server) RotateWebhookSecret(ctx context.Context, req gen.RotateWebhookSecretRequestObject) (gen.RotateWebhookSecretResponseObject, error) {
	overlap := webhook.RotationOverlap
	if req.Body != nil && req.Body.ExpireCurrentInSeconds != nil {
		overlap = time.Duration(*req.Body.ExpireCurrentInSeconds) * time.Second
	}
	e, secret, _, err := s.webhooks.RotateSecret(ctx, webhookActor(principalFrom(ctx)), req.Id, overlap, req.Params.IdempotencyKey)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusForbidden:
			return gen.RotateWebhookSecret403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: s.forbiddenBody(r)}, nil
		case http.StatusNotFound:
			return gen.RotateWebhookSecret404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusUnprocessableEntity:
			return gen.RotateWebhookSecret422ApplicationProblemPlusJSONResponse{UnprocessableApplicationProblemPlusJSONResponse: s.unprocessableBody(r)}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.RotateWebhookSecret200JSONResponse(withSecret(e, secret)), nil
}

// PingWebhookEndpoint sends a webhook.ping event to the endpoint alone.
func (s *Server) PingWebhookEndpoint(ctx context.Context, req gen.PingWebhookEndpointRequestObject) (gen.PingWebhookEndpointResponseObject, error) {
	id, err := s.webhooks.Ping(ctx, webhookActor(principalFrom(ctx)), req.Id)
	if r := refusal(err); r != nil {
		switch r.status {
		case http.StatusForbidden:
			return gen.PingWebhookEndpoint403ApplicationProblemPlusJSONResponse{ForbiddenApplicationProblemPlusJSONResponse: s.forbiddenBody(r)}, nil
		case http.StatusNotFound:
			return gen.PingWebhookEndpoint404ApplicationProblemPlusJSONResponse{NotFoundApplicationProblemPlusJSONResponse: s.notFound(r)}, nil
		case http.StatusTooManyRequests:
			return gen.PingWebhookEndpoint429ApplicationProblemPlusJSONResponse{Body: s.body(r),
				Headers: gen.PingWebhookEndpoint429ResponseHeaders{RetryAfter: r.retryAfter()}}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.PingWebhookEndpoint202JSONResponse{EventId: id}, nil
}
