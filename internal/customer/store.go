package customer

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Store keeps customers. Every method is scoped by organization.
type Store struct {
	DB       *sqlx.DB
	Now      func() time.Time
	Invoices Invoices
	Cards    Cards
}

// Invoices is what package invoice keeps of customers, read through q
// (the transaction of the read or the change): customer cannot import
// invoice, which finds and makes customers.
type Invoices interface {
	// CustomerTotals are the totals of each customer's invoices; a
	// customer without invoices may be missing.
	CustomerTotals(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]Totals, error)
}

// Totals are what a customer's invoices add up to.
type Totals struct {
	// OpenBalance is the balances of its open and part_paid invoices.
	OpenBalance apd.Decimal
	// Count is how many invoices it has, in any status.
	Count int
}

// Cards is what package payment keeps of customers: their saved cards.
type Cards interface {
	// CustomerCards are each customer's saved cards, newest first, read through q.
	CustomerCards(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, ids []uuid.UUID) (map[uuid.UUID][]models.SavedCard, error)
	// RemoveCustomerCards removes every saved card of the customer, at
	// the processor first, with no transaction open across its calls.
	RemoveCustomerCards(ctx context.Context, org, customer uuid.UUID) error
}

// Actor is who acts: the caller's organization and, when a person acts,
// who is audited in the change's transaction.
type Actor struct {
	OrganizationID uuid.UUID
	Audit          *audit.Actor
}

func (a Actor) audit(ctx context.Context, tx *sqlx.Tx, action string, c Customer, at time.Time) error {
	if a.Audit == nil {
		return nil
	}
	return audit.Append(ctx, tx, audit.Entry{Organization: &a.OrganizationID, Actor: *a.Audit, Action: action,
		Detail: c.Email + " (" + c.ID.String() + ")", At: at})
}

const columns = `c.id, c.organization_id, c.email, c.name, c.company, c.phone, c.address, c.tax_exempt, c.notes,
	c.prefers, c.created_at, c.updated_at`

const selectCustomer = `SELECT ` + columns + ` FROM customers c`

type scanner interface{ Scan(dest ...any) error }

func scan(row scanner) (Customer, error) {
	var (
		c       Customer
		address []byte
	)
	err := row.Scan(&c.ID, &c.OrganizationID, &c.Email, &c.Name, &c.Company, &c.Phone, &address, &c.TaxExempt, &c.Notes,
		&c.Prefers, &c.CreatedAt, &c.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Customer{}, ErrNotFound
	}
	if err != nil {
		return Customer{}, fmt.Errorf("customer: unable to read customer: %w", err)
	}
	if address != nil {
		c.Address = &Address{}
		if err := json.Unmarshal(address, c.Address); err != nil {
			return Customer{}, fmt.Errorf("customer: unable to read address: %w", err)
		}
	}
	return c, nil
}

// addressJSON is the address column's value.
func addressJSON(a *Address) ([]byte, error) {
	if a == nil {
		return nil, nil
	}
	return json.Marshal(a)
}

// read reads one customer of org through q, its own fields only; lock
// holds its row until q's transaction ends.
func read(ctx context.Context, q sqlx.QueryerContext, org, id uuid.UUID, lock bool) (Customer, error) {
	query := selectCustomer + ` WHERE c.id = $1 AND c.organization_id = $2`
	if lock {
		query += ` FOR UPDATE`
	}
	return scan(q.QueryRowxContext(ctx, query, id, org))
}

// complete adds to customers what the other packages keep of them
// (through the Store's Invoices and Cards).
func (s *Store) complete(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, list []Customer) error {
	return complete(ctx, q, org, list, s.Invoices, s.Cards)
}

// complete adds to customers their invoices' totals and their saved
// cards, read through q.
func complete(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, list []Customer, invoices Invoices, cards Cards) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	totals, err := invoices.CustomerTotals(ctx, q, org, ids)
	if err != nil {
		return err
	}
	byCustomer, err := cards.CustomerCards(ctx, q, org, ids)
	if err != nil {
		return err
	}
	for i := range list {
		t := totals[list[i].ID]
		list[i].OpenBalance, list[i].InvoiceCount, list[i].SavedCards = t.OpenBalance, t.Count, byCustomer[list[i].ID]
	}
	return nil
}

