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
	"github.com/payreq/payreq/internal/framing"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/server"
	"github.com/payreq/payreq/internal/tracing"
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
	cfg, opts, err := database(ctx, cfg)
	if err != nil {
		return err
	}
	svc, err := server.New(ctx, cfg, opts, log)
	if err != nil {
		return err
	}
	defer svc.Close()
	srv := &http.Server{
		Addr:              cfg.Addr,
		Handler:           svc.Handler,
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
	ran := make(chan struct{})
	go func() {
		svc.Run(ctx)
		close(ran)
	}()

	errc := make(chan error, 3)
	go func() { errc <- srv.Serve(framing.Listen(listener)) }()
	if cfg.MetricsAddr != "" {
		go func() { errc <- svc.App.Metrics.Serve(ctx, cfg.MetricsAddr, metricsToken, log) }()
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
	<-ran // the workers' work under way is done or handed back
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
