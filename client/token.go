package payreq

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/payreq/payreq/gen/client"
)

// TokenRequestError is an answer other than 200 from POST /oauth/token, such
// as 401 invalid_client for an unknown, wrong or revoked key.
type TokenRequestError struct {
	StatusCode  int
	Code        string // the OAuth error, such as invalid_client
	Description string
}

func (e *TokenRequestError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("payreq: token request answered %d", e.StatusCode)
	}
	return fmt.Sprintf("payreq: token request answered %d %s: %s", e.StatusCode, e.Code, e.Description)
}

// renewTimeout bounds one renewal, which no single caller's context cancels
// since all the callers waiting for it share it.
const renewTimeout = 2 * time.Minute

// tokenSource holds the access token of one API key and renews it, one
// renewal at a time however many goroutines need it.
type tokenSource struct {
	fetch  func(context.Context) (client.TokenResponse, error)
	now    func() time.Time
	margin time.Duration

	mu       sync.Mutex
	token    client.TokenResponse
	renewAt  time.Time
	inflight *renewal
}

// renewal is one token request that callers wait for.
type renewal struct {
	done  chan struct{}
	token client.TokenResponse
	err   error
}

func (s *tokenSource) current(ctx context.Context) (client.TokenResponse, error) {
	return s.get(ctx, "")
}

// get returns a token that is not due for renewal and is not refused, the
// access token the server has just answered 401 to (empty: none).
func (s *tokenSource) get(ctx context.Context, refused string) (client.TokenResponse, error) {
	s.mu.Lock()
	if s.token.AccessToken != "" && s.token.AccessToken != refused && s.now().Before(s.renewAt) {
		tok := s.token
		s.mu.Unlock()
		return tok, nil
	}
	r := s.inflight
	if r == nil {
		r = &renewal{done: make(chan struct{})}
		s.inflight = r
		go s.renew(context.WithoutCancel(ctx), r)
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.token, r.err
	case <-ctx.Done():
		return client.TokenResponse{}, ctx.Err()
	}
}

func (s *tokenSource) renew(ctx context.Context, r *renewal) {
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	asked := s.now()
	tok, err := s.fetch(ctx)
	s.mu.Lock()
	if err == nil {
		life := time.Duration(tok.ExpiresIn) * time.Second
		s.token, s.renewAt = tok, asked.Add(life-min(s.margin, life/2))
	}
	s.inflight = nil
	s.mu.Unlock()
	r.token, r.err = tok, err
	close(r.done)
}

// requestToken exchanges the key for a token (client credentials, form body).
func requestToken(ctx context.Context, api *client.ClientWithResponses, keyID, secret string) (client.TokenResponse, error) {
	grant := "client_credentials"
	resp, err := api.CreateTokenWithFormdataBodyWithResponse(ctx, client.TokenRequest{
		GrantType: &grant, ClientId: &keyID, ClientSecret: &secret,
	})
	if err != nil {
		return client.TokenResponse{}, fmt.Errorf("payreq: token request: %w", err)
	}
	if resp.StatusCode() == http.StatusOK && resp.JSON200 != nil && resp.JSON200.AccessToken != "" {
		return *resp.JSON200, nil
	}
	e := &TokenRequestError{StatusCode: resp.StatusCode()}
	for _, te := range []*client.TokenError{resp.JSON400, resp.JSON401, resp.JSON413, resp.JSON415, resp.JSON429} {
		if te != nil {
			e.Code, e.Description = string(te.Error), te.ErrorDescription
		}
	}
	return client.TokenResponse{}, e
}
