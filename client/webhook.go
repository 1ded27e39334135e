package payreq

import (
	"fmt"
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payreq/payreq/gen/client"
)

// VerifyWebhook checks a webhook delivery with the Standard Webhooks
// reference library, as any Standard Webhooks consumer would: one of the
// webhook-signature header's signatures (two during a secret rotation) is
// the HMAC-SHA256 of webhook-id.webhook-timestamp.body under secret (the
// whsec_… string payreq answered when the endpoint was made or its secret
// rotated), and webhook-timestamp is within 5 minutes of now. It returns
// the event; ValueByDiscriminator gives its typed form (InvoicePaidEvent,
// CardPaymentRefundedEvent, …). Deliveries come at least once:
// deduplicate by the event's id (the webhook-id header).
func VerifyWebhook(secret string, header http.Header, body []byte) (client.Event, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return client.Event{}, fmt.Errorf("payreq: webhook secret: %w", err)
	}
	if err := wh.Verify(body, header); err != nil {
		return client.Event{}, fmt.Errorf("payreq: webhook not verified: %w", err)
	}
	var ev client.Event
	if err := ev.UnmarshalJSON(body); err != nil {
		return client.Event{}, fmt.Errorf("payreq: webhook body: %w", err)
	}
	return ev, nil
}
