package payment

import (
	"context"
	"fmt"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/rule"
)

// Terminals is what payment asks of the terminal payments (package
// terminal's, which imports payment).
type Terminals interface {
	// PendingAmount is what the invoice's pending terminal payments hold
	// of its balance, read through q.
	PendingAmount(ctx context.Context, q sqlx.QueryerContext, invoiceID uuid.UUID) (apd.Decimal, error)
}

// Left is what a customer can still pay of an invoice: its balance less
// the money under way toward it.
type Left struct {
	Balance apd.Decimal
	// Charging is what the charges under way hold: pay forms and
	// automatic charges asked of the processor, not yet recorded.
	Charging apd.Decimal
	// AtTerminal is what the pending terminal payments hold: a payment
	// being taken at the counter.
	AtTerminal apd.Decimal
	// Amount is Balance less Charging and AtTerminal, never below 0.
	Amount apd.Decimal
}

// LeftToPay is what is left to pay of inv, read through q: the one rule of
// every front that takes a payment (the pay page, automatic charges,
// terminal payments). Read under the invoice's row lock (invoice.Lock),
// which every one of them takes before it holds an amount, two payments
// at once never together take more than the balance.
func (s *Store) LeftToPay(ctx context.Context, q sqlx.QueryerContext, inv *invoice.Invoice) (Left, error) {
	l := Left{Balance: inv.Balance()}
	var charging string
	// A charge is under way while its Pay may still record it (formState).
	err := sqlx.GetContext(ctx, q, &charging, `SELECT coalesce(sum(amount), 0)::numeric(11, 2)::text FROM pending_charges
		WHERE invoice_id = $1 AND last_error IS NULL AND created_at > $2`, inv.ID, s.Now().Add(-PayTimeout))
	if err != nil {
		return Left{}, fmt.Errorf("payment: unable to read the charges under way: %w", err)
	}
	if _, _, err := l.Charging.SetString(charging); err != nil {
		return Left{}, fmt.Errorf("payment: charges under way %q: %w", charging, err)
	}
	if s.Terminals != nil {
		if l.AtTerminal, err = s.Terminals.PendingAmount(ctx, q, inv.ID); err != nil {
			return Left{}, err
		}
	}
	c := apd.BaseContext.WithPrecision(34)
	if _, err := c.Sub(&l.Amount, &l.Balance, &l.Charging); err != nil {
		return Left{}, err
	}
	if _, err := c.Sub(&l.Amount, &l.Amount, &l.AtTerminal); err != nil {
		return Left{}, err
	}
	if l.Amount.Sign() < 0 {
		l.Amount.SetInt64(0)
	}
	_, _ = c.Quantize(&l.Amount, &l.Amount, -2)
	return l, nil
}

// Held is what the payments under way hold of the balance.
func (l Left) Held() apd.Decimal {
	var held apd.Decimal
	_, _ = apd.BaseContext.WithPrecision(34).Add(&held, &l.Charging, &l.AtTerminal)
	return held
}

// UnderWay says, for a person, what holds the balance: "" when nothing does.
func (l Left) UnderWay() string {
	switch held := l.Held(); {
	case held.Sign() == 0:
		return ""
	case l.AtTerminal.Sign() == 0:
		return "another payment of " + invoice.Money(l.Charging) + " is under way"
	case l.Charging.Sign() == 0:
		return "a payment of " + invoice.Money(l.AtTerminal) + " is being taken at a card terminal"
	default:
		return "payments of " + invoice.Money(held) + " are under way, " + invoice.Money(l.AtTerminal) + " of it at a card terminal"
	}
}

// Take is the amount asked (nil: all that is left), or its refusal keyed
// amount: more than is left is Unprocessable, suggesting what is; nothing
// left, because payments under way hold it all, is a Conflict (later there
// may be something to pay).
func (l Left) Take(asked *apd.Decimal) (apd.Decimal, error) {
	if held := l.Held(); l.Amount.Sign() == 0 && held.Sign() > 0 {
		return apd.Decimal{}, &rule.Error{Kind: rule.Conflict, Field: "amount", Title: "Payment under way", Suggest: l.Amount.Text('f'),
			Message: "Nothing is left to pay just now: " + l.UnderWay() + ", so nothing was charged."}
	}
	if asked == nil {
		return l.Amount, nil
	}
	if asked.Cmp(&l.Amount) > 0 {
		msg := "The amount can be at most the balance of " + invoice.Money(l.Balance) + "."
		if under := l.UnderWay(); under != "" {
			msg = "The amount can be at most " + invoice.Money(l.Amount) + ": " + under + "."
		}
		return apd.Decimal{}, &rule.Error{Kind: rule.Unprocessable, Field: "amount", Title: "Payment amount not allowed",
			Message: msg, Suggest: l.Amount.Text('f')}
	}
	return *asked, nil
}
