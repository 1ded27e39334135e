// Package reseller holds what reseller partners follow: the merchants in
// their portfolio and the merchant applications submitted through them,
// on their public sign-up page or by an operator (Submit, the one way
// either makes one).
//
// It owns the tables applications, application_owners,
// application_history and application_limits. Organizations and the
// portfolio are internal/directory's, read through its functions.
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

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
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
	Name             string  `json:"name"`
	Title            string  `json:"title"`
	OwnershipPercent Percent `json:"ownershipPercent"`
	SSN              string  `json:"ssn"`
}

// Bank is where deposits go.
type Bank struct {
	RoutingNumber string `json:"routingNumber"`
	AccountNumber string `json:"accountNumber"`
}

// Signature is the applicant's consent to sign electronically, as the
// sign-up page takes it: the box ticked and the signer's name typed.
type Signature struct {
	Consent bool   `json:"consent"`
	Name    string `json:"name"`
}

// Submission is an application as a front hands it over: the sign-up
// page, or an operator's file (payreq applications add).
type Submission struct {
	// Reseller is the organization the application is made through.
	Reseller    uuid.UUID
	Application NewApplication
	// Signature is the e-sign consent given on the sign-up page; nil for
	// an application an operator adds from a file (signed elsewhere).
	Signature *Signature
	// Key is the sign-up form's one-time key, or "": the same form sent
	// again (a double click, a retry) answers the application it made
	// rather than making another.
	Key string
}

// validate checks every rule of the submission, the application's and
// the signature's, and reports every problem at once (rule.Invalid).
func (s Submission) validate() error {
	f := fieldErrors{}
	s.Application.check(f)
	if sig := s.Signature; sig != nil {
		if !sig.Consent {
			f.add("consent", "must be given to sign this application electronically")
		}
		f.text("signature", sig.Name, maxName)
	}
	if e := rule.InvalidFields(f); e != nil {
		return e
	}
	return nil
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

// Submit is the one way an application is made, whatever the front: it
// validates the submission (a *rule.Error of kind Invalid lists every
// problem, keyed by dotted field names), refuses a suspended reseller
// (rule.Conflict) and an organization that is no reseller
// (ErrNotReseller), and stores the application at stage submitted, its
// full numbers sealed, with its application.submitted event in the same
// transaction. It returns the application's id: with a Key sent before
// with the same submission, the id of the application that made
// (idempotency.ErrReused with another). Nothing is stored unless all of it
// is.
func (a *Store) Submit(ctx context.Context, s Submission) (uuid.UUID, error) {
	if err := s.validate(); err != nil {
		return uuid.Nil, err
	}
	var key *idempotency.Key
	if s.Key != "" {
		// Hashed without the full numbers: a copy of the database must not
		// let anyone test guesses of an SSN against the hash.
		k, err := idempotency.NewKey(s.Key, s.Reseller, s.Application.masked(), s.Signature)
		if err != nil {
			return uuid.Nil, err
		}
		key = &k
	}
	id := uuid.Must(uuid.NewV7())
	now := a.Now()
	seal := func(value, field string) ([]byte, string, error) {
		return a.Vault.Seal(value, fmt.Sprintf("application:%s:%s", id, field))
	}
	note := "Application submitted"
	if s.Signature != nil {
		note = "Submitted on the sign-up page, signed electronically by " + s.Signature.Name
	}
	err := postgres.InTx(ctx, a.DB, func(tx *sqlx.Tx) error {
		org, err := directory.OrganizationByID(ctx, tx, s.Reseller)
		if errors.Is(err, directory.ErrNoOrganization) {
			return fmt.Errorf("reseller: organization %s does not exist: %w", s.Reseller, ErrNotReseller)
		}
		if err != nil {
			return fmt.Errorf("reseller: unable to read organization: %w", err)
		}
		if org.Kind != "reseller" {
			return fmt.Errorf("reseller: organization %s is a %s: %w", s.Reseller, org.Kind, ErrNotReseller)
		}
		if org.Status == "suspended" {
			return notTaking(org.Name)
		}
		earlier, err := key.Claim(ctx, tx, s.Reseller, idempotency.SubmitApplication, id, now)
		if err != nil {
			return err
		}
		if earlier != uuid.Nil {
			id = earlier
			return nil
		}
		taxID, taxKey, err := seal(s.Application.Business.TaxID, "tax_id")
		if err != nil {
			return err
		}
		account, accountKey, err := seal(s.Application.Bank.AccountNumber, "account")
		if err != nil {
			return err
		}
		b := s.Application.Business
		_, err = tx.ExecContext(ctx, `
			INSERT INTO applications (id, reseller_id, stage, submitted_at, updated_at, legal_name, dba_name,
				entity_type, tax_id_encrypted, tax_id_key_id, tax_id_last_four, phone, email, website,
				address_line1, address_line2, city, state, postal_code, routing_number,
				account_encrypted, account_key_id, account_last_four)
			VALUES ($1, $2, 'submitted', $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
				$18, $19, $20, $21)`,
			id, s.Reseller, now, b.LegalName, b.DBAName, b.EntityType, taxID, taxKey, lastFour(b.TaxID),
			b.Phone, b.Email, b.Website, b.Address.Line1, b.Address.Line2, b.Address.City, b.Address.State,
			b.Address.PostalCode, s.Application.Bank.RoutingNumber, account, accountKey, lastFour(s.Application.Bank.AccountNumber))
		if err != nil {
			return fmt.Errorf("reseller: unable to add application: %w", err)
		}
		for i, o := range s.Application.Owners {
			ssn, ssnKey, err := seal(o.SSN, fmt.Sprintf("owner:%d:ssn", i))
			if err != nil {
				return err
			}
			share, _ := o.OwnershipPercent.decimal() // valid: checked above
			_, err = tx.ExecContext(ctx, `
				INSERT INTO application_owners (application_id, position, name, title, ownership_percent,
					ssn_encrypted, ssn_key_id, ssn_last_four)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				id, i, o.Name, o.Title, share.Text('f'), ssn, ssnKey, lastFour(o.SSN))
			if err != nil {
				return fmt.Errorf("reseller: unable to add application owner: %w", err)
			}
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO application_history (application_id, seq, stage, at, note)
			VALUES ($1, 1, 'submitted', $2, $3)`, id, now, note)
		if err != nil {
			return fmt.Errorf("reseller: unable to add application history: %w", err)
		}
		// Its event carries the application as GET /applications/{id} shows it.
		app, err := read(ctx, tx, s.Reseller, id)
		if err != nil {
			return err
		}
		_, err = event.Append(ctx, tx, s.Reseller, event.ApplicationSubmitted, app.Model(), now)
		return err
	})
	if err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

// masked is the application with only the last four digits of its tax id,
// SSNs and account number.
func (a NewApplication) masked() NewApplication {
	a.Business.TaxID = lastFour(a.Business.TaxID)
	a.Bank.AccountNumber = lastFour(a.Bank.AccountNumber)
	a.Owners = slices.Clone(a.Owners)
	for i := range a.Owners {
		a.Owners[i].SSN = lastFour(a.Owners[i].SSN)
	}
	return a
}

// notTaking refuses an application to a suspended reseller.
func notTaking(name string) *rule.Error {
	return rule.New(rule.Conflict, "", "Not taking applications",
		name+" is not taking applications just now. Nothing was sent; please contact them directly.")
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
		_, err = event.Append(ctx, tx, current.ResellerID, event.ApplicationStage, app.Model(), now)
		return err
	})
}
