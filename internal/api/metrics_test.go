package api_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/pgtest"
	"github.com/payreq/payreq/internal/webhook"
)

func counterOf(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		match := true
		for _, l := range m.Label {
			if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
				match = false
			}
		}
		if match {
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// After traffic, /metrics (parsed with Prometheus' own text parser)
// counts requests by operationId and status code, times them, counts
// webhook results, shows the backlogs and the pool, and no label holds an
// id.
func TestMetricsAfterTraffic(t *testing.T) {
	env := apitest.New(t, pgtest.NewDatabase(t), apitest.Options{})
	m := apitest.NewMerchant(t, env)
	rc := apitest.NewReceiver(t)
	endpoint(t, env, m.Token, rc.URL, "invoice.created")
	inv := m.MustCreate(t, m.Body("MET-1", "10.00"))
	m.Read(t, inv.Id)
	m.Read(t, inv.Id)
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests/00000000-0000-0000-0000-000000000000", Token: m.Token})
	env.Do(apitest.Request{Method: "GET", Path: "/payment-requests?status=nope", Token: m.Token})
	worker := env.Webhooks(webhook.WorkerConfig{AllowPrivate: true, Count: func(r string) { env.App.Metrics.WebhookResults.WithLabelValues(r).Inc() }})
	apitest.Deliver(t, worker)

	srv := httptest.NewServer(env.App.Metrics.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"payreq_http_requests_total", map[string]string{"operation": "createPaymentRequest", "code": "201"}, 1},
		{"payreq_http_requests_total", map[string]string{"operation": "getPaymentRequest", "code": "200"}, 2},
		{"payreq_http_requests_total", map[string]string{"operation": "getPaymentRequest", "code": "404"}, 1},
		{"payreq_http_requests_total", map[string]string{"operation": "listPaymentRequests", "code": "400"}, 1},
		{"payreq_http_request_duration_seconds", map[string]string{"operation": "getPaymentRequest"}, 3},
		{"payreq_webhook_deliveries_total", map[string]string{"result": "delivered"}, 1},
		{"payreq_outbox_pending", nil, 0},
		{"payreq_webhook_deliveries_pending", nil, 0},
		{"payreq_db_max_open_connections", nil, 20},
	} {
		apitest.Want(t, c.name+labelsString(c.labels), counterOf(fams, c.name, c.labels), c.want)
	}
	for _, name := range []string{"payreq_db_open_connections", "payreq_db_wait_count_total", "payreq_rate_limited_total", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-`)
	for name, f := range fams {
		for _, mt := range f.Metric {
			for _, l := range mt.Label {
				if id.MatchString(l.GetValue()) {
					t.Errorf("%s has a label with an id: %s=%s", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func labelsString(l map[string]string) string {
	s := ""
	for k, v := range l {
		s += " " + k + "=" + v
	}
	return s
}
