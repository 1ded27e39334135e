package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/webhook"
)

// The receiver takes a delivery signed as payreq signs it (with the
// previous secret's signature beside it, as during a rotation), prints it
// once however often it comes, and refuses one signed otherwise.
func TestReceiverVerifiesAndDeduplicates(t *testing.T) {
	key, old := make([]byte, 32), make([]byte, 32)
	rand.Read(key)
	rand.Read(old)
	var out bytes.Buffer
	h := receiver("whsec_"+base64.StdEncoding.EncodeToString(key), &out)
	body := []byte(`{"id":"0190f3a2-7b1c-7d4e-9a5b-3c2d1e0f9a8b","type":"webhook.ping","createdAt":"2026-11-25T06:00:00Z",` +
		`"data":{"endpointId":"0190f3a1-1a2b-7c3d-8e4f-5a6b7c8d9e0f","message":"A test event from payreq."}}`)
	post := func(keys ...[]byte) int {
		ts := time.Now().Unix()
		req := httptest.NewRequest(http.MethodPost, "/payreq", bytes.NewReader(body))
		req.Header.Set("webhook-id", "0190f3a2-7b1c-7d4e-9a5b-3c2d1e0f9a8b")
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("webhook-signature", webhook.Sign(keys, "0190f3a2-7b1c-7d4e-9a5b-3c2d1e0f9a8b", ts, body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post(key, old); code != http.StatusNoContent {
		t.Fatalf("a signed delivery: %d", code)
	}
	if code := post(key); code != http.StatusNoContent {
		t.Fatalf("the same delivery again: %d", code)
	}
	if code := post(old); code != http.StatusBadRequest {
		t.Fatalf("a delivery signed with another secret: %d", code)
	}
	if got := out.String(); got != "webhook.ping 0190f3a2-7b1c-7d4e-9a5b-3c2d1e0f9a8b\n" {
		t.Fatalf("printed %q", got)
	}
}
