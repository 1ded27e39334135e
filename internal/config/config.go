// Package config reads the server's configuration from the environment.
// Every variable is documented, with its default, in docs/operations.md.
package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/processor"
)

// Config is the whole configuration of payreq.
type Config struct {
	DatabaseURL string // DATABASE_URL; empty: private cluster under DataDir
	// The connection pool: its size, its idle connections, and whether
	// statements are prepared (false for PgBouncer's transaction pooling).
	DBMaxOpenConns          int           // PAYREQ_DB_MAX_OPEN_CONNS
	DBMaxIdleConns          int           // PAYREQ_DB_MAX_IDLE_CONNS
	DBPreparedStatements    bool          // PAYREQ_DB_PREPARED_STATEMENTS
	Addr                    string        // PAYREQ_ADDR
	PublicURL               string        // PAYREQ_PUBLIC_URL
	DataDir                 string        // PAYREQ_DATA_DIR
	RevocationCheckInterval time.Duration // PAYREQ_REVOCATION_CHECK_INTERVAL
	TrustedProxies          []*net.IPNet  // PAYREQ_TRUSTED_PROXIES
	RateLimit               float64       // PAYREQ_RATE_LIMIT, requests per second per key
	RateBurst               int           // PAYREQ_RATE_BURST
	SMTPURL                 string        // PAYREQ_SMTP_URL
	SMSURL                  string        // PAYREQ_SMS_URL
	Processor               string        // PAYREQ_PROCESSOR
	CardPointeURL           string        // PAYREQ_CARDPOINTE_URL
	// TerminalURL is CardPointe's Integrated Terminal API,
	// https://KEY@host/api/v2, for PAYREQ_PROCESSOR=cardpointe; empty:
	// no terminals (with the simulator, its terminals).
	TerminalURL string // PAYREQ_TERMINAL_URL
	// TerminalTimeout: a terminal payment pending longer is looked up at
	// the gateway by its order id.
	TerminalTimeout time.Duration // PAYREQ_TERMINAL_TIMEOUT
	// TerminalPollInterval is how often pending terminal payments are
	// looked for.
	TerminalPollInterval time.Duration // PAYREQ_TERMINAL_POLL_INTERVAL
	// SettlementCutoff is the local time of day (from midnight) at which
	// each MID's batch closes.
	SettlementCutoff time.Duration  // PAYREQ_SETTLEMENT_CUTOFF, HH:MM
	SimulatorFees    processor.Fees // PAYREQ_SIMULATOR_FEES
	// Webhooks: private or plain-http endpoints allowed (development);
	// an attempt's time limit; the waits before retries.
	WebhookAllowPrivate  bool            // PAYREQ_WEBHOOK_ALLOW_PRIVATE
	WebhookTimeout       time.Duration   // PAYREQ_WEBHOOK_TIMEOUT
	WebhookRetrySchedule []time.Duration // PAYREQ_WEBHOOK_RETRY_SCHEDULE
	SigningKeyFile       string          // PAYREQ_SIGNING_KEY_FILE
	PepperFile           string          // PAYREQ_PEPPER_FILE
	EncryptionKeyFile    string          // PAYREQ_ENCRYPTION_KEY_FILE
	LogLevel             string          // PAYREQ_LOG_LEVEL
	// RequestTimeout bounds each API request, database work included; past
	// it the answer is 503.
	RequestTimeout time.Duration // PAYREQ_REQUEST_TIMEOUT
	// CardPointeTimeout bounds an authorisation at the gateway; its other
	// calls (void, profile delete) get two thirds of it.
	CardPointeTimeout time.Duration // PAYREQ_CARDPOINTE_TIMEOUT
	// Delivery worker tuning; zero means the delivery package's default.
	DeliveryPollInterval time.Duration // PAYREQ_DELIVERY_POLL_INTERVAL
	// SchedulePollInterval is how often scheduled sends, due reminders and
	// recurring invoices' due occurrences are looked for.
	SchedulePollInterval time.Duration // PAYREQ_SCHEDULE_POLL_INTERVAL
	// PendingPollInterval is how often charges and refunds whose outcome
	// was lost are looked for, to be voided at the processor.
	PendingPollInterval time.Duration // PAYREQ_PENDING_POLL_INTERVAL
	// DepositPollInterval is how often due batches are closed into
	// deposits and arrived deposits marked paid.
	DepositPollInterval time.Duration // PAYREQ_DEPOSIT_POLL_INTERVAL
	// HousekeepingInterval is how often expired rows are deleted.
	HousekeepingInterval time.Duration // PAYREQ_HOUSEKEEPING_INTERVAL
	DeliveryLease        time.Duration // PAYREQ_DELIVERY_LEASE
	DeliveryBackoff      time.Duration // PAYREQ_DELIVERY_BACKOFF
	DeliveryBackoffMax   time.Duration // PAYREQ_DELIVERY_BACKOFF_MAX
	DeliveryMaxAttempts  int           // PAYREQ_DELIVERY_MAX_ATTEMPTS
	// MetricsAddr serves /metrics (Prometheus) on a listener of its own; empty: none.
	MetricsAddr string // PAYREQ_METRICS_ADDR
	// MetricsTokenFile holds the bearer token scrapes must send; required
	// when MetricsAddr is not a loopback address.
	MetricsTokenFile string // PAYREQ_METRICS_TOKEN_FILE
	// TrustTraceparent continues a caller's traceparent (a deployment
	// behind a gateway of its own); otherwise a request starts a trace of
	// its own, linked to the caller's.
	TrustTraceparent bool // PAYREQ_TRUST_TRACEPARENT
	// DebugAddr is a loopback address for pprof (/debug/pprof/); empty: none.
	DebugAddr string // PAYREQ_DEBUG_ADDR
	// ValidateRequests: a benchmark-only knob. make bench turns it off in
	// one run to price the validator; a service never does.
	ValidateRequests bool // PAYREQ_VALIDATE_REQUESTS
	// HSTS sends Strict-Transport-Security from every front; by default
	// when PAYREQ_PUBLIC_URL is https.
	HSTS bool // PAYREQ_HSTS
}

