// Package delivery sends pay links, and reminders of unpaid invoices, to
// customers through a transactional outbox. It owns the table outbox; what it needs of invoices it asks the
// invoice package (Invoices, handed in when a worker is made).
//
// The invoice code writes a message row with Enqueue in the same transaction
// that creates or sends the invoice, so a committed send is never lost and a
// rolled-back one never goes out. A Worker, run inside `payreq serve`, claims
// due rows with FOR UPDATE SKIP LOCKED (several instances share the work),
// sets a lease so that a message whose worker died is tried again, renders the
// message from the invoice as it is at that moment, delivers it and records the
// outcome. Delivery is at least once; the outbox id is the message id the
// provider sees (the email Message-ID, the SMS idempotency key), so a repeat
// can be recognised.
//
// Providers:
//   - PAYREQ_SMTP_URL, e.g. smtp://user:pass@mail.example.com:587?from=billing@example.com:
//     smtp:// requires STARTTLS (default port 587): a server that does not
//     offer it gets neither a login nor the message; smtps:// uses TLS from
//     the first byte (default port 465); smtp://…?tls=none is plain text, for
//     a local relay, and takes no credentials. With a user in the URL the
//     client authenticates, choosing the strongest mechanism the server
//     offers. `from` is the sender address; it may be left out when the user
//     name is an address.
//   - PAYREQ_SMS_URL, e.g. https://AC123:token@api.twilio.com/2010-04-01/Accounts/AC123/Messages.json?from=%2B15550000000:
//     a Twilio-style form POST (To, From, Body) with HTTP Basic from the URL's
//     user and password; `from` is taken out of the URL and sent as From. A
//     redirect is not followed: it is a failed try.
//   - Neither: messages are written to files under <data dir>/outbox/.
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/vault"
)

// Channels a message goes out through; the same words as an invoice's delivery.
const (
	ChannelEmail = "email"
	ChannelText  = "text"
)

// Kinds of message.
const (
	// KindPayLink is the invoice and its pay link (the default).
	KindPayLink = "pay_link"
	// KindReminder reminds the customer of the balance and the due date,
	// with the pay link; it is not sent once the invoice is paid or
	// cancelled.
	KindReminder = "reminder"
	// KindReceipt is the receipt of one approved card payment (a sale or
	// a refund), with its PDF: queued once per payment, by email only.
	KindReceipt = "receipt"
)

// Message is a pay link, a reminder or a receipt to send: one row of the
// outbox.
type Message struct {
	// ID is the message id the provider sees; a new uuid for every send.
	ID uuid.UUID
	// Kind is KindPayLink ("" too), KindReminder or KindReceipt.
	Kind           string
	OrganizationID uuid.UUID
	InvoiceID      uuid.UUID
	// PaymentID is a receipt's card payment (uuid.Nil for the other
	// kinds): its receipt is queued once, however often this is asked.
	PaymentID uuid.UUID
	// Channel is ChannelEmail or ChannelText.
	Channel string
	// Recipient is the email address or the phone number.
	Recipient string
	// At is when the send was decided; the message is due from then on.
	At time.Time
}

// Enqueue writes the message to the outbox inside the caller's transaction, so
// it is sent if and only if the transaction commits.
func Enqueue(ctx context.Context, tx *sqlx.Tx, m Message) error {
	switch {
	case m.ID == uuid.Nil || m.OrganizationID == uuid.Nil || m.InvoiceID == uuid.Nil:
		return errors.New("delivery: unable to enqueue message: missing id")
	case m.Channel != ChannelEmail && m.Channel != ChannelText:
		return fmt.Errorf("delivery: unable to enqueue message: unknown channel %q", m.Channel)
	case m.Recipient == "":
		return errors.New("delivery: unable to enqueue message: no recipient")
	case m.At.IsZero():
		return errors.New("delivery: unable to enqueue message: no time")
	case m.Kind != "" && m.Kind != KindPayLink && m.Kind != KindReminder && m.Kind != KindReceipt:
		return fmt.Errorf("delivery: unable to enqueue message: unknown kind %q", m.Kind)
	case (m.Kind == KindReceipt) != (m.PaymentID != uuid.Nil):
		return errors.New("delivery: unable to enqueue message: a receipt, and only a receipt, names its payment")
	case m.Kind == KindReceipt && m.Channel != ChannelEmail:
		return errors.New("delivery: unable to enqueue receipt: receipts go by email")
	}
	if m.Kind == KindReceipt {
		// The unique index on a receipt's payment: a payment recorded
		// again (a retry, another instance) queues no second receipt.
		_, err := tx.ExecContext(ctx, `INSERT INTO outbox
			(id, organization_id, invoice_id, channel, recipient, next_attempt_at, created_at, kind, payment_id)
			VALUES ($1, $2, $3, 'email', $4, $5, $5, 'receipt', $6)
			ON CONFLICT (payment_id) WHERE kind = 'receipt' DO NOTHING`,
			m.ID, m.OrganizationID, m.InvoiceID, m.Recipient, m.At, m.PaymentID)
		if err != nil {
			return fmt.Errorf("delivery: unable to enqueue receipt: %w", err)
		}
		return nil
	}
	if m.Kind == KindReminder {
		_, err := tx.ExecContext(ctx, `INSERT INTO outbox
			(id, organization_id, invoice_id, channel, recipient, next_attempt_at, created_at, kind)
			VALUES ($1, $2, $3, $4, $5, $6, $6, 'reminder')`,
			m.ID, m.OrganizationID, m.InvoiceID, m.Channel, m.Recipient, m.At)
		if err != nil {
			return fmt.Errorf("delivery: unable to enqueue reminder: %w", err)
		}
		return nil
	}
	// A pay link's statement is the one it always was (bench/pgbench
	// prices it); the column's default is its kind.
	_, err := tx.ExecContext(ctx, `INSERT INTO outbox
		(id, organization_id, invoice_id, channel, recipient, next_attempt_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		m.ID, m.OrganizationID, m.InvoiceID, m.Channel, m.Recipient, m.At)
	if err != nil {
		return fmt.Errorf("delivery: unable to enqueue message: %w", err)
	}
	return nil
}

// PayLinksSince counts the pay links of the invoice queued after since,
// inside the caller's transaction, and gives the oldest of them (zero when
// none): the invoice's send limit is counted here, on the messages
// themselves, whoever asked for them.
func PayLinksSince(ctx context.Context, tx *sqlx.Tx, invoiceID uuid.UUID, since time.Time) (n int, oldest time.Time, err error) {
	var first *time.Time
	err = tx.QueryRowContext(ctx, `SELECT count(*), min(created_at) FROM outbox
		WHERE invoice_id = $1 AND kind = 'pay_link' AND created_at > $2`, invoiceID, since).Scan(&n, &first)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("delivery: unable to count pay links: %w", err)
	}
	if first != nil {
		oldest = *first
	}
	return n, oldest, nil
}

// CancelPending marks the invoice's messages that are neither delivered nor
// failed as cancelled, inside the caller's transaction; a worker never claims
// them afterwards. A message already being delivered at that moment may still
// arrive; the worker also checks, just before sending, that the invoice is not
// cancelled. Receipts are left to go: the money they tell of moved.
func CancelPending(ctx context.Context, tx *sqlx.Tx, invoiceID uuid.UUID, at time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE outbox SET cancelled_at = $2
		WHERE invoice_id = $1 AND kind <> 'receipt'
		  AND delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL`,
		invoiceID, at)
	if err != nil {
		return fmt.Errorf("delivery: unable to cancel pending messages: %w", err)
	}
	return nil
}

