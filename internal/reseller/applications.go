// Package reseller holds what reseller partners follow: the merchants in
// their portfolio and the merchant applications submitted through them.
//
// It owns the tables applications, application_owners and
// application_history, and reads portfolio_merchants (directory's).
package reseller

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/vault"
)

// Errors callers tell apart.
var (
	// ErrNotFound: no such application, or one of another reseller.
	ErrNotFound = errors.New("not found")
	// ErrNotReseller: the organization does not exist or is not a reseller.
	ErrNotReseller = errors.New("not a reseller organization")
	// ErrInvalidStage: not one of Stages.
	ErrInvalidStage = errors.New("unknown stage")
	// ErrStageChange: the application cannot move to the stage asked for.
	ErrStageChange = errors.New("stage change not allowed")
)

// Stages of an application, in the order onboarding usually goes.
var Stages = []string{"submitted", "in_review", "needs_info", "approved", "declined", "boarded"}

// finalStages end onboarding: nothing moves an application out of them.
var finalStages = []string{"declined", "boarded"}

// ValidStage reports whether stage is one of Stages.
func ValidStage(stage string) bool { return slices.Contains(Stages, stage) }

// NewApplication is an application as submitted, with full numbers. An
// empty DBAName means the business trades under its legal name.
type NewApplication struct {
	Business Business `json:"business"`
	Owners   []Owner  `json:"owners"`
	Bank     Bank     `json:"bank"`
}

// Business is the applying business.
type Business struct {
	LegalName  string  `json:"legalName"`
	DBAName    string  `json:"dbaName"`
	EntityType string  `json:"entityType"`
	TaxID      string  `json:"taxId"`
	Phone      *string `json:"phone"`
	Email      string  `json:"email"`
	Website    *string `json:"website"`
	Address    Address `json:"address"`
}

// Address is a postal address.
type Address struct {
	Line1      string  `json:"line1"`
	Line2      *string `json:"line2"`
	City       string  `json:"city"`
	State      string  `json:"state"`
	PostalCode string  `json:"postalCode"`
}

// Owner is a principal of the business.
type Owner struct {
	Name             string          `json:"name"`
	Title            string          `json:"title"`
	OwnershipPercent jsonnum.Decimal `json:"ownershipPercent"`
	SSN              string          `json:"ssn"`
}

// Bank is where deposits go.
type Bank struct {
	RoutingNumber string `json:"routingNumber"`
	AccountNumber string `json:"accountNumber"`
}

// Store keeps the applications (sealing full numbers with the vault) and
// reads the resellers' portfolios.
type Store struct {
	DB    *sqlx.DB
	Vault *vault.Vault
	Now   func() time.Time
}

func lastFour(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[len(s)-4:]
}

