package auth

import (
	"bytes"
	"container/list"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"
)

// TokenLifetime is the life of an access token (expires_in).
const TokenLifetime = 600 * time.Second

// Audience is the aud claim of every access token.
const Audience = "payreq-api"

const tokenType = "at+jwt"

// Claims are what a verified access token says.
type Claims struct {
	KeyID          string
	OrganizationID uuid.UUID
	Permissions    []string
}

// Token verification failures, told apart because their 401 titles differ.
var (
	ErrTokenExpired = errors.New("access token expired")
	ErrTokenInvalid = errors.New("invalid access token")
)

// Tokens signs and verifies access tokens (RFC 9068 JWTs, EdDSA).
type Tokens struct {
	issuer string
	// private signs as it is: given as a jwk.Key, jwx would convert it back
	// to this on every signature, a third of a token's cost.
	private ed25519.PrivateKey
	kid     string
	public  jwk.Set
	now     func() time.Time

	// verified remembers the claims of tokens that passed every check: a
	// client sends one token with many requests, and parsing it and
	// checking its signature is the larger part of a small request's cost.
	verified *verifiedCache
}

type verifiedToken struct {
	claims  Claims
	expires time.Time
}

// maxVerified bounds the remembered tokens: about 2 MB.
const maxVerified = 10000

// verifiedCache holds verified tokens by their SHA-256, the least recently
// used dropped first once it is full: every operation takes constant time,
// however many tokens it holds. An expired token found in it is an
// expired token; Verify never serves one.
type verifiedCache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // of *cachedToken, most recently used first
	entries map[[sha256.Size]byte]*list.Element
}

type cachedToken struct {
	sum [sha256.Size]byte
	verifiedToken
}

func newVerifiedCache(max int) *verifiedCache {
	return &verifiedCache{max: max, order: list.New(), entries: map[[sha256.Size]byte]*list.Element{}}
}

func (c *verifiedCache) get(sum [sha256.Size]byte) (verifiedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[sum]
	if !ok {
		return verifiedToken{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedToken).verifiedToken, true
}

func (c *verifiedCache) put(sum [sha256.Size]byte, v verifiedToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[sum]; ok {
		c.order.MoveToFront(e)
		return
	}
	if c.order.Len() >= c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cachedToken).sum)
	}
	c.entries[sum] = c.order.PushFront(&cachedToken{sum: sum, verifiedToken: v})
}

func (c *verifiedCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// GenerateSigningKey returns a new Ed25519 private key as PKCS#8 PEM.
func GenerateSigningKey() ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// NewTokens reads PKCS#8 PEM Ed25519 keys, one or more PEM blocks in a
// row: the first signs, every one is in the JWKS and verifies, so during a
// rotation (a new key put first, the old one kept until its last token
// expired) tokens of both keep working. issuer is the iss claim (the
// public URL); now is the clock.
func NewTokens(pemKeys []byte, issuer string, now func() time.Time) (*Tokens, error) {
	t := &Tokens{issuer: issuer, public: jwk.NewSet(), now: now, verified: newVerifiedCache(maxVerified)}
	for n := 1; ; n++ {
		block, rest := pem.Decode(pemKeys)
		if block == nil {
			if n == 1 {
				return nil, errors.New("auth: signing key is not PEM")
			}
			if len(bytes.TrimSpace(rest)) > 0 {
				return nil, fmt.Errorf("auth: signing key %d is not PEM", n)
			}
			return t, nil
		}
		pemKeys = rest
		parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("auth: signing key %d: %w", n, err)
		}
		priv, ok := parsed.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("auth: signing key %d is not Ed25519", n)
		}
		private, err := jwk.FromRaw(priv)
		if err != nil {
			return nil, fmt.Errorf("auth: signing key %d: %w", n, err)
		}
		public, err := jwk.PublicKeyOf(private)
		if err != nil {
			return nil, fmt.Errorf("auth: signing key %d: %w", n, err)
		}
		if err := jwk.AssignKeyID(public); err != nil {
			return nil, fmt.Errorf("auth: signing key id: %w", err)
		}
		_ = public.Set(jwk.AlgorithmKey, jwa.EdDSA)
		_ = public.Set(jwk.KeyUsageKey, jwk.ForSignature)
		if n == 1 {
			t.private, t.kid = priv, public.KeyID()
		}
		_ = t.public.AddKey(public)
	}
}