// Notice is a message to a person about their sign-in (an invitation, a
// password reset, a lockout), not about an invoice. It holds a one-use
// link, so it is sealed in the outbox and cleared once delivered.
//
// A PasswordReset notice is a request, not yet a message: the worker asks
// Config.PasswordResets for its words, so that the request answered at
// once looked nothing up about the email (whether it has a sign-in).
type Notice struct {
	To            string `json:"to"`
	Subject       string `json:"subject"`
	Text          string `json:"text"`
	PasswordReset bool   `json:"passwordReset,omitempty"`
}

// Sealer seals a notice at rest (internal/vault).
type Sealer interface {
	Seal(plaintext, aad string) (sealed []byte, keyID string, err error)
}

func noticeAAD(id uuid.UUID) string { return "outbox:" + id.String() + ":notice" }

// EnqueueNotice writes an email notice to the outbox inside the caller's
// transaction; org is nil for a notice about no organization.
func EnqueueNotice(ctx context.Context, tx *sqlx.Tx, v Sealer, org *uuid.UUID, n Notice, at time.Time) error {
	if n.To == "" || n.Subject == "" || at.IsZero() {
		return errors.New("delivery: unable to enqueue notice: no recipient, subject or time")
	}
	id := uuid.Must(uuid.NewV7())
	raw, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("delivery: unable to enqueue notice: %w", err)
	}
	sealed, keyID, err := v.Seal(string(raw), noticeAAD(id))
	if err != nil {
		return fmt.Errorf("delivery: unable to enqueue notice: %w", err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO outbox
		(id, organization_id, channel, recipient, next_attempt_at, created_at, notice, notice_key_id)
		VALUES ($1, $2, 'email', $3, $4, $4, $5, $6)`, id, org, n.To, at, sealed, keyID)
	if err != nil {
		return fmt.Errorf("delivery: unable to enqueue notice: %w", err)
	}
	return nil
}

// ReencryptNotices re-seals, under the key current, every notice not yet
// delivered that is sealed under another key, a batch per transaction
// (rows a worker holds are skipped and taken in a later call), and
// returns how many it re-sealed.
func ReencryptNotices(ctx context.Context, db *sqlx.DB, v vault.Keys, current string) (int, error) {
	n, err := postgres.InBatches(ctx, db, func(tx *sqlx.Tx) (int, error) {
		var rows []struct {
			ID     uuid.UUID `db:"id"`
			Notice []byte    `db:"notice"`
			Key    string    `db:"notice_key_id"`
		}
		if err := tx.SelectContext(ctx, &rows, `SELECT id, notice, notice_key_id FROM outbox
			WHERE notice_key_id <> $1 LIMIT 100 FOR UPDATE SKIP LOCKED`, current); err != nil {
			return 0, err
		}
		for _, r := range rows {
			sealed, key, err := vault.Reseal(v, r.Notice, r.Key, noticeAAD(r.ID))
			if err != nil {
				return 0, fmt.Errorf("notice %s: %w", r.ID, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE outbox SET notice = $2, notice_key_id = $3 WHERE id = $1`, r.ID, sealed, key); err != nil {
				return 0, err
			}
		}
		return len(rows), nil
	})
	if err != nil {
		return n, fmt.Errorf("delivery: unable to re-seal notices: %w", err)
	}
	return n, nil
}

// Pending counts the messages still to be delivered: not delivered,
// failed or cancelled.
func Pending(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL`)
	if err != nil {
		return 0, fmt.Errorf("delivery: unable to count the outbox: %w", err)
	}
	return n, nil
}