// errTaken is a change refused by the unique index on email, whose
// holder is looked up once the change's transaction has ended.
var errTaken = errors.New("customer: email taken")

// taken is the refusal of email, taken by another customer of org than
// id (uuid.Nil: any).
func (s *Store) taken(ctx context.Context, org, id uuid.UUID, email string) error {
	var existing uuid.UUID
	err := s.DB.GetContext(ctx, &existing, `SELECT id FROM customers WHERE organization_id = $1 AND lower(email) = lower($2) AND id <> $3`,
		org, email, id)
	if errors.Is(err, sql.ErrNoRows) { // its holder changed or went since: taken all the same when it was tried
		return emailTaken(email, uuid.Nil)
	}
	if err != nil {
		return fmt.Errorf("customer: unable to read the customer with an email: %w", err)
	}
	return emailTaken(email, existing)
}

func isUniqueEmail(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "23505" && pqErr.Constraint == "customers_email"
}

// Create makes a customer (refused as Validate refuses it; an email the
// organization's customers already have: rule.Taken naming that
// customer). With an idempotency key (nil: none), a repeat of the same
// request answers the customer already made (replayed true).
func (s *Store) Create(ctx context.Context, actor Actor, f Fields, key *string) (c Customer, replayed bool, err error) {
	if err := Validate(&f); err != nil {
		return Customer{}, false, err
	}
	k, err := idempotency.OptionalKey(key, f)
	if err != nil {
		return Customer{}, false, err
	}
	id := uuid.Must(uuid.NewV7())
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		found, err := k.Claim(ctx, tx, actor.OrganizationID, idempotency.CreateCustomer, id, now)
		if err != nil || found != uuid.Nil {
			id, replayed = found, found != uuid.Nil
			return err
		}
		c, err = insert(ctx, tx, actor.OrganizationID, id, f, now)
		if err != nil {
			return err
		}
		if _, err := event.Append(ctx, tx, c.OrganizationID, event.CustomerCreated, c.Model(), now); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.CustomerCreated, c, now)
	})
	switch {
	case errors.Is(err, errTaken):
		return Customer{}, false, s.taken(ctx, actor.OrganizationID, uuid.Nil, f.Email)
	case err != nil:
		return Customer{}, false, err
	case replayed:
		c, err = s.Get(ctx, actor.OrganizationID, id)
	}
	return c, replayed, err
}

// insert writes a new customer in tx; errTaken when its email is another's.
func insert(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, f Fields, now time.Time) (Customer, error) {
	address, err := addressJSON(f.Address)
	if err != nil {
		return Customer{}, err
	}
	c, err := scan(tx.QueryRowxContext(ctx, `
		INSERT INTO customers AS c (id, organization_id, email, name, company, phone, address, tax_exempt, notes, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
		ON CONFLICT (organization_id, lower(email)) DO NOTHING
		RETURNING `+columns,
		id, org, f.Email, f.Name, f.Company, f.Phone, address, f.TaxExempt, f.Notes, now))
	if errors.Is(err, ErrNotFound) { // nothing inserted
		return Customer{}, errTaken
	}
	return c, err
}

// Get reads a customer with its totals and saved cards, in one snapshot.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (c Customer, err error) {
	err = postgres.InSnapshot(ctx, s.DB, func(tx *sqlx.Tx) error {
		if c, err = read(ctx, tx, org, id, false); err != nil {
			return err
		}
		list := []Customer{c}
		err = s.complete(ctx, tx, org, list)
		c = list[0]
		return err
	})
	return c, err
}

// Filter narrows a list.
type Filter struct {
	// Q keeps the customers whose name, company or email holds it, in any case.
	Q *string
	// Email keeps the customer with this email, in any case.
	Email *string
}

// MinQ and MaxQ bound the length of Filter.Q, in characters.
const (
	MinQ = 2
	MaxQ = 100
)

