package tracing_test

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/tracing"
	"github.com/payreq/payreq/internal/webhook"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, &testDSN)) }

// A caller's traceparent, as a client outside sends it.
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// install puts an in-memory exporter behind the global provider, with
// PAYREQ_TRUST_TRACEPARENT as the configuration reads it.
func install(t *testing.T, trust string) *tracetest.InMemoryExporter {
	t.Helper()
	t.Setenv("PAYREQ_TRUST_TRACEPARENT", trust)
	cfg, err := config.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.Install(cfg.TrustTraceparent, sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	return exp
}

// serverSpan is the one span named name.
func serverSpan(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no %s span among %d", name, len(spans))
	return tracetest.SpanStub{}
}

// With a provider installed (an in-memory exporter here, OTLP/HTTP in
// service), creating an invoice is one server span named by its
// operationId, with a child span per SQL statement (the invoice's insert
// among them) in the same trace. A caller's traceparent does not choose
// that trace: it starts one of its own, linked to the caller's span. The
// request's log line carries the trace id. A webhook delivery is a client
// span of its own, naming the receiver's scheme, host and port, never its
// path or query.
func TestCreateSpans(t *testing.T) {
	exp := install(t, "")
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	rc := apitest.NewReceiver(t)
	receiver := rc.URL + "/in?token=RECEIVERSECRET123"
	resp := env.Do(apitest.Request{Method: "POST", Path: "/webhook-endpoints", Token: m.Token,
		Body: map[string]any{"url": receiver, "eventTypes": []string{"invoice.created"}}})
	apitest.Want(t, "endpoint", resp.StatusCode, http.StatusCreated)
	exp.Reset()

	resp = m.Create(t, m.Body("TR-1", "10.00"), http.Header{"Traceparent": {callerParent}})
	apitest.Want(t, "create", resp.StatusCode, http.StatusCreated)
	spans := exp.GetSpans()
	server := serverSpan(t, spans, "createPaymentRequest")
	apitest.Want(t, "server span kind", server.SpanKind, trace.SpanKindServer)
	traceID := server.SpanContext.TraceID().String()
	if traceID == callerTrace || server.Parent.IsValid() {
		t.Errorf("the caller's traceparent was continued: trace %s, parent %v", traceID, server.Parent)
	}
	if len(server.Links) != 1 || server.Links[0].SpanContext.TraceID().String() != callerTrace ||
		server.Links[0].SpanContext.SpanID().String() != callerSpan {
		t.Errorf("links %+v, want one to the caller's span %s of trace %s", server.Links, callerSpan, callerTrace)
	}
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
	if !strings.Contains(env.Log.String(), `"trace_id":"`+traceID+`"`) {
		t.Errorf("the request log line lacks the trace id %s:\n%s", traceID, env.Log.String())
	}

	exp.Reset()
	apitest.Deliver(t, env.Webhooks(webhook.WorkerConfig{AllowPrivate: true}))
	if len(rc.Hooks()) != 1 {
		t.Fatalf("%d webhooks delivered, want 1", len(rc.Hooks()))
	}
	u, err := url.Parse(receiver)
	if err != nil {
		t.Fatal(err)
	}
	var post *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindClient && strings.HasPrefix(s.Name, "HTTP POST") {
			post = &s
		}
	}
	if post == nil {
		t.Fatalf("no client span for the webhook delivery: %v", exp.GetSpans())
	}
	want := map[attribute.Key]string{"url.scheme": "http", "server.address": u.Hostname(), "server.port": u.Port(),
		"http.request.method": "POST", "http.response.status_code": "200"}
	for _, a := range post.Attributes {
		if w, ok := want[a.Key]; ok {
			apitest.Want(t, string(a.Key), a.Value.String(), w)
			delete(want, a.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("the delivery span lacks %v: %v", want, post.Attributes)
	}
	noneHolds(t, exp.GetSpans(), "/hooks", "/in", "token=", "RECEIVERSECRET123")
}

// A request no route takes, its path holding a pay link's token, leaves
// neither the path nor the token in any span.
func TestUnmatchedRequestSpans(t *testing.T) {
	exp := install(t, "")
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	inv := m.MustCreate(t, m.Body("TR-2", "10.00"))
	token := strings.TrimPrefix(apitest.PayPath(t, inv), "/pay/")
	exp.Reset()
	for _, p := range []string{"//pay/", "/PAY/", "/api/pay/", "/pay//"} {
		env.Visit(t, "GET", p+token, nil, http.Header{"Traceparent": {callerParent}})
	}
	if len(exp.GetSpans()) == 0 {
		t.Fatal("no span recorded")
	}
	noneHolds(t, exp.GetSpans(), token, "/pay")
}

// With PAYREQ_TRUST_TRACEPARENT=true (a deployment behind a gateway of its
// own), the caller's traceparent is continued: same trace, the caller's
// span the parent.
func TestTrustedTraceparentIsContinued(t *testing.T) {
	exp := install(t, "true")
	env := apitest.New(t, testDSN, apitest.Options{})
	m := apitest.NewMerchant(t, env)
	exp.Reset()
	resp := m.Create(t, m.Body("TR-3", "10.00"), http.Header{"Traceparent": {callerParent}})
	apitest.Want(t, "create", resp.StatusCode, http.StatusCreated)
	server := serverSpan(t, exp.GetSpans(), "createPaymentRequest")
	apitest.Want(t, "the caller's trace", server.SpanContext.TraceID().String(), callerTrace)
	apitest.Want(t, "the caller's span as parent", server.Parent.SpanID().String(), callerSpan)
}

// noneHolds fails the test when a span's name or an attribute holds one
// of texts.
func noneHolds(t *testing.T, spans tracetest.SpanStubs, texts ...string) {
	t.Helper()
	for _, s := range spans {
		for _, text := range texts {
			if strings.Contains(s.Name, text) {
				t.Errorf("span %q holds %q", s.Name, text)
			}
			for _, a := range s.Attributes {
				if strings.Contains(a.Value.String(), text) {
					t.Errorf("span %q: %s=%s holds %q", s.Name, a.Key, a.Value.String(), text)
				}
			}
		}
	}
}
