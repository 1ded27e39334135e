package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/payreq/payreq/internal/api"
	"github.com/payreq/payreq/internal/app"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/delivery"
)

// serve runs the API until SIGTERM or SIGINT, then lets in-flight requests finish.
func serve(ctx context.Context, cfg config.Config) error {
	log := cfg.Logger(os.Stderr)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	a, err := app.Open(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	handler, err := api.New(a, log)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              cfg.Addr,
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	worker, err := delivery.NewWorker(a.DB, delivery.Config{
		PublicURL: cfg.PublicURL, DataDir: cfg.DataDir, SMTPURL: cfg.SMTPURL, SMSURL: cfg.SMSURL,
	}, log, a.Now)
	if err != nil {
		return err
	}
	delivered := make(chan struct{})
	go func() {
		worker.Run(ctx)
		close(delivered)
	}()
	go a.RunHousekeeping(ctx, log)

	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("serving", "addr", cfg.Addr, "public_url", cfg.PublicURL)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	<-delivered // messages being sent are sent, or handed back to the outbox
	log.Info("stopped")
	return nil
}
