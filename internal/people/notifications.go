package people

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/postgres"
)

// What a member may choose to hear of by email, each a column of
// memberships (notify_<choice>).
const (
	// NotifyInvoicePaid: an invoice is paid in full (on for Owners and
	// Admins until they choose).
	NotifyInvoicePaid = "invoice_paid"
	// NotifyCardDeclined: a card payment (a sale or a refund) is declined.
	NotifyCardDeclined = "card_declined"
	// NotifyDepositPaid: a deposit reached the bank account.
	NotifyDepositPaid = "deposit_paid"
	// NotifyTerminalFailed: a payment at a card terminal failed (kept for
	// the terminals to come; nothing sends it yet).
	NotifyTerminalFailed = "terminal_failed"
)

// ToOwners is no choice: a Notification with it goes to every Owner, as
// what an Owner must hear of (automatic payment ended with its card).
const ToOwners = "owners"

// Notifications lists the choices in the order the portal shows them.
var Notifications = []string{NotifyInvoicePaid, NotifyCardDeclined, NotifyDepositPaid, NotifyTerminalFailed}

// notifyColumn is the column of choice; "" when it is none.
func notifyColumn(choice string) string {
	for _, c := range Notifications {
		if c == choice {
			return "notify_" + c
		}
	}
	return ""
}

// choiceColumns read every choice of a membership m, the role's default
// in place of one never made.
const choiceColumns = `coalesce(m.notify_invoice_paid, m.role IN ('Owner', 'Admin')), m.notify_card_declined,
	m.notify_deposit_paid, m.notify_terminal_failed`

// NotificationChoices are the membership's choices: on or off, by choice.
func (s *Store) NotificationChoices(ctx context.Context, membership uuid.UUID) (map[string]bool, error) {
	var on [4]bool
	err := s.DB.QueryRowContext(ctx, `SELECT `+choiceColumns+` FROM memberships m WHERE m.id = $1 AND m.removed_at IS NULL`,
		membership).Scan(&on[0], &on[1], &on[2], &on[3])
	if err != nil {
		return nil, fmt.Errorf("people: unable to read notification choices: %w", err)
	}
	choices := make(map[string]bool, len(Notifications))
	for i, c := range Notifications {
		choices[c] = on[i]
	}
	return choices, nil
}

// SetNotificationChoices sets the actor's own choices: those in on are
// turned on, every other off; with the audit entry, in one transaction.
func (s *Store) SetNotificationChoices(ctx context.Context, actor Actor, on []string) error {
	if actor.Membership == nil {
		return fmt.Errorf("people: notification choices are a member's own")
	}
	m := actor.Membership
	set := map[string]bool{}
	for _, c := range on {
		if notifyColumn(c) == "" {
			return fmt.Errorf("people: no notification %q", c)
		}
		set[c] = true
	}
	var words []string
	for _, c := range Notifications {
		if set[c] {
			words = append(words, strings.ReplaceAll(c, "_", " "))
		}
	}
	detail := "none"
	if len(words) > 0 {
		detail = strings.Join(words, ", ")
	}
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE memberships SET notify_invoice_paid = $2, notify_card_declined = $3,
				notify_deposit_paid = $4, notify_terminal_failed = $5
			WHERE id = $1 AND removed_at IS NULL`,
			m.ID, set[NotifyInvoicePaid], set[NotifyCardDeclined], set[NotifyDepositPaid], set[NotifyTerminalFailed])
		if err != nil {
			return fmt.Errorf("people: unable to set notification choices: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errNotFound
		}
		return s.record(ctx, tx, &m.OrganizationID, actor.person(), actor.name(), ActionNotificationsSet,
			"emails of: "+detail, actor.Address)
	})
}

// Notification is an email to the members who chose to hear of
// something: its words are written by the package that made the change
// and hold nothing of a card but its brand and last four digits.
type Notification struct {
	// Choice is the choice it answers (NotifyInvoicePaid, …).
	Choice string
	// Permission is what a member needs to read it: the permission of the
	// event it tells of (event.Permission).
	Permission string
	Subject    string
	Text       string
}

// Notify queues n, inside tx (the transaction of the change it tells of,
// so that it goes out once, if and only if the change commits), for every
// member of org who accepted, chose n.Choice and holds n.Permission: one
// email each.
func (s *Store) Notify(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, n Notification, at time.Time) error {
	column := notifyColumn(n.Choice)
	if n.Choice == ToOwners {
		column = "m.role = 'Owner'"
	}
	if column == "" {
		return fmt.Errorf("people: no notification %q", n.Choice)
	}
	if n.Choice == NotifyInvoicePaid {
		column = "coalesce(m.notify_invoice_paid, m.role IN ('Owner', 'Admin'))"
	}
	var to []string
	err := tx.SelectContext(ctx, &to, `SELECT p.email FROM memberships m JOIN people p ON p.id = m.person_id
		WHERE m.organization_id = $1 AND m.removed_at IS NULL AND m.accepted_at IS NOT NULL
		  AND ($2 = '' OR $2 = ANY (m.permissions)) AND `+column+`
		ORDER BY m.id`, org, n.Permission)
	if err != nil {
		return fmt.Errorf("people: unable to find whom to notify: %w", err)
	}
	why := "\n\nYou get these emails as your notification choices say; change them at " +
		s.PublicURL + "/portal/account/notifications\n"
	if n.Choice == ToOwners {
		why = "\n\nYou get this email as an Owner of the business.\n"
	}
	for _, email := range to {
		if err := delivery.EnqueueNotice(ctx, tx, s.Vault, &org, delivery.Notice{To: email, Subject: n.Subject,
			Text: n.Text + why}, at); err != nil {
			return err
		}
	}
	return nil
}
