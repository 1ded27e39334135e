package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/server"
	"github.com/payreq/payreq/internal/tracing"
	"github.com/payreq/payreq/internal/webhook"
)

// serve runs the API until SIGTERM or SIGINT, then lets in-flight requests finish.
func serve(ctx context.Context, cfg config.Config) error {
	log := cfg.Logger(os.Stderr)
	// The live heap is a few MB and a request's garbage is short-lived: at
	// Go's default GOGC of 100 the collector takes a fifth of a read's CPU
	// time; 400 gives that back for some 20 MB more. GOGC, when set, wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var metricsToken string
	if cfg.MetricsAddr != "" && cfg.MetricsTokenFile != "" {
		var err error
		if metricsToken, err = app.MetricsToken(cfg.MetricsTokenFile); err != nil {
			return err
		}
	}
	// Before the app opens: its database pool and clients are traced only
	// when a provider is installed.
	shutdownTracing, err := tracing.Setup(ctx, cfg.TrustTraceparent)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(sctx) // spans not flushed by then are lost, nothing else
	}()
	a, err := openApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	handler, err := server.New(a, log)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              cfg.Addr,
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      writeTimeout(cfg),
		MaxHeaderBytes:    64 << 10,
	}
	framing.Configure(srv)
	listener, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	worker, err := delivery.NewWorker(a.DB, delivery.Config{
		Invoices: a.Invoices, Open: a.Vault.Open, PasswordResets: a.People.ResetNotice, DataDir: cfg.DataDir, SMTPURL: cfg.SMTPURL, SMSURL: cfg.SMSURL,
		PollInterval: cfg.DeliveryPollInterval, Lease: cfg.DeliveryLease,
		BackoffBase: cfg.DeliveryBackoff, BackoffMax: cfg.DeliveryBackoffMax, MaxAttempts: cfg.DeliveryMaxAttempts,
	}, log, a.Now)
	if err != nil {
		return err
	}
	delivered := make(chan struct{})
	go func() {
		worker.Run(ctx)
		close(delivered)
	}()
	// Webhooks have workers of their own: slow receivers never hold up
	// messages, nor messages webhooks.
	hooks := webhook.NewWorker(a.DB, a.Vault.Open, webhook.WorkerConfig{
		Timeout: cfg.WebhookTimeout, Schedule: cfg.WebhookRetrySchedule, AllowPrivate: cfg.WebhookAllowPrivate,
		Count: func(result string) { a.Metrics.WebhookResults.WithLabelValues(result).Inc() },
	}, log, a.Now)
	hooked := make(chan struct{})
	go func() {
		hooks.Run(ctx)
		close(hooked)
	}()
	go a.RunHousekeeping(ctx, log)
	// Charges whose outcome was lost are voided at the processor.
	go a.Payments.RunSettlement(ctx, 5*time.Second, log)
	// Each MID's batch closes at the cutoff, once across instances.
	go a.Payments.RunDeposits(ctx, time.Minute, log)
	// Scheduled pay links and due reminders go into the outbox, each once
	// across instances.
	go a.Invoices.RunSchedule(ctx, cfg.SchedulePollInterval, log)

	errc := make(chan error, 3)
	go func() { errc <- srv.Serve(framing.Listen(listener)) }()
	if cfg.MetricsAddr != "" {
		go func() { errc <- a.Metrics.Serve(ctx, cfg.MetricsAddr, metricsToken, log) }()
	}
	if cfg.DebugAddr != "" {
		debug := &http.Server{Addr: cfg.DebugAddr, Handler: debugHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- debug.ListenAndServe() }()
		defer debug.Close()
		log.Info("serving profiles", "addr", cfg.DebugAddr)
	}
	log.Info("serving", "addr", cfg.Addr, "public_url", cfg.PublicURL)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	// As long as a request may take: every request accepted gets its answer.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), srv.WriteTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	<-delivered // messages being sent are sent, or handed back to the outbox
	<-hooked    // webhook attempts under way end, their outcome recorded
	log.Info("stopped")
	return nil
}

// writeTimeout is how long a request may take, from its headers to the end
// of its answer, before the connection is cut. It outlasts the slowest
// handler, or a client would lose the answer to work done, such as a charge
// recorded on the pay page: an API request's deadline, or a pay POST's
// (payment.PayTimeout) followed by the void of a charge whose answer was
// lost (three tries of two thirds of the CardPointe timeout), and a margin
// for the database work and the answer itself.
func writeTimeout(cfg config.Config) time.Duration {
	return max(cfg.RequestTimeout, payment.PayTimeout+2*cfg.CardPointeTimeout) + 30*time.Second
}

// debugHandler serves pprof's profiles (a goroutine count is the first line
// of /debug/pprof/goroutine?debug=1), on the loopback debug address only.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