// likeEscaper makes text match itself in a LIKE pattern.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// List returns a page of customers, newest first, and the cursor of the
// next page ("" on the last).
func (s *Store) List(ctx context.Context, org uuid.UUID, f Filter, limit int, after string) (list []Customer, next string, err error) {
	q := keyset.NewQuery(selectCustomer, "c.created_at", "c.id")
	q.Where("c.organization_id = $%d", org)
	if f.Q != nil {
		if n := len([]rune(*f.Q)); n < MinQ || n > MaxQ {
			return nil, "", rule.InvalidField("query.q", fmt.Sprintf("must be %d to %d characters", MinQ, MaxQ))
		}
		// Each column by its own trigram index (ILIKE), the three OR'd.
		q.Where("(c.name ILIKE $%[1]d OR c.company ILIKE $%[1]d OR c.email ILIKE $%[1]d)", "%"+likeEscaper.Replace(*f.Q)+"%")
	}
	if f.Email != nil {
		q.Where("lower(c.email) = lower($%d)", *f.Email)
	}
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	err = postgres.InSnapshot(ctx, s.DB, func(tx *sqlx.Tx) error {
		list, next, err = keyset.Fetch(ctx, tx, q, limit, func(r *sql.Rows) (Customer, error) { return scan(r) },
			func(c Customer) keyset.Cursor { return keyset.Cursor{At: c.CreatedAt, ID: c.ID} })
		if err != nil {
			return fmt.Errorf("customer: unable to list customers: %w", err)
		}
		return s.complete(ctx, tx, org, list)
	})
	return list, next, err
}

// Update applies a merge patch to a customer: the result obeys every
// rule of Validate, and an email another customer has is rule.Taken.
func (s *Store) Update(ctx context.Context, actor Actor, id uuid.UUID, p Patch) (c Customer, err error) {
	var email string
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		c, err = read(ctx, tx, actor.OrganizationID, id, true)
		if err != nil {
			return err
		}
		f := p.apply(c.fields())
		if err := Validate(&f); err != nil {
			return err
		}
		email = f.Email
		address, err := addressJSON(f.Address)
		if err != nil {
			return err
		}
		now := s.Now()
		c, err = scan(tx.QueryRowxContext(ctx, `
			UPDATE customers c SET email = $3, name = $4, company = $5, phone = $6, address = $7, tax_exempt = $8,
				notes = $9, updated_at = $10
			WHERE id = $1 AND organization_id = $2
			RETURNING `+columns,
			id, actor.OrganizationID, f.Email, f.Name, f.Company, f.Phone, address, f.TaxExempt, f.Notes, now))
		if isUniqueEmail(err) {
			return errTaken
		}
		if err != nil {
			return err
		}
		list := []Customer{c}
		if err := s.complete(ctx, tx, actor.OrganizationID, list); err != nil {
			return err
		}
		c = list[0]
		if _, err := event.Append(ctx, tx, c.OrganizationID, event.CustomerUpdated, c.Model(), now); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.CustomerChanged, c, now)
	})
	if errors.Is(err, errTaken) {
		return Customer{}, s.taken(ctx, actor.OrganizationID, id, email)
	}
	if err != nil {
		return Customer{}, err
	}
	return c, nil
}

// hasInvoices is the refusal of deleting a customer with n invoices.
func hasInvoices(n int) *rule.Error {
	return rule.Newf(rule.Unprocessable, "", "Customer has invoices",
		"The customer has %d invoices; only a customer without invoices can be deleted.", n)
}

