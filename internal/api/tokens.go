package api

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/optional"
)

// CreateToken exchanges an API key for an access token. Credentials come from
// the body (form or JSON) or from HTTP Basic, never from both.
func (s *Server) CreateToken(ctx context.Context, req gen.CreateTokenRequestObject) (gen.CreateTokenResponseObject, error) {
	cl, _ := ctx.Value(clientKey).(client)
	body := req.JSONBody
	if body == nil {
		body = req.FormdataBody
	}
	if body == nil {
		return gen.CreateToken415JSONResponse{Error: models.TokenErrorErrorInvalidRequest,
			ErrorDescription: "Send the token request as application/x-www-form-urlencoded or application/json."}, nil
	}
	creds := auth.Credentials{GrantType: optional.Value(body.GrantType), ClientID: optional.Value(body.ClientId), ClientSecret: optional.Value(body.ClientSecret)}
	if cl.basic {
		if creds.ClientID != "" || creds.ClientSecret != "" {
			return gen.CreateToken400JSONResponse{Error: models.TokenErrorErrorInvalidRequest,
				ErrorDescription: "Send the credentials either with HTTP Basic or in the body, not both."}, nil
		}
		creds.ClientID, creds.ClientSecret = cl.basicID, cl.basicSecret
	}
	tok, err := s.auth.Exchange(ctx, creds)
	var te *auth.TokenError
	if errors.As(err, &te) {
		body := models.TokenError{Error: models.TokenErrorError(te.Code), ErrorDescription: te.Description}
		switch te.Status {
		case 401:
			var h gen.CreateToken401ResponseHeaders
			if cl.basic {
				challenge := `Basic realm="payreq"`
				h.WWWAuthenticate = &challenge
			}
			return gen.CreateToken401JSONResponse{Body: body, Headers: h}, nil
		default:
			return gen.CreateToken400JSONResponse(body), nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.CreateToken200JSONResponse{
		Body: models.TokenResponse{
			AccessToken:    tok.AccessToken,
			TokenType:      models.TokenResponseTokenTypeBearer,
			ExpiresIn:      int(auth.TokenLifetime.Seconds()),
			Scope:          auth.Scope(tok.Permissions),
			OrganizationId: tok.OrganizationID,
		},
		Headers: gen.CreateToken200ResponseHeaders{CacheControl: "no-store"},
	}, nil
}

// GetJwks publishes the public keys that verify access tokens.
func (s *Server) GetJwks(ctx context.Context, _ gen.GetJwksRequestObject) (gen.GetJwksResponseObject, error) {
	raw, err := json.Marshal(s.auth.Tokens.JWKS())
	if err != nil {
		return nil, err
	}
	var set models.Jwks
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, err
	}
	return gen.GetJwks200JSONResponse(set), nil
}
