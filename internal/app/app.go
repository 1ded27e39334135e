// Package app opens what every payreq command works with: the database
// (migrated), the server's secrets and the domain services.
package app

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/auth"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/metrics"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/recurring"
	"github.com/payreq/payreq/internal/reseller"
	"github.com/payreq/payreq/internal/secretfile"
	"github.com/payreq/payreq/internal/terminal"
	"github.com/payreq/payreq/internal/tracing"
	"github.com/payreq/payreq/internal/vault"
	"github.com/payreq/payreq/internal/webhook"
)

// App is the opened service.
type App struct {
	Config    config.Config
	DB        *sqlx.DB
	Auth      *auth.Store
	Directory *directory.Store
	Resellers *reseller.Store
	Invoices  *invoice.Store
	Recurring *recurring.Store
	Customers *customer.Store
	Processor processor.Processor
	Payments  *payment.Store
	Terminals *terminal.Store
	Events    *event.Store
	Webhooks  *webhook.Store
	People    *people.Store
	Vault     *vault.Vault
	Metrics   *metrics.Metrics
	// PDFs keeps the invoice documents drawn, one per invoice version,
	// for every front.
	PDFs *invoicepdf.Documents
	// PayPageKey signs the pay page's form tokens (CSRF); derived from the
	// pepper, so every instance of a deployment shares it.
	PayPageKey []byte
	// CSRFKey keys the CSRF tokens of the portal and the sign-up page
	// (web.CSRF), derived from the pepper too.
	CSRFKey   []byte
	Now       func() time.Time
	metricsDB *sqlx.DB
}

// SecretError is a secret file that cannot be used: a pepper or an
// encryption key that is not lines of 64 hex digits, a signing key that is
// not Ed25519.
// The service does not start with it.
type SecretError struct {
	File    string
	Problem string
}

func (e *SecretError) Error() string { return e.File + ": " + e.Problem }

// Options are what Open takes besides the configuration.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Processor is the card processor; nil means the one the configuration names.
	Processor processor.Processor
	// Terminals are the card terminals; nil means the ones the
	// configuration names.
	Terminals processor.Terminals
	// GenerateSecrets makes missing secret files: for the private
	// development cluster and tests only. Otherwise a missing file stops
	// Open, so that instances never each make their own.
	GenerateSecrets bool
}

// Secret files under their default names in a directory.
const (
	SigningKeyName    = "signing-key.pem"
	PepperName        = "pepper"
	EncryptionKeyName = "encryption-key"
)

var secretGenerators = []struct {
	name     string
	generate func() ([]byte, error)
}{
	{SigningKeyName, auth.GenerateSigningKey},
	{PepperName, newPepper},
	{EncryptionKeyName, vault.GenerateKeyFile},
}

// newPepper is a pepper file of one pepper: 32 random bytes in hex.
func newPepper() ([]byte, error) {
	b := make([]byte, 32)
	_, err := rand.Read(b)
	return []byte(hex.EncodeToString(b) + "\n"), err
}

