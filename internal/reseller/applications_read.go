package reseller

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/jsonnum"
	"github.com/payreq/payreq/internal/keyset"
)

// Application is an application as a reseller reads it: of the tax id, the
// owners' social security numbers and the bank account number only the last
// four digits. Reading never touches the encrypted columns.
type Application struct {
	ID          uuid.UUID
	Stage       string
	SubmittedAt time.Time
	UpdatedAt   time.Time
	Business    ApplicationBusiness
	Owners      []ApplicationOwner
	Bank        ApplicationBank
	// History is oldest first; the first entry is submitted.
	History []HistoryEntry
}

// ApplicationBusiness is the applying business; DBAName is nil when it
// trades under its legal name.
type ApplicationBusiness struct {
	LegalName     string
	DBAName       *string
	EntityType    string
	TaxIDLastFour string
	Phone         *string
	Email         string
	Website       *string
	Address       Address
}

// ApplicationOwner is an owner of the applying business.
type ApplicationOwner struct {
	Name             string
	Title            string
	OwnershipPercent jsonnum.Decimal
	SSNLastFour      string
}

// ApplicationBank is the account deposits go to.
type ApplicationBank struct {
	RoutingNumber   string
	AccountLastFour string
}

// HistoryEntry is one stage change.
type HistoryEntry struct {
	Stage string
	At    time.Time
	Note  *string
}

// Page sizes List accepts.
const (
	MinLimit = 1
	MaxLimit = 100
)

// applicationColumns are the columns a reader may see: never *_encrypted.
// An empty dba_name is stored for a business without one.
const applicationColumns = `id, stage, submitted_at, updated_at, legal_name, NULLIF(dba_name, '') AS dba_name,
	entity_type, tax_id_last_four, phone, email, website, address_line1, address_line2, city, state,
	postal_code, routing_number, account_last_four`

type applicationRow struct {
	ID              uuid.UUID `db:"id"`
	Stage           string    `db:"stage"`
	SubmittedAt     time.Time `db:"submitted_at"`
	UpdatedAt       time.Time `db:"updated_at"`
	LegalName       string    `db:"legal_name"`
	DBAName         *string   `db:"dba_name"`
	EntityType      string    `db:"entity_type"`
	TaxIDLastFour   string    `db:"tax_id_last_four"`
	Phone           *string   `db:"phone"`
	Email           string    `db:"email"`
	Website         *string   `db:"website"`
	AddressLine1    string    `db:"address_line1"`
	AddressLine2    *string   `db:"address_line2"`
	City            string    `db:"city"`
	State           string    `db:"state"`
	PostalCode      string    `db:"postal_code"`
	RoutingNumber   string    `db:"routing_number"`
	AccountLastFour string    `db:"account_last_four"`
}

func (r applicationRow) application() Application {
	return Application{
		ID: r.ID, Stage: r.Stage, SubmittedAt: r.SubmittedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Business: ApplicationBusiness{
			LegalName: r.LegalName, DBAName: r.DBAName, EntityType: r.EntityType, TaxIDLastFour: r.TaxIDLastFour,
			Phone: r.Phone, Email: r.Email, Website: r.Website,
			Address: Address{Line1: r.AddressLine1, Line2: r.AddressLine2, City: r.City, State: r.State, PostalCode: r.PostalCode},
		},
		Owners:  []ApplicationOwner{},
		Bank:    ApplicationBank{RoutingNumber: r.RoutingNumber, AccountLastFour: r.AccountLastFour},
		History: []HistoryEntry{},
	}
}

