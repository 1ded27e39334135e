package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/gen"
	"github.com/payreq/payreq/internal/apitest"
	"github.com/payreq/payreq/internal/config"
)

// latencies collects per-request durations across goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, elapsed time.Duration) {
	slices.Sort(l.d)
	if len(l.d) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(l.d))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

func benchEnv(b *testing.B) (*apitest.Env, merchant) {
	env := apitest.New(b, testDSN, apitest.Options{Configure: func(c *config.Config) {
		c.RateLimit, c.RateBurst = 1e9, 1e9
		c.LogLevel = "error"
	}})
	return env, newMerchant(&testing.T{}, env)
}

func send(b *testing.B, env *apitest.Env, method, url, token string, body []byte, header http.Header) int {
	req, _ := http.NewRequest(method, env.URL+url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := env.Client.Do(req)
	if err != nil {
		b.Error(err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// BenchmarkCreateInvoice: 3 lines, send=false, with an Idempotency-Key.
func BenchmarkCreateInvoice(b *testing.B) {
	env, m := benchEnv(b)
	var n atomic.Int64
	var lat latencies
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			body, _ := json.Marshal(m.body(fmt.Sprintf("B-%d-%d", time.Now().UnixNano(), i), "60.00",
				ln("1", "10"), ln("2", "10"), ln("3", "10")))
			t0 := time.Now()
			if code := send(b, env, "POST", "/payment-requests", m.token, body, http.Header{"Idempotency-Key": {fmt.Sprint("bench-", time.Now().UnixNano(), "-", i)}}); code != http.StatusCreated {
				b.Errorf("create: %d", code)
			}
			lat.add(time.Since(t0))
		}
	})
	lat.report(b, time.Since(start))
}

// BenchmarkGetInvoice reads one invoice (with lines, payments and saved cards).
func BenchmarkGetInvoice(b *testing.B) {
	env, m := benchEnv(b)
	body, _ := json.Marshal(m.body("GET-1", "60.00", ln("1", "10"), ln("2", "10"), ln("3", "10")))
	req, _ := http.NewRequest("POST", env.URL+"/payment-requests", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := env.Client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var inv gen.Invoice
	json.NewDecoder(resp.Body).Decode(&inv)
	resp.Body.Close()
	path := "/payment-requests/" + inv.Id.String()
	var lat latencies
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t0 := time.Now()
			if code := send(b, env, "GET", path, m.token, nil, nil); code != http.StatusOK {
				b.Errorf("get: %d", code)
			}
			lat.add(time.Since(t0))
		}
	})
	lat.report(b, time.Since(start))
}