// InitSecrets writes the three secret files into dir (mode 0600) and
// returns their paths. When any of them exists it writes nothing and
// returns a *SecretError naming it.
func InitSecrets(dir string) ([]string, error) {
	var paths []string
	for _, g := range secretGenerators {
		path := filepath.Join(dir, g.name)
		if _, err := os.Stat(path); err == nil {
			return nil, &SecretError{File: path, Problem: "exists already; payreq secrets init never overwrites a secret"}
		}
		paths = append(paths, path)
	}
	for i, g := range secretGenerators {
		content, err := g.generate()
		if err != nil {
			return nil, err
		}
		if err := secretfile.Create(paths[i], content); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// Open connects to the database at cfg.DatabaseURL, applies migrations and
// loads or creates the server's secrets.
func Open(ctx context.Context, cfg config.Config, opts Options) (*App, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Pool{
		MaxOpenConns: cfg.DBMaxOpenConns, MaxIdleConns: cfg.DBMaxIdleConns, Unprepared: !cfg.DBPreparedStatements,
		Traced: tracing.On(),
	})
	if err != nil {
		return nil, err
	}
	if err := postgres.Migrate(ctx, db.DB); err != nil {
		db.Close()
		return nil, err
	}
	load := func(path string, generate func() ([]byte, error)) ([]byte, error) {
		if opts.GenerateSecrets {
			return secretfile.LoadOrCreate(path, generate)
		}
		b, err := secretfile.Load(path)
		var missing *secretfile.MissingError
		if errors.As(err, &missing) {
			return nil, &SecretError{File: path, Problem: "missing; make the secrets once with payreq secrets init --dir " +
				filepath.Dir(path) + " and give every instance the same files"}
		}
		return b, err
	}
	pepperFile, err := load(cfg.PepperFile, newPepper)
	if err != nil {
		db.Close()
		return nil, err
	}
	peppers, err := secretfile.HexKeys(pepperFile)
	if err != nil {
		db.Close()
		return nil, &SecretError{File: cfg.PepperFile, Problem: err.Error()}
	}
	pepper := peppers[0]
	signingKey, err := load(cfg.SigningKeyFile, auth.GenerateSigningKey)
	if err != nil {
		db.Close()
		return nil, err
	}
	tokens, err := auth.NewTokens(signingKey, cfg.PublicURL, now)
	if err != nil {
		db.Close()
		return nil, &SecretError{File: cfg.SigningKeyFile, Problem: err.Error()}
	}
	vaultKey, err := load(cfg.EncryptionKeyFile, vault.GenerateKeyFile)
	if err != nil {
		db.Close()
		return nil, err
	}
	v, err := vault.New(vaultKey)
	if err != nil {
		db.Close()
		return nil, &SecretError{File: cfg.EncryptionKeyFile, Problem: err.Error()}
	}
	proc := opts.Processor
	if proc == nil {
		if proc, err = newProcessor(cfg); err != nil {
			db.Close()
			return nil, err
		}
	}
	// A pay link key per pepper: links sent under an older pepper keep
	// working while it is in the file.
	linkKeys := make([][]byte, len(peppers))
	for i, p := range peppers {
		linkKeys[i] = derive(p, "payreq pay link")
	}
	payLinks, err := invoice.NewPayLinks(linkKeys...)
	if err != nil {
		db.Close()
		return nil, err
	}
	// The backlog gauges' own connection: scrapes never take the API's.
	metricsDB, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Pool{MaxOpenConns: 1, Unprepared: !cfg.DBPreparedStatements})
	if err != nil {
		db.Close()
		return nil, err
	}
	// Recovery codes under a key per pepper, as pay links.
	recoveryKeys := make([][]byte, len(peppers))
	for i, p := range peppers {
		recoveryKeys[i] = derive(p, "payreq recovery code")
	}
	invoices := &invoice.Store{DB: db, Now: now, PublicURL: cfg.PublicURL, PayLinks: payLinks}
	payments := &payment.Store{DB: db, Processor: proc, Now: now, SettlementCutoff: cfg.SettlementCutoff, Invoices: invoices}
	invoices.Cards = payments
	terms := opts.Terminals
	if terms == nil {
		if terms, err = newTerminals(cfg, proc); err != nil {
			db.Close()
			metricsDB.Close()
			return nil, err
		}
	}
	terminals := &terminal.Store{DB: db, Terminals: terms, Gateway: proc, CardPayments: payments, Now: now, Timeout: cfg.TerminalTimeout}
	invoices.Terminals, payments.Terminals = terminals, terminals
	dir := &directory.Store{DB: db}
	pdfs := invoicepdf.NewDocuments(pdfMemory)
	pdfs.Logos = dir.LogoPNG
	members := &people.Store{DB: db, Now: now, Vault: v, Hasher: people.NewHasher(0), RecoveryKeys: recoveryKeys,
		PublicURL: cfg.PublicURL, DeviceKey: derive(pepper, "payreq device cookie")}
	invoices.Members, payments.Members = members, members
	series := &recurring.Store{DB: db, Now: now, Invoices: invoices, Members: members}
	payments.CardRemoved = series.EndAutoPay
	return &App{
		Config: cfg,
		DB:     db,
		Auth: &auth.Store{DB: db, Peppers: peppers, Tokens: tokens, Now: now,
			RevocationCheckInterval: cfg.RevocationCheckInterval, Organizations: dir, Members: members},
		Directory: dir,
		Resellers: &reseller.Store{DB: db, Vault: v, Now: now},
		Invoices:  invoices,
		Recurring: series,
		Customers: &customer.Store{DB: db, Now: now, Invoices: invoices, Cards: payments},
		Processor: proc,
		Payments:  payments,
		Terminals: terminals,
		Events:    &event.Store{DB: db, Now: now},
		Webhooks: &webhook.Store{DB: db, Now: now, Seal: v.Seal, Open: v.Open, AllowPrivate: cfg.WebhookAllowPrivate,
			Resolver: net.DefaultResolver},
		People:     members,
		Vault:      v,
		Metrics:    metrics.New(db.DB, metricsDB.DB, now),
		PDFs:       pdfs,
		metricsDB:  metricsDB,
		PayPageKey: derive(pepper, "payreq pay page form token"),
		CSRFKey:    derive(pepper, "payreq CSRF token"),
		Now:        now,
	}, nil
}