// Delete removes a customer without invoices: its saved cards at the
// processor and in payment first, with no transaction open, then the
// customer with its event. A customer with invoices is refused, before
// and again under its row lock (an invoice made meanwhile waits for the
// lock, then finds no customer).
func (s *Store) Delete(ctx context.Context, actor Actor, id uuid.UUID) error {
	c, err := s.Get(ctx, actor.OrganizationID, id)
	if err != nil {
		return err
	}
	if c.InvoiceCount > 0 {
		return hasInvoices(c.InvoiceCount)
	}
	if err := s.Cards.RemoveCustomerCards(ctx, actor.OrganizationID, id); err != nil {
		return err
	}
	return postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		c, err := read(ctx, tx, actor.OrganizationID, id, true)
		if err != nil {
			return err
		}
		list := []Customer{c}
		if err := s.complete(ctx, tx, actor.OrganizationID, list); err != nil {
			return err
		}
		if c = list[0]; c.InvoiceCount > 0 {
			return hasInvoices(c.InvoiceCount)
		}
		if len(c.SavedCards) > 0 {
			return rule.New(rule.Conflict, "", "Customer changed", "A card was saved for the customer meanwhile; send the request again.")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM customers WHERE id = $1`, id); err != nil {
			return fmt.Errorf("customer: unable to delete customer: %w", err)
		}
		now := s.Now()
		if _, err := event.Append(ctx, tx, c.OrganizationID, event.CustomerDeleted, c.Model(), now); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.CustomerDeleted, c, now)
	})
}

// ForInvoice is the customer an invoice names, read in the invoice's
// transaction tx: its own fields (TaxExempt among them), without totals
// or cards. ErrNotFound when org has no such customer.
func ForInvoice(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID) (Customer, error) {
	return read(ctx, tx, org, id, false)
}

// Ensure is the customer of org with email (in any case), made in tx
// from the invoice's name, company and phone (with its event) when there
// is none: the customer of an invoice created without one. One statement
// in either case; a second only when another transaction made the
// customer since this statement began.
func Ensure(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, email string, name, company, phone *string, now time.Time) (Customer, error) {
	id := uuid.Must(uuid.NewV7())
	c, err := scan(tx.QueryRowxContext(ctx, `
		WITH made AS (
			INSERT INTO customers AS c (id, organization_id, email, name, company, phone, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
			ON CONFLICT (organization_id, lower(email)) DO NOTHING
			RETURNING `+columns+`
		)
		SELECT * FROM made
		UNION ALL
		`+selectCustomer+` WHERE c.organization_id = $2 AND lower(c.email) = lower($3) AND NOT EXISTS (SELECT FROM made)`,
		id, org, email, name, company, phone, now))
	if errors.Is(err, ErrNotFound) { // made by another meanwhile: this statement's snapshot did not see it
		return scan(tx.QueryRowxContext(ctx, selectCustomer+` WHERE c.organization_id = $1 AND lower(c.email) = lower($2)`, org, email))
	}
	if err != nil || c.ID != id {
		return c, err
	}
	_, err = event.Append(ctx, tx, org, event.CustomerCreated, c.Model(), now)
	return c, err
}

// SetPrefers records, in tx, how the customer asked on the pay page to
// get its invoices (email or text); changed is false when it had asked
// for that already.
func SetPrefers(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, prefers string, now time.Time) (changed bool, err error) {
	res, err := tx.ExecContext(ctx, `UPDATE customers SET prefers = $3, updated_at = $4
		WHERE id = $1 AND organization_id = $2 AND prefers IS DISTINCT FROM $3`, id, org, prefers, now)
	if err != nil {
		return false, fmt.Errorf("customer: unable to record a preference: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("customer: unable to record a preference: %w", err)
	}
	return n > 0, nil
}

// AppendUpdated appends, in tx, the event customer.updated of the
// customer id, as it now stands (its invoices' totals and saved cards read
// through tx from invoices and cards), for a change its owner did not
// make through Update: on the pay page, its stated preference or a card
// saved.
func AppendUpdated(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, invoices Invoices, cards Cards, now time.Time) error {
	c, err := read(ctx, tx, org, id, false)
	if err != nil {
		return err
	}
	list := []Customer{c}
	if err := complete(ctx, tx, org, list, invoices, cards); err != nil {
		return err
	}
	_, err = event.Append(ctx, tx, org, event.CustomerUpdated, list[0].Model(), now)
	return err
}

// PrefersOf are the stated choices of the customers with these ids, read
// through q in one statement; a customer who stated none is missing.
func PrefersOf(ctx context.Context, q sqlx.QueryerContext, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	rows, err := q.QueryxContext(ctx, `SELECT id, prefers FROM customers WHERE id = ANY($1::uuid[]) AND prefers IS NOT NULL`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("customer: unable to read preferences: %w", err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID]string)
	for rows.Next() {
		var (
			id      uuid.UUID
			prefers string
		)
		if err := rows.Scan(&id, &prefers); err != nil {
			return nil, fmt.Errorf("customer: unable to read preferences: %w", err)
		}
		out[id] = prefers
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("customer: unable to read preferences: %w", err)
	}
	return out, nil
}
