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
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
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

// Setup installs the OTLP/HTTP exporter when Enabled (see Install for
// trustTraceparent); shutdown flushes it.
func Setup(ctx context.Context, trustTraceparent bool) (shutdown func(context.Context) error, err error) {
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	Install(trustTraceparent, sdktrace.WithBatcher(exp))
	return otel.GetTracerProvider().(*sdktrace.TracerProvider).Shutdown, nil
}

// trusted is Install's trustTraceparent: whether StartServer continues a
// caller's trace.
var trusted atomic.Bool

// Install makes a provider with the given options (an exporter) the
// global one, with W3C trace context propagation. With trustTraceparent
// (PAYREQ_TRUST_TRACEPARENT, for a deployment behind a gateway of its own)
// StartServer continues a caller's traceparent.
func Install(trustTraceparent bool, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	res := resource.NewSchemaless(semconv.ServiceName("payreq"))
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithResource(res)}, opts...)...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	trusted.Store(trustTraceparent)
	return tp
}

// StartServer starts the server span of a request. A caller's
// traceparent (and baggage) does not choose the trace: the span starts a
// trace of its own, linked to the caller's span, unless Install was told
// to trust it.
func StartServer(ctx context.Context, header http.Header, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	caller := otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(header))
	opts = append(opts, trace.WithSpanKind(trace.SpanKindServer))
	if trusted.Load() {
		return Tracer().Start(caller, name, opts...)
	}
	opts = append(opts, trace.WithNewRoot())
	if sc := trace.SpanContextFromContext(caller); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return Tracer().Start(ctx, name, opts...)
}

// Transport is base with a client span per request when tracing is On;
// base itself otherwise. The span names the method and the server's
// scheme, host and port, never the path or query, which may carry a
// receiver's token; nothing is added to the request.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !On() {
		return base
	}
	return transport{base}
}

type transport struct{ base http.RoundTripper }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	port := r.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[r.URL.Scheme]
	}
	n, _ := strconv.Atoi(port)
	ctx, span := Tracer().Start(r.Context(), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLScheme(r.URL.Scheme),
		semconv.ServerAddress(r.URL.Hostname()), semconv.ServerPort(n)))
	defer span.End()
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		span.SetStatus(codes.Error, "no answer")
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	return resp, nil
}
