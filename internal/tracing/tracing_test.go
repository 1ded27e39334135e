package tracing_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/tracing"
	"github.com/payreq/payreq/internal/webhook"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// With a provider installed (an in-memory exporter here, OTLP/HTTP in
// service), creating an invoice is one server span named by its
// operationId, with a child span per SQL statement (the invoice's insert
// among them) in the same trace, continuing the caller's traceparent; the
// request's log line carries the trace id; a webhook delivery is a client
// span of its own.
func TestCreateSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.Install(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(t.Context())

	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	rc := apitest.NewReceiver(t)
	resp := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token,
		Body: map[string]any{"url": rc.URL, "eventTypes": []string{"invoice.created"}}})
	apitest.Want(t, "endpoint", resp.StatusCode, http.StatusCreated)
	exp.Reset()

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	resp = m.Create(t, m.Body("TR-1", "10.00"), http.Header{"Traceparent": {parent}})
	apitest.Want(t, "create", resp.StatusCode, http.StatusCreated)
	spans := exp.GetSpans()
	var server *tracetest.SpanStub
	for i := range spans {
		if spans[i].Name == "createPaymentRequest" {
			server = &spans[i]
		}
	}
	if server == nil {
		t.Fatalf("no createPaymentRequest span among %d", len(spans))
	}
	apitest.Want(t, "server span kind", server.SpanKind, trace.SpanKindServer)
	apitest.Want(t, "the caller's trace", server.SpanContext.TraceID().String(), "4bf92f3577b34da6a3ce929d0e0e4736")
	children := map[string]int{}
	for _, s := range spans {
		if s.Parent.SpanID() == server.SpanContext.SpanID() {
			children[s.Name]++
			for _, a := range s.Attributes {
				if a.Key == "db.query.text" && strings.Contains(a.Value.AsString(), "dana@example.com") {
					t.Errorf("a statement span holds an argument: %s", a.Value.AsString())
				}
			}
		}
	}
	// WITH: the invoice with its lines, the event with its deliveries;
	// SELECT: the invoice read back.
	for _, name := range []string{"WITH", "SELECT"} {
		if children[name] == 0 {
			t.Errorf("no %s span under the server span: %v", name, children)
		}
	}
	if !strings.Contains(env.Log.String(), `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
		t.Errorf("the request log line lacks the trace id:\n%s", env.Log.String())
	}

	exp.Reset()
	apitest.Deliver(t, env.Webhooks(webhook.WorkerConfig{AllowPrivate: true}))
	post := false
	for _, s := range exp.GetSpans() {
		post = post || (s.SpanKind == trace.SpanKindClient && strings.HasPrefix(s.Name, "HTTP POST"))
	}
	if !post {
		t.Errorf("no client span for the webhook delivery: %v", exp.GetSpans())
	}
}