// FromEnv reads the configuration; an invalid value is an error naming the variable.
func FromEnv() (Config, error) { return parse(os.Getenv) }

func parse(getenv func(string) string) (Config, error) {
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	c := Config{
		DatabaseURL: get("DATABASE_URL", ""),
		Addr:        get("PAYREQ_ADDR", "127.0.0.1:8080"),
		DataDir:     get("PAYREQ_DATA_DIR", ".data"),
		SMTPURL:     get("PAYREQ_SMTP_URL", ""),
		SMSURL:      get("PAYREQ_SMS_URL", ""),
		Processor:   get("PAYREQ_PROCESSOR", "simulator"),
		// https://user:password@host/cardconnect/rest, for PAYREQ_PROCESSOR=cardpointe.
		CardPointeURL: get("PAYREQ_CARDPOINTE_URL", ""),
		TerminalURL:   get("PAYREQ_TERMINAL_URL", ""),
		LogLevel:      get("PAYREQ_LOG_LEVEL", "info"),
	}
	c.PublicURL = strings.TrimRight(get("PAYREQ_PUBLIC_URL", "http://"+c.Addr), "/")
	c.SigningKeyFile = get("PAYREQ_SIGNING_KEY_FILE", filepath.Join(c.DataDir, "signing-key.pem"))
	c.PepperFile = get("PAYREQ_PEPPER_FILE", filepath.Join(c.DataDir, "pepper"))
	c.EncryptionKeyFile = get("PAYREQ_ENCRYPTION_KEY_FILE", filepath.Join(c.DataDir, "encryption-key"))

	var err error
	duration := func(name, def string, min, max time.Duration) (time.Duration, error) {
		raw := get(name, def)
		if raw == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(raw)
		if err != nil || d < min || d > max {
			return 0, fmt.Errorf("%s must be a Go duration from %v to %v, such as 10s", name, min, max)
		}
		return d, nil
	}
	if c.RequestTimeout, err = duration("PAYREQ_REQUEST_TIMEOUT", "10s", 100*time.Millisecond, 5*time.Minute); err != nil {
		return Config{}, err
	}
	if c.CardPointeTimeout, err = duration("PAYREQ_CARDPOINTE_TIMEOUT", "15s", 100*time.Millisecond, 2*time.Minute); err != nil {
		return Config{}, err
	}
	for _, d := range []struct {
		name     string
		to       *time.Duration
		def      string
		min, max time.Duration
	}{
		{"PAYREQ_SCHEDULE_POLL_INTERVAL", &c.SchedulePollInterval, "10s", 100 * time.Millisecond, time.Minute},
		{"PAYREQ_PENDING_POLL_INTERVAL", &c.PendingPollInterval, "5s", 100 * time.Millisecond, time.Minute},
		{"PAYREQ_DEPOSIT_POLL_INTERVAL", &c.DepositPollInterval, "1m", time.Second, time.Hour},
		{"PAYREQ_HOUSEKEEPING_INTERVAL", &c.HousekeepingInterval, "1m", time.Second, time.Hour},
		{"PAYREQ_TERMINAL_TIMEOUT", &c.TerminalTimeout, "3m", time.Second, 30 * time.Minute},
		{"PAYREQ_TERMINAL_POLL_INTERVAL", &c.TerminalPollInterval, "1s", 10 * time.Millisecond, time.Minute},
	} {
		if *d.to, err = duration(d.name, d.def, d.min, d.max); err != nil {
			return Config{}, err
		}
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
		max  time.Duration
	}{
		{"PAYREQ_DELIVERY_POLL_INTERVAL", &c.DeliveryPollInterval, time.Minute},
		{"PAYREQ_DELIVERY_LEASE", &c.DeliveryLease, time.Hour},
		{"PAYREQ_DELIVERY_BACKOFF", &c.DeliveryBackoff, time.Hour},
		{"PAYREQ_DELIVERY_BACKOFF_MAX", &c.DeliveryBackoffMax, 24 * time.Hour},
	} {
		if *d.to, err = duration(d.name, "", time.Millisecond, d.max); err != nil {
			return Config{}, err
		}
	}
	if v := get("PAYREQ_DELIVERY_MAX_ATTEMPTS", ""); v != "" {
		if c.DeliveryMaxAttempts, err = strconv.Atoi(v); err != nil || c.DeliveryMaxAttempts < 1 || c.DeliveryMaxAttempts > 100 {
			return Config{}, fmt.Errorf("PAYREQ_DELIVERY_MAX_ATTEMPTS must be an integer from 1 to 100")
		}
	}
	c.MetricsTokenFile = get("PAYREQ_METRICS_TOKEN_FILE", "")
	if c.MetricsAddr = get("PAYREQ_METRICS_ADDR", ""); c.MetricsAddr != "" {
		host, _, err := net.SplitHostPort(c.MetricsAddr)
		if err != nil {
			return Config{}, fmt.Errorf("PAYREQ_METRICS_ADDR must be host:port, such as 127.0.0.1:9090 or 10.0.0.5:9090")
		}
		if !isLoopback(host) && c.MetricsTokenFile == "" {
			return Config{}, fmt.Errorf("PAYREQ_METRICS_ADDR %s is reachable from other hosts: set PAYREQ_METRICS_TOKEN_FILE too (scrapes then send Authorization: Bearer <its token>), or listen on loopback such as 127.0.0.1:9090", c.MetricsAddr)
		}
	}
	if c.DebugAddr = get("PAYREQ_DEBUG_ADDR", ""); c.DebugAddr != "" {
		host, _, err := net.SplitHostPort(c.DebugAddr)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return Config{}, fmt.Errorf("PAYREQ_DEBUG_ADDR must be a loopback address such as 127.0.0.1:6060: it serves profiles to anyone who can reach it")
		}
	}
	if c.RevocationCheckInterval, err = time.ParseDuration(get("PAYREQ_REVOCATION_CHECK_INTERVAL", "15s")); err != nil || c.RevocationCheckInterval <= 0 || c.RevocationCheckInterval > time.Minute {
		return Config{}, fmt.Errorf("PAYREQ_REVOCATION_CHECK_INTERVAL must be a Go duration between 0 and 1m, such as 15s")
	}
	if c.RateLimit, err = strconv.ParseFloat(get("PAYREQ_RATE_LIMIT", "100"), 64); err != nil || c.RateLimit <= 0 {
		return Config{}, fmt.Errorf("PAYREQ_RATE_LIMIT must be a positive number of requests per second")
	}
	if c.RateBurst, err = strconv.Atoi(get("PAYREQ_RATE_BURST", "200")); err != nil || c.RateBurst <= 0 {
		return Config{}, fmt.Errorf("PAYREQ_RATE_BURST must be a positive integer")
	}
	for _, cidr := range strings.Split(get("PAYREQ_TRUSTED_PROXIES", ""), ",") {
		if cidr = strings.TrimSpace(cidr); cidr == "" {
			continue
		}
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return Config{}, fmt.Errorf("PAYREQ_TRUSTED_PROXIES: %q is not a CIDR such as 10.0.0.0/8", cidr)
		}
		c.TrustedProxies = append(c.TrustedProxies, n)
	}
	cutoff, err := time.Parse("15:04", get("PAYREQ_SETTLEMENT_CUTOFF", "22:00"))
	if err != nil {
		return Config{}, fmt.Errorf("PAYREQ_SETTLEMENT_CUTOFF must be a time of day HH:MM, such as 22:00")
	}
	c.SettlementCutoff = time.Duration(cutoff.Hour())*time.Hour + time.Duration(cutoff.Minute())*time.Minute
	if c.SimulatorFees, err = processor.ParseFees(get("PAYREQ_SIMULATOR_FEES", "2.9%+0.30")); err != nil {
		return Config{}, fmt.Errorf("PAYREQ_SIMULATOR_FEES: %w", err)
	}
	for _, n := range []struct {
		name string
		to   *int
		def  string
	}{{"PAYREQ_DB_MAX_OPEN_CONNS", &c.DBMaxOpenConns, "20"}, {"PAYREQ_DB_MAX_IDLE_CONNS", &c.DBMaxIdleConns, ""}} {
		if v := get(n.name, n.def); v != "" {
			if *n.to, err = strconv.Atoi(v); err != nil || *n.to < 1 || *n.to > 1000 {
				return Config{}, fmt.Errorf("%s must be an integer from 1 to 1000", n.name)
			}
		}
	}
	if c.DBMaxIdleConns > c.DBMaxOpenConns {
		return Config{}, fmt.Errorf("PAYREQ_DB_MAX_IDLE_CONNS must be at most PAYREQ_DB_MAX_OPEN_CONNS (%d)", c.DBMaxOpenConns)
	}
	if c.DBPreparedStatements, err = strconv.ParseBool(get("PAYREQ_DB_PREPARED_STATEMENTS", "true")); err != nil {
		return Config{}, fmt.Errorf("PAYREQ_DB_PREPARED_STATEMENTS must be true or false")
	}
	if c.WebhookAllowPrivate, err = strconv.ParseBool(get("PAYREQ_WEBHOOK_ALLOW_PRIVATE", "false")); err != nil {
		return Config{}, fmt.Errorf("PAYREQ_WEBHOOK_ALLOW_PRIVATE must be true or false")
	}
	if c.WebhookTimeout, err = duration("PAYREQ_WEBHOOK_TIMEOUT", "15s", 10*time.Millisecond, time.Minute); err != nil {
		return Config{}, err
	}
	for _, raw := range strings.Split(get("PAYREQ_WEBHOOK_RETRY_SCHEDULE", "5s,5m,30m,2h,5h,10h,14h,20h,24h"), ",") {
		d, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil || d <= 0 || d > 48*time.Hour {
			return Config{}, fmt.Errorf("PAYREQ_WEBHOOK_RETRY_SCHEDULE must be Go durations separated by commas, such as 5s,5m,30m")
		}
		c.WebhookRetrySchedule = append(c.WebhookRetrySchedule, d)
	}
	if c.Processor != "simulator" && c.Processor != "cardpointe" {
		return Config{}, fmt.Errorf("PAYREQ_PROCESSOR must be simulator or cardpointe")
	}
	if c.Processor == "cardpointe" && c.CardPointeURL == "" {
		return Config{}, fmt.Errorf("PAYREQ_CARDPOINTE_URL is required when PAYREQ_PROCESSOR is cardpointe (https://user:password@host/cardconnect/rest)")
	}
	if err := checkPublicURL(c.PublicURL); err != nil {
		return Config{}, err
	}
	for _, u := range []struct{ name, value string }{{"PAYREQ_CARDPOINTE_URL", c.CardPointeURL}, {"PAYREQ_SMS_URL", c.SMSURL}} {
		if err := checkProviderURL(u.name, u.value); err != nil {
			return Config{}, err
		}
	}
	if err := checkSMTPURL(c.SMTPURL); err != nil {
		return Config{}, err
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return Config{}, err
	}
	if c.TrustTraceparent, err = strconv.ParseBool(get("PAYREQ_TRUST_TRACEPARENT", "false")); err != nil {
		return Config{}, fmt.Errorf("PAYREQ_TRUST_TRACEPARENT must be true or false")
	}
	if c.ValidateRequests, err = strconv.ParseBool(get("PAYREQ_VALIDATE_REQUESTS", "true")); err != nil {
		return Config{}, fmt.Errorf("PAYREQ_VALIDATE_REQUESTS must be true or false")
	}
	if c.HSTS, err = strconv.ParseBool(get("PAYREQ_HSTS", strconv.FormatBool(strings.HasPrefix(c.PublicURL, "https://")))); err != nil {
		return Config{}, fmt.Errorf("PAYREQ_HSTS must be true or false")
	}
	return c, nil
}