// JWKS is the public key set served at /.well-known/jwks.json.
func (t *Tokens) JWKS() jwk.Set { return t.public }

// Issue signs a token for a key.
func (t *Tokens) Issue(keyID string, org uuid.UUID, permissions []string) (string, error) {
	now := t.now().Truncate(time.Second)
	tok, err := jwt.NewBuilder().
		Issuer(t.issuer).
		Audience([]string{Audience}).
		Subject(keyID).
		IssuedAt(now).
		Expiration(now.Add(TokenLifetime)).
		JwtID(uuid.NewString()).
		Claim("client_id", keyID).
		Claim("org", org.String()).
		Claim("scope", Scope(permissions)).
		Build()
	if err != nil {
		return "", fmt.Errorf("auth: build token: %w", err)
	}
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.TypeKey, tokenType)
	_ = hdr.Set(jws.KeyIDKey, t.kid)
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA, t.private, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", fmt.Errorf("auth: sign token: %w", err)
	}
	return string(signed), nil
}

// Verify checks signature, kid, typ, iss, aud and lifetime, and returns the
// claims. The error is ErrTokenExpired or ErrTokenInvalid. A token seen
// before is only checked for expiry again. The claims' Permissions are
// shared between calls: read them, never change them.
func (t *Tokens) Verify(token string) (Claims, error) {
	sum := sha256.Sum256([]byte(token))
	now := t.now()
	if v, ok := t.verified.get(sum); ok {
		if expired(now, v.expires) {
			return Claims{}, ErrTokenExpired
		}
		return v.claims, nil
	}
	claims, expires, err := t.verify(token)
	if err != nil {
		return Claims{}, err
	}
	t.verified.put(sum, verifiedToken{claims: claims, expires: expires})
	return claims, nil
}

// expired is jwt's rule for exp: whole seconds, no skew.
func expired(now, exp time.Time) bool {
	return !now.Truncate(time.Second).Before(exp.Truncate(time.Second))
}

// verify checks a token in full and returns its claims and expiry.
func (t *Tokens) verify(token string) (Claims, time.Time, error) {
	msg, err := jws.ParseString(token)
	if err != nil || len(msg.Signatures()) != 1 || msg.Signatures()[0].ProtectedHeaders().Type() != tokenType {
		return Claims{}, time.Time{}, ErrTokenInvalid
	}
	tok, err := jwt.ParseString(token,
		jwt.WithKeySet(t.public, jws.WithRequireKid(true)),
		jwt.WithValidate(true),
		jwt.WithClock(jwt.ClockFunc(t.now)),
		jwt.WithIssuer(t.issuer),
		jwt.WithAudience(Audience),
		jwt.WithRequiredClaim("exp"),
		jwt.WithRequiredClaim("jti"),
	)
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired()) {
			return Claims{}, time.Time{}, ErrTokenExpired
		}
		return Claims{}, time.Time{}, ErrTokenInvalid
	}
	orgClaim, _ := tok.Get("org")
	scopeClaim, _ := tok.Get("scope")
	orgText, _ := orgClaim.(string)
	scope, _ := scopeClaim.(string)
	org, err := uuid.Parse(orgText)
	if err != nil || tok.Subject() == "" {
		return Claims{}, time.Time{}, ErrTokenInvalid
	}
	return Claims{KeyID: tok.Subject(), OrganizationID: org, Permissions: strings.Fields(scope)}, tok.Expiration(), nil
}
