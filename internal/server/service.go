package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/terminal"
	"github.com/payreq/payreq/internal/webhook"
)

// Service is what `payreq serve` runs: the app, the handler of every front
// and the workers and loops behind them.
type Service struct {
	App *app.App
	// Handler is every front; serve it with framing.Configure and
	// framing.Listen.
	Handler  http.Handler
	log      *slog.Logger
	delivery *delivery.Worker
	webhooks *webhook.Worker
}

// New opens the app (app.Open) and builds the fronts and the workers on
// it, all as cfg says; log is the request log and the workers'.
func New(ctx context.Context, cfg config.Config, opts app.Options, log *slog.Logger) (*Service, error) {
	a, err := app.Open(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	h, err := handler(a, log)
	if err != nil {
		a.Close()
		return nil, err
	}
	mail, err := Delivery(a, cfg, log)
	if err != nil {
		a.Close()
		return nil, err
	}
	// Webhooks have workers of their own: slow receivers never hold up
	// messages, nor messages webhooks.
	hooks := webhook.NewWorker(a.DB, a.Vault.Open, webhook.WorkerConfig{
		Timeout: cfg.WebhookTimeout, Schedule: cfg.WebhookRetrySchedule, AllowPrivate: cfg.WebhookAllowPrivate,
		Count: func(result string) { a.Metrics.WebhookResults.WithLabelValues(result).Inc() },
	}, log, a.Now)
	return &Service{App: a, Handler: h, log: log, delivery: mail, webhooks: hooks}, nil
}

// Delivery is a's outbox worker, configured by cfg rather than a.Config so
// that a test harness can point it at a mail server of its own.
func Delivery(a *app.App, cfg config.Config, log *slog.Logger) (*delivery.Worker, error) {
	return delivery.NewWorker(a.DB, delivery.Config{
		Invoices: a.Invoices, Documents: a.MailDocuments(), Logos: a.Directory.LogoPNG, Open: a.Vault.Open, PasswordResets: a.People.ResetNotice, DataDir: cfg.DataDir,
		SMTPURL: cfg.SMTPURL, SMSURL: cfg.SMSURL,
		PollInterval: cfg.DeliveryPollInterval, Lease: cfg.DeliveryLease,
		BackoffBase: cfg.DeliveryBackoff, BackoffMax: cfg.DeliveryBackoffMax, MaxAttempts: cfg.DeliveryMaxAttempts,
	}, log, a.Now)
}

// Run runs the workers and loops until ctx ends, and returns once each has
// stopped: messages being sent are sent, or handed back to the outbox;
// webhook attempts under way end, their outcome recorded.
func (s *Service) Run(ctx context.Context) {
	a, cfg := s.App, s.App.Config
	var wg sync.WaitGroup
	wg.Go(func() { s.delivery.Run(ctx) })
	wg.Go(func() { s.webhooks.Run(ctx) })
	wg.Go(func() { s.housekeeping(ctx, cfg.HousekeepingInterval) })
	// Charges whose outcome was lost are voided at the processor; the
	// automatic charges of recurring invoices are made (and retried), each
	// once across instances.
	wg.Go(func() { a.Payments.RunSettlement(ctx, cfg.PendingPollInterval, s.log) })
	// Each MID's batch closes at the cutoff, once across instances.
	wg.Go(func() { a.Payments.RunDeposits(ctx, cfg.DepositPollInterval, s.log) })
	// Scheduled pay links and due reminders go into the outbox, each once
	// across instances.
	wg.Go(func() { a.Invoices.RunSchedule(ctx, cfg.SchedulePollInterval, s.log) })
	// Terminals are pinged, and pending terminal payments asked of them,
	// each once across instances.
	wg.Go(func() { a.Terminals.RunPings(ctx, terminal.PingInterval, s.log) })
	wg.Go(func() { a.Terminals.RunWorker(ctx, cfg.TerminalPollInterval, s.log) })
	// Recurring invoices' due occurrences are issued (or skipped), each
	// once across instances, within a poll interval (at most a minute).
	wg.Go(func() { a.Recurring.Run(ctx, cfg.SchedulePollInterval, s.log) })
	wg.Wait()
}

// Close releases the app.
func (s *Service) Close() error { return s.App.Close() }

// housekeeping deletes expired rows (old token-request counts, idempotency
// keys past their 24 hours, pay attempts and sign-up submissions past their
// hour, events past their 30 days, the portal's old sessions, links,
// sign-in failures and audit entries past a year) every interval until ctx
// ends.
func (s *Service) housekeeping(ctx context.Context, interval time.Duration) {
	a := s.App
	deleteExpiredKeys := func(ctx context.Context) error { return idempotency.DeleteExpired(ctx, a.DB, a.Now()) }
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, clean := range []func(context.Context) error{a.Auth.DeleteOldTokenRequests, deleteExpiredKeys, a.Payments.DeleteOldAttempts, a.Resellers.DeleteOldSubmissions, a.Events.DeleteOld, a.People.DeleteOld} {
			if err := clean(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("housekeeping", "error", err.Error())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