// Add validates an application (an *InvalidError lists what is wrong),
// stores it for a reseller at stage submitted and returns its id. Nothing is
// stored unless all of it is.
func (a *Store) Add(ctx context.Context, resellerID uuid.UUID, app NewApplication) (uuid.UUID, error) {
	if err := app.Validate(); err != nil {
		return uuid.Nil, err
	}
	id := uuid.Must(uuid.NewV7())
	now := a.Now()
	seal := func(value, field string) ([]byte, string, error) {
		return a.Vault.Seal(value, fmt.Sprintf("application:%s:%s", id, field))
	}
	err := postgres.InTx(ctx, a.DB, func(tx *sqlx.Tx) error {
		var kind string
		err := tx.GetContext(ctx, &kind, `SELECT kind FROM organizations WHERE id = $1`, resellerID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reseller: organization %s does not exist: %w", resellerID, ErrNotReseller)
		}
		if err != nil {
			return fmt.Errorf("reseller: unable to read organization: %w", err)
		}
		if kind != "reseller" {
			return fmt.Errorf("reseller: organization %s is a %s: %w", resellerID, kind, ErrNotReseller)
		}
		taxID, taxKey, err := seal(app.Business.TaxID, "tax_id")
		if err != nil {
			return err
		}
		account, accountKey, err := seal(app.Bank.AccountNumber, "account")
		if err != nil {
			return err
		}
		b := app.Business
		_, err = tx.ExecContext(ctx, `
			INSERT INTO applications (id, reseller_id, stage, submitted_at, updated_at, legal_name, dba_name,
				entity_type, tax_id_encrypted, tax_id_key_id, tax_id_last_four, phone, email, website,
				address_line1, address_line2, city, state, postal_code, routing_number,
				account_encrypted, account_key_id, account_last_four)
			VALUES ($1, $2, 'submitted', $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
				$18, $19, $20, $21)`,
			id, resellerID, now, b.LegalName, b.DBAName, b.EntityType, taxID, taxKey, lastFour(b.TaxID),
			b.Phone, b.Email, b.Website, b.Address.Line1, b.Address.Line2, b.Address.City, b.Address.State,
			b.Address.PostalCode, app.Bank.RoutingNumber, account, accountKey, lastFour(app.Bank.AccountNumber))
		if err != nil {
			return fmt.Errorf("reseller: unable to add application: %w", err)
		}
		for i, o := range app.Owners {
			ssn, ssnKey, err := seal(o.SSN, fmt.Sprintf("owner:%d:ssn", i))
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `
				INSERT INTO application_owners (application_id, position, name, title, ownership_percent,
					ssn_encrypted, ssn_key_id, ssn_last_four)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				id, i, o.Name, o.Title, o.OwnershipPercent.Text('f'), ssn, ssnKey, lastFour(o.SSN))
			if err != nil {
				return fmt.Errorf("reseller: unable to add application owner: %w", err)
			}
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO application_history (application_id, seq, stage, at, note)
			VALUES ($1, 1, 'submitted', $2, 'Application submitted')`, id, now)
		if err != nil {
			return fmt.Errorf("reseller: unable to add application history: %w", err)
		}
		return nil
	})
	return id, err
}

// SetStage moves an application to stage, appending to its history; an
// empty note is stored as none. Unknown ids are ErrNotFound; an unknown
// stage is ErrInvalidStage; moving out of a final stage (declined, boarded)
// or to the stage the application is already in is ErrStageChange.
func (a *Store) SetStage(ctx context.Context, id uuid.UUID, stage, note string) error {
	if !ValidStage(stage) {
		return fmt.Errorf("reseller: %w %q", ErrInvalidStage, stage)
	}
	now := a.Now()
	return postgres.InTx(ctx, a.DB, func(tx *sqlx.Tx) error {
		// The row lock serialises stage changes of one application, so
		// history sequence numbers never collide.
		var current struct {
			Stage      string    `db:"stage"`
			ResellerID uuid.UUID `db:"reseller_id"`
		}
		err := tx.GetContext(ctx, &current, `SELECT stage, reseller_id FROM applications WHERE id = $1 FOR UPDATE`, id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reseller: application %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("reseller: unable to read stage: %w", err)
		}
		switch {
		case slices.Contains(finalStages, current.Stage):
			return fmt.Errorf("reseller: application %s is %s, a final stage: %w", id, current.Stage, ErrStageChange)
		case current.Stage == stage:
			return fmt.Errorf("reseller: application %s is already %s: %w", id, stage, ErrStageChange)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE applications SET stage = $2, updated_at = $3 WHERE id = $1`, id, stage, now); err != nil {
			return fmt.Errorf("reseller: unable to set stage: %w", err)
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO application_history (application_id, seq, stage, at, note)
			SELECT $1, coalesce(max(seq), 0) + 1, $2, $3, NULLIF($4, '') FROM application_history WHERE application_id = $1`,
			id, stage, now, note)
		if err != nil {
			return fmt.Errorf("reseller: unable to append history: %w", err)
		}
		// Its event carries the application as the change left it.
		app, err := read(ctx, tx, current.ResellerID, id)
		if err != nil {
			return err
		}
		_, err = event.Append(ctx, tx, current.ResellerID, event.ApplicationStage, app.Wire(), now)
		return err
	})
}
