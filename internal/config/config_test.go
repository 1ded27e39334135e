package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := parse(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.PublicURL != "http://127.0.0.1:8080" || c.DataDir != ".data" ||
		c.RevocationCheckInterval != 15*time.Second || c.Processor != "simulator" || c.SigningKeyFile != ".data/signing-key.pem" ||
		!c.ValidateRequests {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	for name, value := range map[string]string{
		"PAYREQ_REVOCATION_CHECK_INTERVAL": "soon",
		"PAYREQ_TRUSTED_PROXIES":           "10.0.0.0",
		"PAYREQ_PROCESSOR":                 "bank",
		"PAYREQ_RATE_LIMIT":                "-1",
		"PAYREQ_LOG_LEVEL":                 "loud",
		"PAYREQ_REQUEST_TIMEOUT":           "forever",
		"PAYREQ_CARDPOINTE_TIMEOUT":        "-1s",
		"PAYREQ_DELIVERY_LEASE":            "1x",
		"PAYREQ_DELIVERY_MAX_ATTEMPTS":     "0",
		"PAYREQ_DEBUG_ADDR":                "0.0.0.0:6060",
		"PAYREQ_VALIDATE_REQUESTS":         "maybe",
		"PAYREQ_TRUST_TRACEPARENT":         "yes please",
		"PAYREQ_HSTS":                      "sometimes",
	} {
		_, err := parse(func(k string) string {
			if k == name {
				return value
			}
			return ""
		})
		if err == nil || len(err.Error()) < len(name) || err.Error()[:len(name)] != name {
			t.Errorf("%s=%s: error %v", name, value, err)
		}
	}
}

func TestTimeoutsAndDeliverySettings(t *testing.T) {
	c, err := parse(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.RequestTimeout != 10*time.Second || c.CardPointeTimeout != 15*time.Second || c.DeliveryLease != 0 ||
		c.DeliveryMaxAttempts != 0 || c.DebugAddr != "" {
		t.Fatalf("defaults: %+v", c)
	}
	env := map[string]string{
		"PAYREQ_REQUEST_TIMEOUT": "2s", "PAYREQ_CARDPOINTE_TIMEOUT": "1s", "PAYREQ_DELIVERY_POLL_INTERVAL": "100ms",
		"PAYREQ_DELIVERY_LEASE": "6s", "PAYREQ_DELIVERY_BACKOFF": "1s", "PAYREQ_DELIVERY_BACKOFF_MAX": "1m",
		"PAYREQ_DELIVERY_MAX_ATTEMPTS": "5", "PAYREQ_DEBUG_ADDR": "127.0.0.1:6060",
	}
	if c, err = parse(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if c.RequestTimeout != 2*time.Second || c.CardPointeTimeout != time.Second || c.DeliveryPollInterval != 100*time.Millisecond ||
		c.DeliveryLease != 6*time.Second || c.DeliveryBackoff != time.Second || c.DeliveryBackoffMax != time.Minute ||
		c.DeliveryMaxAttempts != 5 || c.DebugAddr != "127.0.0.1:6060" {
		t.Fatalf("parsed: %+v", c)
	}
}

func TestURLsCheckedAtStart(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		ok          bool
	}{
		{"PAYREQ_PUBLIC_URL", "not a url", false},
		{"PAYREQ_PUBLIC_URL", "ftp://x", false},
		{"PAYREQ_PUBLIC_URL", "https://pay.example.com?x=1", false},
		{"PAYREQ_PUBLIC_URL", "https://pay.example.com#top", false},
		{"PAYREQ_PUBLIC_URL", "https://pay.example.com/billing", true},
		{"PAYREQ_CARDPOINTE_URL", "http://gateway.example.com/cardconnect/rest", false},
		{"PAYREQ_CARDPOINTE_URL", "http://10.0.0.5/cardconnect/rest", false},
		{"PAYREQ_CARDPOINTE_URL", "https://u:p@gateway.example.com/cardconnect/rest", true},
		{"PAYREQ_CARDPOINTE_URL", "http://u:p@127.0.0.1:9999/cardconnect/rest", true},
		{"PAYREQ_SMS_URL", "http://sms.example.com/Messages.json?from=%2B1555", false},
		{"PAYREQ_SMS_URL", "http://[::1]:9999/Messages.json?from=%2B1555", true},
		{"PAYREQ_SMS_URL", "http://localhost:9999/Messages.json?from=%2B1555", true},
		{"PAYREQ_SMTP_URL", "http://mail.example.com", false},
		{"PAYREQ_SMTP_URL", "smtp://u:p@relay.local?tls=none&from=a@example.com", false},
		{"PAYREQ_SMTP_URL", "smtps://relay.local?tls=none&from=a@example.com", false},
		{"PAYREQ_SMTP_URL", "smtp://relay.local?tls=off&from=a@example.com", false},
		{"PAYREQ_SMTP_URL", "smtp://relay.local:25?tls=none&from=a@example.com", true},
		{"PAYREQ_SMTP_URL", "smtp://u:p@mail.example.com:587?from=a@example.com", true},
	} {
		_, err := parse(func(k string) string {
			if k == tt.name {
				return tt.value
			}
			return ""
		})
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s=%s refused: %v", tt.name, tt.value, err)
		case !tt.ok && err == nil:
			t.Errorf("%s=%s accepted", tt.name, tt.value)
		case !tt.ok && !strings.HasPrefix(err.Error(), tt.name):
			t.Errorf("%s=%s: error %q does not start with the variable", tt.name, tt.value, err)
		case !tt.ok && strings.Contains(err.Error(), ":p@"):
			t.Errorf("%s: error repeats the password: %q", tt.name, err)
		}
	}
}

// /metrics on an address other hosts can reach needs a bearer token file;
// on loopback it may go without.
func TestMetricsOffLoopbackNeedsAToken(t *testing.T) {
	for _, tt := range []struct {
		addr, tokenFile string
		ok              bool
	}{
		{":18492", "", false},
		{"0.0.0.0:9090", "", false},
		{"[::]:9090", "", false},
		{"10.0.0.5:9090", "", false},
		{"metrics.internal:9090", "", false},
		{"10.0.0.5:9090", "/etc/payreq/secrets/metrics-token", true},
		{":9090", "/etc/payreq/secrets/metrics-token", true},
		{"127.0.0.1:9090", "", true},
		{"[::1]:9090", "", true},
		{"localhost:9090", "", true},
	} {
		env := map[string]string{"PAYREQ_METRICS_ADDR": tt.addr, "PAYREQ_METRICS_TOKEN_FILE": tt.tokenFile}
		c, err := parse(func(k string) string { return env[k] })
		switch {
		case tt.ok && (err != nil || c.MetricsTokenFile != tt.tokenFile):
			t.Errorf("%s with token file %q: %+v, %v", tt.addr, tt.tokenFile, c.MetricsTokenFile, err)
		case !tt.ok && (err == nil || !strings.HasPrefix(err.Error(), "PAYREQ_METRICS_ADDR") || !strings.Contains(err.Error(), "PAYREQ_METRICS_TOKEN_FILE")):
			t.Errorf("%s without a token file: %v", tt.addr, err)
		}
	}
}

// HSTS is on by default exactly when the public URL is https; PAYREQ_HSTS
// decides otherwise.
func TestHSTSFollowsThePublicURL(t *testing.T) {
	for _, tc := range []struct {
		url, hsts string
		want      bool
	}{
		{"https://pay.example.com", "", true},
		{"http://127.0.0.1:8080", "", false},
		{"https://pay.example.com", "false", false},
		{"http://127.0.0.1:8080", "true", true},
	} {
		c, err := parse(func(k string) string {
			return map[string]string{"PAYREQ_PUBLIC_URL": tc.url, "PAYREQ_HSTS": tc.hsts}[k]
		})
		if err != nil || c.HSTS != tc.want {
			t.Errorf("PAYREQ_PUBLIC_URL=%s PAYREQ_HSTS=%q: HSTS %v (%v), want %v", tc.url, tc.hsts, c.HSTS, err, tc.want)
		}
	}
}

// The workers' and loops' intervals: payreq serve's defaults, each
// settable within its bounds.
func TestWorkerIntervals(t *testing.T) {
	for _, v := range []struct {
		name      string
		field     func(Config) time.Duration
		def       time.Duration
		set, bad  string
		setParsed time.Duration
	}{
		{"PAYREQ_SCHEDULE_POLL_INTERVAL", func(c Config) time.Duration { return c.SchedulePollInterval }, 10 * time.Second, "1s", "2m", time.Second},
		{"PAYREQ_PENDING_POLL_INTERVAL", func(c Config) time.Duration { return c.PendingPollInterval }, 5 * time.Second, "1s", "2m", time.Second},
		{"PAYREQ_DEPOSIT_POLL_INTERVAL", func(c Config) time.Duration { return c.DepositPollInterval }, time.Minute, "10s", "2h", 10 * time.Second},
		{"PAYREQ_HOUSEKEEPING_INTERVAL", func(c Config) time.Duration { return c.HousekeepingInterval }, time.Minute, "10s", "10ms", 10 * time.Second},
	} {
		c, err := parse(func(string) string { return "" })
		if err != nil || v.field(c) != v.def {
			t.Errorf("%s: default %v (%v), want %v", v.name, v.field(c), err, v.def)
		}
		env := func(value string) func(string) string {
			return func(k string) string {
				if k == v.name {
					return value
				}
				return ""
			}
		}
		if c, err = parse(env(v.set)); err != nil || v.field(c) != v.setParsed {
			t.Errorf("%s=%s: %v (%v), want %v", v.name, v.set, v.field(c), err, v.setParsed)
		}
		if _, err = parse(env(v.bad)); err == nil || !strings.HasPrefix(err.Error(), v.name) {
			t.Errorf("%s=%s: error %v, want one naming the variable", v.name, v.bad, err)
		}
	}
}