// pdfMemory bounds the invoice documents kept in memory: some hundreds of
// everyday invoices (tens of kilobytes each), or a few of the longest.
const pdfMemory = 64 << 20

// newProcessor is the card processor the configuration names.
func newProcessor(cfg config.Config) (processor.Processor, error) {
	if cfg.Processor == "cardpointe" {
		// The client's own deadlines bound each call; this one bounds a hung
		// connection whatever happens.
		p, err := processor.NewCardPointe(cfg.CardPointeURL, &http.Client{Timeout: time.Minute, Transport: tracing.Transport(nil)})
		if err != nil {
			return nil, fmt.Errorf("app: PAYREQ_CARDPOINTE_URL: %w", err)
		}
		if cfg.CardPointeTimeout > 0 {
			p.AuthTimeout, p.Timeout = cfg.CardPointeTimeout, cfg.CardPointeTimeout*2/3
		}
		return p, nil
	}
	s := processor.NewSimulator()
	s.Fees = cfg.SimulatorFees
	return s, nil
}

// newTerminals are the card terminals the configuration names: the
// simulator's with the simulator; CardPointe's Integrated Terminal API
// when PAYREQ_TERMINAL_URL is set (with the gateway, proc, for
// inquireByOrderid); none otherwise.
func newTerminals(cfg config.Config, proc processor.Processor) (processor.Terminals, error) {
	gateway, isCardPointe := proc.(*processor.CardPointe)
	switch {
	case cfg.Processor != "cardpointe":
		return processor.NewSimTerminals(), nil
	case cfg.TerminalURL == "":
		return nil, nil
	case !isCardPointe:
		return nil, errors.New("app: PAYREQ_TERMINAL_URL needs PAYREQ_PROCESSOR=cardpointe")
	}
	// authCard waits minutes for the customer: the client's own deadlines
	// bound each call, this one a hung connection.
	t, err := processor.NewTerminalAPI(cfg.TerminalURL, gateway, &http.Client{Timeout: processor.TerminalAuthTimeout + time.Minute,
		Transport: tracing.Transport(nil)})
	if err != nil {
		return nil, fmt.Errorf("app: PAYREQ_TERMINAL_URL: %w", err)
	}
	return t, nil
}

// derive is a key for one purpose from a server secret.
func derive(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Close releases the database.
func (a *App) Close() error { return errors.Join(a.DB.Close(), a.metricsDB.Close()) }

// MetricsToken reads PAYREQ_METRICS_TOKEN_FILE: the bearer token scrapes
// of /metrics must send, one line of at least 32 visible ASCII characters
// (openssl rand -hex 32 writes one). Anything else is a *SecretError.
func MetricsToken(path string) (string, error) {
	b, err := secretfile.Load(path)
	var missing *secretfile.MissingError
	if errors.As(err, &missing) {
		return "", &SecretError{File: path, Problem: "missing; PAYREQ_METRICS_TOKEN_FILE names the file of the token scrapes send"}
	}
	if err != nil {
		return "", err
	}
	token := strings.TrimSuffix(string(b), "\n")
	if len(token) < 32 || strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", &SecretError{File: path, Problem: "must hold one line of at least 32 visible ASCII characters, such as openssl rand -hex 32 writes"}
	}
	return token, nil
}
