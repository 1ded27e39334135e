package invoice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// TaxRate is one of an organization's named tax rates ("Sales tax"
// 8.25), which the portal's lines editor offers; a line keeps the rate
// itself, so a named rate removed or added changes no invoice.
type TaxRate struct {
	ID        uuid.UUID
	Name      string
	Rate      apd.Decimal // a percent
	CreatedAt time.Time
}

// Label is the rate as the editor offers it: "Sales tax 8.25%".
func (r TaxRate) Label() string { return r.Name + " " + Percent(r.Rate) }

// ErrTaxRateNotFound: no such tax rate in the caller's organization.
var ErrTaxRateNotFound = rule.New(rule.NotFound, "", "Tax rate not found", "No tax rate with this id exists in your organization.")

// TaxRates are the organization's named tax rates, by name.
func (s *Store) TaxRates(ctx context.Context, org uuid.UUID) ([]TaxRate, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT id, name, rate::text, created_at FROM tax_rates
		WHERE organization_id = $1 ORDER BY lower(name), id`, org)
	if err != nil {
		return nil, fmt.Errorf("invoice: unable to read tax rates: %w", err)
	}
	defer rows.Close()
	rates := []TaxRate{}
	for rows.Next() {
		var r TaxRate
		var rate string
		if err := rows.Scan(&r.ID, &r.Name, &rate, &r.CreatedAt); err != nil {
			return nil, fmt.Errorf("invoice: unable to read tax rates: %w", err)
		}
		if err := numeric(&r.Rate, rate); err != nil {
			return nil, err
		}
		rates = append(rates, r)
	}
	return rates, rows.Err()
}

// checkTaxRate refuses a named rate's name and rate as AddTaxRate and
// ChangeTaxRate do, keyed name and rate.
func checkTaxRate(name string, rate *apd.Decimal) error {
	v := fieldErrors{}
	switch n := utf8.RuneCountInString(name); {
	case !utf8.ValidString(name):
		v.add("name", "must be valid UTF-8 text")
	case strings.TrimSpace(name) == "":
		v.add("name", "is required, as in Sales tax")
	case n > 100:
		v.add("name", "must be 1 to 100 characters")
	}
	if msg := TaxRateProblem(rate); msg != "" {
		v.add("rate", "%s", msg)
	}
	if len(v) > 0 {
		return rule.InvalidFields(v)
	}
	return nil
}

// taxRateConflict maps the unique index's refusal of name to rule.Conflict
// keyed name; any other err is wrapped as doing.
func taxRateConflict(err error, name, doing string) error {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" {
		return rule.New(rule.Conflict, "name", "Tax rate name already used",
			fmt.Sprintf("Your organization already has a tax rate named %q.", name))
	}
	return fmt.Errorf("invoice: unable to %s tax rate: %w", doing, err)
}

// AddTaxRate keeps a named rate for the organization: a name of 1 to 100
// characters, not blank and not one of its rates' already (any case), and
// a rate as a line takes it (TaxRateProblem). Refusals are keyed name and
// rate.
func (s *Store) AddTaxRate(ctx context.Context, actor Actor, name string, rate apd.Decimal) (TaxRate, error) {
	if err := checkTaxRate(name, &rate); err != nil {
		return TaxRate{}, err
	}
	r := TaxRate{ID: uuid.Must(uuid.NewV7()), Name: name, Rate: Plain(rate)}
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		r.CreatedAt = s.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO tax_rates (id, organization_id, name, rate, created_at)
			VALUES ($1, $2, $3, $4::numeric, $5)`, r.ID, actor.OrganizationID, r.Name, r.Rate.Text('f'), r.CreatedAt); err != nil {
			return taxRateConflict(err, name, "add")
		}
		return actor.audit(ctx, tx, audit.TaxRateAdded, r.Label(), r.CreatedAt)
	})
	if err != nil {
		return TaxRate{}, err
	}
	return r, nil
}

// TaxRate is one of the organization's named rates; ErrTaxRateNotFound
// when it has no such rate.
func (s *Store) TaxRate(ctx context.Context, org, id uuid.UUID) (TaxRate, error) {
	r := TaxRate{ID: id}
	var rate string
	err := s.DB.QueryRowContext(ctx, `SELECT name, rate::text, created_at FROM tax_rates WHERE id = $1 AND organization_id = $2`,
		id, org).Scan(&r.Name, &rate, &r.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return TaxRate{}, ErrTaxRateNotFound
	}
	if err != nil {
		return TaxRate{}, fmt.Errorf("invoice: unable to read tax rate: %w", err)
	}
	return r, numeric(&r.Rate, rate)
}

// ChangeTaxRate renames a named rate and sets its rate, refused as
// AddTaxRate refuses them; the lines that took it keep their rate. The
// audit entry names it as it was and as it is.
func (s *Store) ChangeTaxRate(ctx context.Context, actor Actor, id uuid.UUID, name string, rate apd.Decimal) (TaxRate, error) {
	if err := checkTaxRate(name, &rate); err != nil {
		return TaxRate{}, err
	}
	r := TaxRate{ID: id, Name: name, Rate: Plain(rate)}
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var was TaxRate
		var wasRate string
		err := tx.QueryRowContext(ctx, `SELECT name, rate::text, created_at FROM tax_rates
			WHERE id = $1 AND organization_id = $2 FOR UPDATE`, id, actor.OrganizationID).Scan(&was.Name, &wasRate, &r.CreatedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrTaxRateNotFound
		}
		if err != nil {
			return fmt.Errorf("invoice: unable to read tax rate: %w", err)
		}
		if err := numeric(&was.Rate, wasRate); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tax_rates SET name = $3, rate = $4::numeric WHERE id = $1 AND organization_id = $2`,
			id, actor.OrganizationID, r.Name, r.Rate.Text('f')); err != nil {
			return taxRateConflict(err, name, "change")
		}
		return actor.audit(ctx, tx, audit.TaxRateChanged, was.Label()+" → "+r.Label(), s.Now())
	})
	if err != nil {
		return TaxRate{}, err
	}
	return r, nil
}

// RemoveTaxRate removes one of the organization's named rates; the lines
// that took it keep their rate.
func (s *Store) RemoveTaxRate(ctx context.Context, actor Actor, id uuid.UUID) error {
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var r TaxRate
		var rate string
		err := tx.QueryRowContext(ctx, `DELETE FROM tax_rates WHERE id = $1 AND organization_id = $2 RETURNING name, rate::text`,
			id, actor.OrganizationID).Scan(&r.Name, &rate)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrTaxRateNotFound
		}
		if err != nil {
			return fmt.Errorf("invoice: unable to remove tax rate: %w", err)
		}
		if err := numeric(&r.Rate, rate); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.TaxRateRemoved, r.Label(), s.Now())
	})
}
