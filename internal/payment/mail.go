package payment

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/people"
)

// Members queues the emails to the members who chose to hear of a
// payment's outcome (people.Store.Notify), in the transaction that
// records it.
type Members = invoice.Members

// queueReceipt queues, inside tx, the customer's receipt of the approved
// card payment id (a sale or a refund) toward inv, when the invoice has an
// email and the organization's receipts are on: once per payment
// (delivery.Enqueue keeps a second one out).
func queueReceipt(ctx context.Context, tx *sqlx.Tx, inv *invoice.Locked, id uuid.UUID, at time.Time) error {
	email := inv.CustomerEmail
	if email == "" {
		return nil
	}
	on, err := directory.Receipts(ctx, tx, inv.OrganizationID)
	if err != nil || !on {
		return err
	}
	return delivery.Enqueue(ctx, tx, delivery.Message{ID: uuid.Must(uuid.NewV7()), Kind: delivery.KindReceipt,
		OrganizationID: inv.OrganizationID, InvoiceID: inv.ID, PaymentID: id, Channel: delivery.ChannelEmail,
		Recipient: email, At: at})
}

// notify queues n for the members who chose it, when there are members to
// tell (Members is set).
func (s *Store) notify(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, n people.Notification, at time.Time) error {
	if s.Members == nil {
		return nil
	}
	return s.Members.Notify(ctx, tx, org, n, at)
}

// invoicePage is the portal's page of the invoice, for the members' emails.
func (s *Store) invoicePage(id uuid.UUID) string {
	return s.Invoices.PublicURL + "/portal/invoices/" + id.String()
}

// notifyDeclined tells of the declined card payment p (a sale or a refund)
// toward inv: its amount, the invoice and the processor's reason, never
// more of the card than its brand and last four digits.
func (s *Store) notifyDeclined(ctx context.Context, tx *sqlx.Tx, inv *invoice.Locked, p CardPayment, at time.Time) error {
	what := "A card payment"
	if p.Kind == Refund {
		what = "A refund"
	}
	card := "card"
	if b := optional.Value(p.CardBrand); b != "" {
		card = b
	}
	if l := optional.Value(p.LastFour); l != "" {
		card += " ending in " + l
	}
	return s.notify(ctx, tx, inv.OrganizationID, people.Notification{
		Choice: people.NotifyCardDeclined, Permission: event.Permission(event.CardPaymentDeclined.Name),
		Subject: what + " of " + invoice.Money(p.Amount) + " on invoice " + inv.InvoiceNumber + " was declined",
		Text: what + " of " + invoice.Money(p.Amount) + " on invoice " + inv.InvoiceNumber + " (" + card + ") was declined: " +
			clip.Marked(strings.Join(strings.Fields(optional.Value(p.DeclineReason)), " "), 200) + "\n\n" + s.invoicePage(inv.ID),
	}, at)
}

// notifyDeposit tells of the deposit d paid into the bank account.
func (s *Store) notifyDeposit(ctx context.Context, tx *sqlx.Tx, d Deposit, at time.Time) error {
	return s.notify(ctx, tx, d.OrganizationID, people.Notification{
		Choice: people.NotifyDepositPaid, Permission: event.Permission(event.DepositPaid.Name),
		Subject: "Deposit of " + invoice.Money(d.NetAmount) + " paid",
		Text: "The deposit of " + invoice.Money(d.NetAmount) + " for the sales of " + d.BatchDate.Format("January 2, 2006") +
			" (MID " + d.MID + ") was paid into your bank account.\n\n" + s.Invoices.PublicURL + "/portal/deposits/" + d.ID.String(),
	}, at)
}
