package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/vault"
	"github.com/payreq/payreq/internal/webhook"
)

// rotated is a data directory with the first instance's secrets, one of
// them replaced: a new key or pepper put first, the old one kept after it
// (or, with keepOld false, only the new one).
func rotated(t *testing.T, from, name string, keepOld bool) string {
	t.Helper()
	dir := t.TempDir()
	fresh := t.TempDir()
	if _, err := app.InitSecrets(fresh); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{app.SigningKeyName, app.PepperName, app.EncryptionKeyName} {
		b, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			t.Fatal(err)
		}
		if n == name {
			nb, err := os.ReadFile(filepath.Join(fresh, n))
			if err != nil {
				t.Fatal(err)
			}
			if keepOld {
				b = append(nb, b...)
			} else {
				b = nb
			}
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func kidOf(t *testing.T, token string) string {
	t.Helper()
	header, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Kid string }
	json.Unmarshal(raw, &h)
	return h.Kid
}

// A new signing key put first on a second instance: it signs there, both
// keys are in its JWKS, and the first instance's tokens still work on it.
func TestSigningKeyRotation(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	first := t.TempDir()
	a := apitest.New(t, dsn, apitest.Options{DataDir: first, PublicURL: "http://payreq.test"})
	seed := a.Seed()
	old := a.Token(seed.Merchant.KeyID, seed.Merchant.Secret)
	b := apitest.New(t, dsn, apitest.Options{DataDir: rotated(t, first, app.SigningKeyName, true), PublicURL: "http://payreq.test"})
	var jwks struct{ Keys []struct{ Kid string } }
	b.Do(apitest.Request{Method: "GET", Path: "/.well-known/jwks.json"}).JSON(t, &jwks)
	apitest.Want(t, "keys in the JWKS", len(jwks.Keys), 2)
	apitest.Want(t, "the old key's token on the new instance", b.Do(apitest.Request{Method: "GET", Path: "/locations", Token: old}).StatusCode, http.StatusOK)
	fresh := b.Token(seed.Merchant.KeyID, seed.Merchant.Secret)
	if kidOf(t, fresh) == kidOf(t, old) || kidOf(t, fresh) != jwks.Keys[0].Kid {
		t.Errorf("the new instance signs with kid %s (old %s, first in its JWKS %s)", kidOf(t, fresh), kidOf(t, old), jwks.Keys[0].Kid)
	}
	apitest.Want(t, "its own token", b.Do(apitest.Request{Method: "GET", Path: "/locations", Token: fresh}).StatusCode, http.StatusOK)
}

// A new pepper put first: keys and pay links made under the old one keep
// working; a key's next exchange fingerprints it under the new pepper, so
// an instance with the new pepper alone takes it.
func TestPepperRotation(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	first := t.TempDir()
	a := apitest.New(t, dsn, apitest.Options{DataDir: first})
	m := apitest.NewMerchant(t, a)
	inv := m.MustCreate(t, m.Body("PEP-1", "10.00"))
	seed := a.Seed()
	both := rotated(t, first, app.PepperName, true)
	b := apitest.New(t, dsn, apitest.Options{DataDir: both})
	apitest.Want(t, "the old pay link on the new instance", b.Visit(t, "GET", apitest.PayPath(t, inv), nil, nil).StatusCode, http.StatusOK)
	b.Token(seed.Merchant.KeyID, seed.Merchant.Secret) // re-fingerprinted here

	newOnly := t.TempDir()
	for _, n := range []string{app.SigningKeyName, app.EncryptionKeyName} {
		raw, _ := os.ReadFile(filepath.Join(both, n))
		os.WriteFile(filepath.Join(newOnly, n), raw, 0o600)
	}
	raw, _ := os.ReadFile(filepath.Join(both, app.PepperName))
	firstLine, _, _ := strings.Cut(string(raw), "\n")
	os.WriteFile(filepath.Join(newOnly, app.PepperName), []byte(firstLine+"\n"), 0o600)
	c := apitest.New(t, dsn, apitest.Options{DataDir: newOnly})
	c.Token(seed.Merchant.KeyID, seed.Merchant.Secret) // fails the test unless 200
	resp := c.Do(apitest.Request{Method: "POST", Path: "/oauth/token", Body: map[string]string{
		"grant_type": "client_credentials", "client_id": seed.Reseller.KeyID, "client_secret": seed.Reseller.Secret}})
	apitest.Want(t, "a key not exchanged during the rotation, once the old pepper is gone", resp.StatusCode, http.StatusUnauthorized)
}

// A new encryption key put first, then payreq secrets reencrypt's work:
// every tax id, SSN, account number and webhook secret re-sealed once (a
// second run finds nothing), readable with the new key alone; the webhook
// is still signed with its secret.
func TestEncryptionKeyRotation(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	first := t.TempDir()
	a := apitest.New(t, dsn, apitest.Options{DataDir: first})
	m := apitest.NewMerchant(t, a) // seeds applications too
	rc := apitest.NewReceiver(t)
	ep := endpoint(t, a, m.Token, rc.URL, "invoice.created")
	b := apitest.New(t, dsn, apitest.Options{DataDir: rotated(t, first, app.EncryptionKeyName, true)})
	ctx := context.Background()
	apps, err := b.App.Resellers.Reencrypt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := b.App.Webhooks.Reencrypt(ctx, b.App.Vault.Current())
	if err != nil {
		t.Fatal(err)
	}
	if apps == 0 || hooks != 1 {
		t.Errorf("re-sealed %d application values and %d webhook secrets", apps, hooks)
	}
	again, _ := b.App.Resellers.Reencrypt(ctx)
	againHooks, _ := b.App.Webhooks.Reencrypt(ctx, b.App.Vault.Current())
	apitest.Want(t, "re-sealed by a second run", again+againHooks, 0)

	// The new key alone opens everything.
	keyFile, _ := os.ReadFile(filepath.Join(b.App.Config.DataDir, app.EncryptionKeyName))
	newKey, _, _ := strings.Cut(string(keyFile), "\n")
	v, err := vault.New([]byte(newKey + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		ID     uuid.UUID `db:"id"`
		Sealed []byte    `db:"tax_id_encrypted"`
		Key    string    `db:"tax_id_key_id"`
	}
	if err := a.App.DB.Select(&rows, `SELECT id, tax_id_encrypted, tax_id_key_id FROM applications`); err != nil || len(rows) == 0 {
		t.Fatalf("applications: %v", err)
	}
	for _, r := range rows {
		if _, err := v.Open(r.Sealed, r.Key, "application:"+r.ID.String()+":tax_id"); err != nil {
			t.Errorf("application %s: %v", r.ID, err)
		}
	}
	newOnly := t.TempDir()
	for _, n := range []string{app.SigningKeyName, app.PepperName} {
		raw, _ := os.ReadFile(filepath.Join(first, n))
		os.WriteFile(filepath.Join(newOnly, n), raw, 0o600)
	}
	os.WriteFile(filepath.Join(newOnly, app.EncryptionKeyName), []byte(newKey+"\n"), 0o600)
	c := apitest.New(t, dsn, apitest.Options{DataDir: newOnly})
	m.MustCreate(t, m.Body("ENC-1", "10.00"))
	apitest.Deliver(t, c.Webhooks(webhook.WorkerConfig{AllowPrivate: true}))
	verified(t, rc.Hooks(), ep.Secret, true)
	apitest.Want(t, "deliveries", len(rc.Hooks()), 1)
}
