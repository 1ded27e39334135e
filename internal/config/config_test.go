package config

import (
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := parse(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || c.PublicURL != "http://127.0.0.1:8080" || c.DataDir != ".data" ||
		c.RevocationCheckInterval != 15*time.Second || c.Processor != "simulator" || c.SigningKeyFile != ".data/signing-key.pem" {
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
