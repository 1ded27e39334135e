// Package event names the events payreq records and the one way a change
// records its event: Recorder.Record, called inside the change's own
// transaction, so that a change never commits without its event nor an
// event without its change. The recorder itself (package webhook) renders
// the event's data as the API shows it and queues its webhook deliveries.
package event

import (
	"context"
	"slices"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// Types of events (a closed list; openapi.yaml documents each).
const (
	InvoiceCreated      = "invoice.created"
	InvoiceSent         = "invoice.sent"
	InvoiceSendFailed   = "invoice.send_failed"
	InvoicePartPaid     = "invoice.part_paid"
	InvoicePaid         = "invoice.paid"
	InvoiceCancelled    = "invoice.cancelled"
	CardPaymentApproved = "card_payment.approved"
	CardPaymentDeclined = "card_payment.declined"
	CardPaymentRefunded = "card_payment.refunded"
	SavedCardRemoved    = "saved_card.removed"
	DepositCreated      = "deposit.created"
	DepositPaid         = "deposit.paid"
	ApplicationStage    = "application.stage_changed"
	WebhookPing         = "webhook.ping"
)

// Types lists every type.
var Types = []string{InvoiceCreated, InvoiceSent, InvoiceSendFailed, InvoicePartPaid, InvoicePaid, InvoiceCancelled,
	CardPaymentApproved, CardPaymentDeclined, CardPaymentRefunded, SavedCardRemoved, DepositCreated, DepositPaid,
	ApplicationStage, WebhookPing}

// Known says whether t is a type of event.
func Known(t string) bool { return slices.Contains(Types, t) }

// Recorder records an event of the organization in tx. Subject is what the
// event is about: the id of an invoice, card payment, deposit or
// application (read again inside tx, as it stands at that moment), an
// invoice the change has just read inside tx, or a saved card that is
// being removed.
type Recorder interface {
	Record(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, typ string, subject any) error
}