// checkPublicURL: the base of pay links, problem types and the token
// issuer must be an absolute http(s) URL with nothing after its path.
func checkPublicURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("PAYREQ_PUBLIC_URL must be an absolute http:// or https:// URL without user, query or fragment, such as https://pay.example.com")
	}
	return nil
}

// checkProviderURL: a provider's URL carries credentials and card or
// customer data, so it is https, or http only to this machine. Its text
// (which holds a password) is never repeated in the error.
func checkProviderURL(name, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("%s must be an absolute https:// URL", name)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%s must be an https:// URL (plain http:// only to a loopback address)", name)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkSMTPURL: smtp:// (STARTTLS required) or smtps:// (TLS throughout);
// smtp://…?tls=none, plain text to a local relay, only without credentials.
func checkSMTPURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Host == "" {
		return fmt.Errorf("PAYREQ_SMTP_URL must be smtp://user:password@host:587?from=… (STARTTLS) or smtps://… (TLS)")
	}
	switch mode := u.Query().Get("tls"); {
	case mode == "":
	case mode != "none":
		return fmt.Errorf("PAYREQ_SMTP_URL: tls takes only the value none")
	case u.Scheme != "smtp" || u.User != nil:
		return fmt.Errorf("PAYREQ_SMTP_URL: tls=none (plain text, for a local relay) is for smtp:// without user or password")
	}
	return nil
}
