// Package tracing sets up OpenTelemetry: with OTEL_EXPORTER_OTLP_ENDPOINT
// set, spans go to that collector over OTLP/HTTP (the exporter reads the
// other OTEL_* variables itself); otherwise the global tracer is
// OpenTelemetry's no-op one and payreq adds no span wrappers at all.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Name is payreq's instrumentation scope.
const Name = "github.com/payreq/payreq"

// Tracer is payreq's tracer, from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// Enabled says whether the configuration asks for spans to be exported.
func Enabled() bool { return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" }

// On says whether spans are recorded: a provider is installed (Setup, or a
// test's Install). Off, payreq wraps nothing.
func On() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// Setup installs the OTLP/HTTP exporter when Enabled; shutdown flushes it.
func Setup(ctx context.Context) (shutdown func(context.Context) error, err error) {
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	Install(sdktrace.WithBatcher(exp))
	return otel.GetTracerProvider().(*sdktrace.TracerProvider).Shutdown, nil
}

// Install makes a provider with the given options (an exporter) the
// global one, with W3C trace context propagation.
func Install(opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	res := resource.NewSchemaless(semconv.ServiceName("payreq"))
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithResource(res)}, opts...)...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp
}

// Transport is base with a client span per request when tracing is On;
// base itself otherwise.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !On() {
		return base
	}
	return otelhttp.NewTransport(base)
}
