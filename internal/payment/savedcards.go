package payment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// savedCard is a saved_cards row: the processor's references to a stored
// card, with what may be shown of it. Never the card number.
type savedCard struct {
	OrganizationID    uuid.UUID
	MerchantAccountID uuid.UUID
	CustomerID        uuid.UUID
	ProfileID         string
	AccountID         string
	CardBrand         *string
	LastFour          *string
	Expiry            string
	SavedAt           time.Time
	SavedByName       string
	// ChargeConsent is the words the customer consented to future
	// charges with, at SavedAt; "" without consent.
	ChargeConsent string
}

// saveCard stores a card the processor saved, for the customer. A profile
// already stored stays as it is (saved false).
func saveCard(ctx context.Context, tx *sqlx.Tx, c savedCard) (saved bool, err error) {
	res, err := tx.ExecContext(ctx, `
		INSERT INTO saved_cards (id, organization_id, merchant_account_id, customer_id, profile_id, account_id,
			card_brand, last_four, expiry, saved_at, saved_by_name, charge_consent_at, charge_consent)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, CASE WHEN $12 <> '' THEN $10::timestamptz END, nullif($12, ''))
		ON CONFLICT (organization_id, profile_id, account_id) DO NOTHING`,
		uuid.Must(uuid.NewV7()), c.OrganizationID, c.MerchantAccountID, c.CustomerID, c.ProfileID, c.AccountID,
		c.CardBrand, c.LastFour, c.Expiry, c.SavedAt, c.SavedByName, c.ChargeConsent)
	if err != nil {
		return false, fmt.Errorf("payment: unable to save card: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("payment: unable to save card: %w", err)
	}
	return n > 0, nil
}

// ErrCardNotFound: no saved card with this id in the organization.
var ErrCardNotFound = rule.New(rule.NotFound, "", "Saved card not found", "No saved card with this id exists in your organization.")

// DeleteSavedCard removes a saved card at the processor first, with no
// transaction open, then here, with its event and its customer's
// customer.updated (the customer's savedCards changed), from every front. When the processor fails
// (processor.ErrUnavailable) the card is kept, and a retry later works. Of
// two removals at once, both may ask the processor; the second then finds
// the card gone (ErrCardNotFound). A person removing it (by, nil for a
// key or the system) is audited in the removal's transaction.
func (s *Store) DeleteSavedCard(ctx context.Context, org, id uuid.UUID, by *audit.Actor) error {
	var card struct {
		ProfileID   string     `db:"profile_id"`
		AccountID   string     `db:"account_id"`
		Account     *uuid.UUID `db:"merchant_account_id"`
		CustomerID  uuid.UUID  `db:"customer_id"`
		CardBrand   *string    `db:"card_brand"`
		LastFour    *string    `db:"last_four"`
		Expiry      *string    `db:"expiry"`
		SavedAt     time.Time  `db:"saved_at"`
		SavedByName string     `db:"saved_by_name"`
	}
	err := s.DB.GetContext(ctx, &card, `
		SELECT profile_id, account_id, merchant_account_id, customer_id, card_brand, last_four, expiry, saved_at, saved_by_name
		FROM saved_cards WHERE id = $1 AND organization_id = $2`, id, org)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrCardNotFound
	}
	if err != nil {
		return fmt.Errorf("payment: unable to read saved card: %w", err)
	}
	var mid string // "" for a card saved on no MID
	if card.Account != nil {
		accounts, err := directory.AccountsByID(ctx, s.DB, []uuid.UUID{*card.Account})
		if err != nil {
			return err
		}
		mid = accounts[*card.Account].MID
	}
	if err := s.Processor.DeleteProfile(ctx, mid, card.ProfileID, card.AccountID); err != nil {
		return fmt.Errorf("payment: delete saved card %s at the processor: %w", id, err)
	}
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM saved_cards WHERE id = $1 AND organization_id = $2`, id, org)
		if err != nil {
			return fmt.Errorf("payment: unable to delete saved card: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, ErrCardNotFound) // removed meanwhile
		}
		now := s.Now()
		removed := invoice.SavedCard{ID: id, CardBrand: card.CardBrand, LastFour: card.LastFour, Expiry: card.Expiry,
			SavedAt: card.SavedAt, SavedByName: card.SavedByName}
		if _, err = event.Append(ctx, tx, org, event.SavedCardRemoved, removed.Model(), now); err != nil {
			return err
		}
		if s.CardRemoved != nil {
			if err := s.CardRemoved(ctx, tx, org, id, now); err != nil {
				return err
			}
		}
		if err := customer.AppendUpdated(ctx, tx, org, card.CustomerID, s.Invoices, s, now); err != nil {
			return err
		}
		if by == nil {
			return nil
		}
		return audit.Append(ctx, tx, audit.Entry{Organization: &org, Actor: *by, Action: audit.SavedCardRemoved,
			Detail: CardLabel(card.CardBrand, card.LastFour) + " (" + id.String() + ")", At: now})
	})
}

// RemoveCustomerCards removes every saved card of the customer, each as
// DeleteSavedCard does (at the processor first, no transaction open
// across the call, its event): a customer about to be deleted
// (customer.Cards). When the processor fails, the cards not yet removed
// stay and the error is returned.
func (s *Store) RemoveCustomerCards(ctx context.Context, org, customerID uuid.UUID) error {
	var ids []uuid.UUID
	if err := s.DB.SelectContext(ctx, &ids, `SELECT id FROM saved_cards WHERE organization_id = $1 AND customer_id = $2`,
		org, customerID); err != nil {
		return fmt.Errorf("payment: unable to read a customer's saved cards: %w", err)
	}
	for _, id := range ids {
		if err := s.DeleteSavedCard(ctx, org, id, nil); err != nil && !errors.Is(err, ErrCardNotFound) {
			return err
		}
	}
	return nil
}

// CardLabel is a saved card as people read it: "Visa ending in 4242".
func CardLabel(brand, lastFour *string) string {
	label := "Card"
	if brand != nil {
		label = BrandName(*brand)
	}
	if lastFour != nil {
		label += " ending in " + *lastFour
	}
	return label
}
