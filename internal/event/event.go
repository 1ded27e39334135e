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

	"github.com/payreq/payreq/internal/auth"
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

// Permission is the permission protecting the data of events of type t: a
// key needs it beside events.view to read them, and beside webhooks.manage
// to subscribe to them or send them again. "" for webhook.ping, whose data
// is the endpoint's own.
func Permission(t string) string {
	switch t {
	case WebhookPing:
		return ""
	case ApplicationStage:
		return auth.ApplicationsView
	default: // invoice.*, card_payment.*, saved_card.*, deposit.*
		return auth.PaymentsView
	}
}

// Readable lists the types whose data permissions allow reading.
func Readable(permissions []string) []string {
	var out []string
	for _, t := range Types {
		if p := Permission(t); p == "" || slices.Contains(permissions, p) {
			out = append(out, t)
		}
	}
	return out
}

// ReceivedBy lists the types an organization of kind receives, what a
// subscription to "*" stands for.
func ReceivedBy(kind string) []string {
	if kind == auth.KindReseller {
		return []string{ApplicationStage, WebhookPing}
	}
	return slices.DeleteFunc(slices.Clone(Types), func(t string) bool { return t == ApplicationStage })
}

// Recorder records an event of the organization in tx. Subject is what the
// event is about: the id of an invoice, card payment, deposit or
// application (read again inside tx, as it stands at that moment), an
// invoice the change has just read inside tx, or a saved card that is
// being removed.
type Recorder interface {
	Record(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, typ string, subject any) error
}