// Applications reads one page of the reseller's applications, newest first (by
// submission time, then id), optionally of one stage. cursor is "" for the
// first page, else the next cursor of the page before; next is "" on the
// last page. A cursor this package did not make is keyset.ErrInvalid.
func (a *Store) Applications(ctx context.Context, resellerID uuid.UUID, stage *string, limit int, after string) (page []Application, next string, err error) {
	if limit < MinLimit || limit > MaxLimit {
		return nil, "", fmt.Errorf("reseller: page size %d is outside %d–%d", limit, MinLimit, MaxLimit)
	}
	q := keyset.NewQuery(`SELECT `+applicationColumns+` FROM applications`, "submitted_at", "id")
	q.Where("reseller_id = $%d", resellerID)
	if stage != nil {
		if !ValidStage(*stage) {
			return nil, "", fmt.Errorf("reseller: %w %q", ErrInvalidStage, *stage)
		}
		q.Where("stage = $%d", *stage)
	}
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	query, args := q.SQL(limit)
	var rows []applicationRow
	if err := a.DB.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, "", fmt.Errorf("reseller: unable to list applications: %w", err)
	}
	rows, next = keyset.Page(rows, limit, func(r applicationRow) keyset.Cursor {
		return keyset.Cursor{At: r.SubmittedAt, ID: r.ID}
	})
	page, err = withDetails(ctx, a.DB, rows)
	if err != nil {
		return nil, "", err
	}
	return page, next, nil
}

// Application reads one of the reseller's applications; an unknown id, or one of
// another reseller, is ErrNotFound.
func (a *Store) Application(ctx context.Context, resellerID, id uuid.UUID) (Application, error) {
	return read(ctx, a.DB, resellerID, id)
}

// read is Get through q: a transaction sees the application as it stands
// in it.
func read(ctx context.Context, q sqlx.QueryerContext, resellerID, id uuid.UUID) (Application, error) {
	var rows []applicationRow
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+applicationColumns+` FROM applications
		WHERE reseller_id = $1 AND id = $2`, resellerID, id)
	if err != nil {
		return Application{}, fmt.Errorf("reseller: unable to read application: %w", err)
	}
	if len(rows) == 0 {
		return Application{}, ErrNotFound
	}
	apps, err := withDetails(ctx, q, rows)
	if err != nil {
		return Application{}, err
	}
	return apps[0], nil
}

// withDetails adds owners and history to applications, with one query for
// each whatever the number of applications.
func withDetails(ctx context.Context, q sqlx.QueryerContext, rows []applicationRow) ([]Application, error) {
	apps := make([]Application, len(rows))
	index := make(map[uuid.UUID]int, len(rows))
	ids := make(pq.StringArray, len(rows))
	for i, r := range rows {
		apps[i] = r.application()
		index[r.ID] = i
		ids[i] = r.ID.String()
	}
	if len(rows) == 0 {
		return apps, nil
	}

	var owners []struct {
		ApplicationID    uuid.UUID `db:"application_id"`
		Name             string    `db:"name"`
		Title            string    `db:"title"`
		OwnershipPercent string    `db:"ownership_percent"`
		SSNLastFour      string    `db:"ssn_last_four"`
	}
	err := sqlx.SelectContext(ctx, q, &owners, `
		SELECT application_id, name, title, ownership_percent::text AS ownership_percent, ssn_last_four
		FROM application_owners WHERE application_id = ANY($1::uuid[])
		ORDER BY application_id, position`, ids)
	if err != nil {
		return nil, fmt.Errorf("reseller: unable to read application owners: %w", err)
	}
	for _, o := range owners {
		percent, err := jsonnum.ParseDecimal(o.OwnershipPercent)
		if err != nil {
			return nil, fmt.Errorf("reseller: ownership percent of application %s: %w", o.ApplicationID, err)
		}
		app := &apps[index[o.ApplicationID]]
		app.Owners = append(app.Owners, ApplicationOwner{Name: o.Name, Title: o.Title, OwnershipPercent: percent, SSNLastFour: o.SSNLastFour})
	}

	var history []struct {
		ApplicationID uuid.UUID `db:"application_id"`
		Stage         string    `db:"stage"`
		At            time.Time `db:"at"`
		Note          *string   `db:"note"`
	}
	err = sqlx.SelectContext(ctx, q, &history, `
		SELECT application_id, stage, at, note
		FROM application_history WHERE application_id = ANY($1::uuid[])
		ORDER BY application_id, seq`, ids)
	if err != nil {
		return nil, fmt.Errorf("reseller: unable to read application history: %w", err)
	}
	for _, h := range history {
		app := &apps[index[h.ApplicationID]]
		app.History = append(app.History, HistoryEntry{Stage: h.Stage, At: h.At.UTC(), Note: h.Note})
	}
	return apps, nil
}
