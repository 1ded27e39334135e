// Package app opens what every payreq command works with: the database
// (migrated), the server's secrets and the domain services.
package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/devdb"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/secretfile"
	"github.com/payreq/payreq/internal/vault"
)

// App is the opened service.
type App struct {
	Config       config.Config
	DB           *sqlx.DB
	Auth         *auth.Service
	Keys         *auth.Keys
	Directory    *directory.Directory
	Applications *reseller.Applications
	Invoices     *invoice.Store
	Now          func() time.Time
}

// Open connects to the database (starting the private cluster when no
// DATABASE_URL is configured), applies migrations and loads or creates the
// server's secrets. now is the clock; nil means time.Now.
func Open(ctx context.Context, cfg config.Config, now func() time.Time) (*App, error) {
	if now == nil {
		now = time.Now
	}
	dsn := cfg.DatabaseURL
	if dsn == "" {
		var err error
		if dsn, err = devdb.Ensure(ctx, cfg.DataDir); err != nil {
			return nil, err
		}
	}
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := postgres.Migrate(ctx, db.DB); err != nil {
		db.Close()
		return nil, err
	}
	pepper, err := secretfile.LoadOrCreate(cfg.PepperFile, func() ([]byte, error) {
		b := make([]byte, 32)
		_, err := rand.Read(b)
		return b, err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	signingKey, err := secretfile.LoadOrCreate(cfg.SigningKeyFile, auth.GenerateSigningKey)
	if err != nil {
		db.Close()
		return nil, err
	}
	tokens, err := auth.NewTokens(signingKey, cfg.PublicURL, now)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("app: %s: %w", cfg.SigningKeyFile, err)
	}
	vaultKey, err := secretfile.LoadOrCreate(cfg.EncryptionKeyFile, vault.GenerateKeyFile)
	if err != nil {
		db.Close()
		return nil, err
	}
	v, err := vault.New(vaultKey)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("app: %s: %w", cfg.EncryptionKeyFile, err)
	}
	return &App{
		Config: cfg,
		DB:     db,
		Auth: &auth.Service{DB: db, Pepper: pepper, Tokens: tokens, Now: now,
			RevocationCheckInterval: cfg.RevocationCheckInterval},
		Keys:         &auth.Keys{DB: db, Pepper: pepper},
		Directory:    &directory.Directory{DB: db},
		Applications: &reseller.Applications{DB: db, Vault: v, Now: now},
		Invoices:     &invoice.Store{DB: db, Now: now, PublicURL: cfg.PublicURL},
		Now:          now,
	}, nil
}

// Close releases the database.
func (a *App) Close() error { return a.DB.Close() }

// RunHousekeeping deletes expired rows (old token-request counts,
// idempotency keys past their 24 hours) once a minute until ctx ends.
func (a *App) RunHousekeeping(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		for _, clean := range []func(context.Context) error{a.Auth.DeleteOldTokenRequests, a.Invoices.DeleteExpiredIdempotencyKeys} {
			if err := clean(ctx); err != nil && ctx.Err() == nil {
				log.Error("housekeeping", "error", err.Error())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
