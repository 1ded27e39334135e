// Command echo is the benchmark's baseline (c): a bare Echo server that
// answers GET /payment-requests/:id with a fixed body (the bytes of a real
// answer of payreq, from -body), so the harness can price HTTP and Echo
// alone on the same machine and load.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	bodyFile := flag.String("body", "", "file holding the body to answer (default: a small JSON object)")
	flag.Parse()
	body := []byte(`{"status":"ok"}`)
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo:", err)
			os.Exit(1)
		}
		body = b
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/payment-requests/:id", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
	})
	srv := &http.Server{Addr: *addr, Handler: e, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}
