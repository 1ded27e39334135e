package recurring

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Status is where a series is: active ⇄ paused, either → ended (final).
type Status string

// The statuses.
const (
	Active Status = "active"
	Paused Status = "paused"
	Ended  Status = "ended"
)

// Late is how long after it is due an occurrence is still issued; one
// found later (payreq was down) is skipped.
const Late = 72 * time.Hour

// Store keeps recurring invoices and issues them through Invoices.
type Store struct {
	DB       *sqlx.DB
	Now      func() time.Time
	Invoices *invoice.Store
	// Members are emailed when automatic payment ends with its card
	// (nil: nobody is).
	Members invoice.Members
}

// Terms are what a series issues: each invoice's members.
type Terms struct {
	MerchantAccountID uuid.UUID
	// CustomerID is the customer billed: its email, name, company and
	// phone fill each invoice as they are when it is issued.
	CustomerID uuid.UUID
	Prefix     string
	Amount     apd.Decimal
	Lines      []invoice.Line // nil: none
	Memo       *string
	PONumber   *string
	Delivery   *string
	Reminders  *bool
	DueDays    int
	Send       bool
	// AutoPay is the saved card each invoice is charged with at once
	// (payment.ScheduleAutoCharge); nil: none.
	AutoPay *uuid.UUID
}

// Series is a stored recurring invoice. Next is the index of the next
// occurrence to handle (0 is StartOn).
type Series struct {
	Terms
	Schedule
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Status         Status
	Next           int
	IssuedCount    int
	SkippedCount   int
	LastInvoiceID  *uuid.UUID
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// remaining is the series' schedule from Next on: EndAfter counts
// invoices, so the occurrences left are those still to issue.
func (sr *Series) remaining() Schedule {
	sc := sr.Schedule
	if sc.EndAfter != nil {
		left := sr.Next + max(*sc.EndAfter-sr.IssuedCount, 0)
		sc.EndAfter = &left
	}
	return sc
}

// NextOn is the day of the next occurrence, unless the series has ended or
// has none left.
func (sr *Series) NextOn() (time.Time, bool) {
	if sr.Status == Ended {
		return time.Time{}, false
	}
	return sr.remaining().On(sr.Next)
}

// Upcoming are the next three issue days (none once ended).
func (sr *Series) Upcoming() []time.Time {
	if sr.Status == Ended {
		return []time.Time{}
	}
	return sr.remaining().Upcoming(sr.Next, 3)
}

// ErrNotFound: no such series in the caller's organization.
var ErrNotFound = rule.New(rule.NotFound, "", "Recurring invoice not found", "No recurring invoice with this id exists in your organization.")

var errEnded = rule.New(rule.Unprocessable, "status", "Recurring invoice ended",
	"This recurring invoice has ended and cannot be changed; create a new one.")

// validate checks the terms and the schedule as Validate checks an
// invoice, its refusals keyed by the field as sent, all at once.
func validate(t Terms, sc Schedule) error {
	fields := map[string][]string{}
	d := draft(t, "", time.Time{})
	d.InvoiceNumber = "x" // the prefix is checked below
	if err := invoice.Validate(d); err != nil {
		re := rule.As(err)
		if re == nil || re.Kind != rule.Invalid {
			return err
		}
		fields = re.Fields
	}
	add := func(field, msg string) { fields[field] = append(fields[field], msg) }
	if n := utf8.RuneCountInString(t.Prefix); !utf8.ValidString(t.Prefix) || n < 1 || n > 40 {
		add("invoiceNumberPrefix", "must be 1 to 40 characters")
	}
	if t.DueDays < 0 || t.DueDays > 365 {
		add("dueDays", "must be 0 to 365")
	}
	switch sc.Interval {
	case Week, Month, Year:
	default:
		add("interval", "must be week, month or year")
	}
	if sc.Count < 1 || sc.Count > 12 {
		add("intervalCount", "must be 1 to 12")
	}
	if sc.EndAfter != nil && *sc.EndAfter < 1 {
		add("endAfter", "must be at least 1, or null")
	}
	switch {
	case sc.EndAfter != nil && sc.EndOn != nil:
		add("endOn", "cannot be given with endAfter: end the series one way, the other null")
	case sc.EndOn != nil && sc.EndOn.Before(sc.StartOn):
		add("endOn", "must be on or after startOn")
	}
	if len(fields) > 0 {
		return rule.InvalidFields(fields)
	}
	return nil
}

// draft is the invoice the terms make for an occurrence on day.
func draft(t Terms, number string, day time.Time) invoice.Draft {
	due := day.AddDate(0, 0, t.DueDays)
	return invoice.Draft{
		MerchantAccountID: t.MerchantAccountID, InvoiceNumber: number, Amount: t.Amount,
		PONumber: t.PONumber, CustomerID: &t.CustomerID, Delivery: t.Delivery, Memo: t.Memo,
		DueDate: &due, Lines: t.Lines, Send: &t.Send, Reminders: t.Reminders,
	}
}

// zone is the time zone of the MID's location, which must be the
// organization's and active (refused as invoice creation refuses it).
func zone(ctx context.Context, q sqlx.QueryerContext, org, mid uuid.UUID) (*time.Location, error) {
	accounts, err := directory.AccountsByID(ctx, q, []uuid.UUID{mid})
	a, ok := accounts[mid]
	switch {
	case err != nil:
		return nil, err
	case !ok || a.OrganizationID != org:
		return nil, rule.New(rule.Unprocessable, "merchantAccountId", "Unknown merchant account",
			"The merchant account is not a MID of your organization.")
	case a.LocationStatus != "active":
		return nil, rule.New(rule.Unprocessable, "merchantAccountId", "Merchant account unavailable",
			"The location of this MID is not active, so it cannot take invoices.")
	}
	loc, err := time.LoadLocation(a.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("recurring: the time zone of merchant account %s: %w", mid, err)
	}
	return loc, nil
}

// checkCustomer refuses a customer not the organization's, and a taxed
// line for a tax-exempt one, as invoice creation refuses them.
func checkCustomer(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, t Terms) error {
	c, err := customer.ForInvoice(ctx, tx, org, t.CustomerID)
	if errors.Is(err, customer.ErrNotFound) {
		return rule.New(rule.Unprocessable, "customerId", "Unknown customer", "The customer is not a customer of your organization.")
	}
	if err != nil {
		return err
	}
	if c.TaxExempt {
		for i, l := range t.Lines {
			if l.TaxRate != nil && l.TaxRate.Sign() != 0 {
				return rule.New(rule.Unprocessable, fmt.Sprintf("lines[%d].taxRate", i), "Customer is tax-exempt",
					"The customer is tax-exempt, so the lines carry no tax; leave taxRate null or 0.")
			}
		}
	}
	return nil
}

// checkAutoPay refuses an automatic payment with a card that is not the
// customer's with consent to future charges.
func checkAutoPay(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, t Terms) error {
	if t.AutoPay == nil {
		return nil
	}
	return payment.CheckAutoPayCard(ctx, tx, org, t.CustomerID, *t.AutoPay, "autoPay.savedCardId")
}

// Create makes an active series (refused as validate refuses it, and when
// startOn is before today in the MID's location's zone). With an
// idempotency key (nil: none) a repeat answers the series already made
// (replayed true), as invoice.Store.Create does.
func (s *Store) Create(ctx context.Context, org uuid.UUID, t Terms, sc Schedule, key *string) (sr Series, replayed bool, err error) {
	if err := validate(t, sc); err != nil {
		return Series{}, false, err
	}
	k, err := idempotency.OptionalKey(key, t, sc)
	if err != nil {
		return Series{}, false, err
	}
	id := uuid.Must(uuid.NewV7())
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		found, err := k.Claim(ctx, tx, org, idempotency.CreateRecurringInvoice, id, now)
		if err != nil || found != uuid.Nil {
			id, replayed = found, found != uuid.Nil
			return err
		}
		loc, err := zone(ctx, tx, org, t.MerchantAccountID)
		if err != nil {
			return err
		}
		if err := checkCustomer(ctx, tx, org, t); err != nil {
			return err
		}
		if err := checkAutoPay(ctx, tx, org, t); err != nil {
			return err
		}
		if today := Today(now, loc); sc.StartOn.Before(today) {
			return rule.InvalidField("startOn", fmt.Sprintf("must be today (%s in the location's time zone) or later", today.Format(time.DateOnly)))
		}
		sr = Series{Terms: t, Schedule: sc, ID: id, OrganizationID: org, Status: Active, CreatedAt: now, UpdatedAt: now}
		if err := s.insert(ctx, tx, &sr, loc); err != nil {
			return err
		}
		_, err = event.Append(ctx, tx, org, event.RecurringInvoiceCreated, sr.Model(), now)
		return err
	})
	if err != nil {
		return Series{}, false, err
	}
	if replayed {
		sr, err = s.Get(ctx, org, id)
	}
	return sr, replayed, err
}

// dueAt is when the series' next occurrence is due in loc; nil when it
// has none (it ends).
func (sr *Series) dueAt(loc *time.Location) *time.Time {
	day, ok := sr.NextOn()
	if !ok {
		return nil
	}
	at := DueAt(day, loc)
	return &at
}

const columns = `id, organization_id, merchant_account_id, customer_id, invoice_number_prefix, amount::text AS amount, lines, memo,
	po_number, delivery, reminders, interval,
	interval_count, start_on, end_after, end_on, due_days, send, status, next_n, issued_count, skipped_count,
	last_invoice_id, auto_pay_saved_card_id, created_at, updated_at`

// row is a row of recurring_invoices as read.
type row struct {
	ID                uuid.UUID  `db:"id"`
	OrganizationID    uuid.UUID  `db:"organization_id"`
	MerchantAccountID uuid.UUID  `db:"merchant_account_id"`
	CustomerID        uuid.UUID  `db:"customer_id"`
	Prefix            string     `db:"invoice_number_prefix"`
	Amount            string     `db:"amount"`
	Lines             []byte     `db:"lines"`
	Memo              *string    `db:"memo"`
	PONumber          *string    `db:"po_number"`
	Delivery          string     `db:"delivery"`
	Reminders         *bool      `db:"reminders"`
	Interval          string     `db:"interval"`
	IntervalCount     int        `db:"interval_count"`
	StartOn           time.Time  `db:"start_on"`
	EndAfter          *int       `db:"end_after"`
	EndOn             *time.Time `db:"end_on"`
	DueDays           int        `db:"due_days"`
	Send              bool       `db:"send"`
	Status            string     `db:"status"`
	Next              int        `db:"next_n"`
	IssuedCount       int        `db:"issued_count"`
	SkippedCount      int        `db:"skipped_count"`
	LastInvoiceID     *uuid.UUID `db:"last_invoice_id"`
	AutoPay           *uuid.UUID `db:"auto_pay_saved_card_id"`
	CreatedAt         time.Time  `db:"created_at"`
	UpdatedAt         time.Time  `db:"updated_at"`
}

// civil is a date column's day as Schedule holds days.
func civil(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func (r row) series() (Series, error) {
	amount, _, err := apd.NewFromString(r.Amount)
	if err != nil {
		return Series{}, fmt.Errorf("recurring: amount %q: %w", r.Amount, err)
	}
	delivery := r.Delivery
	sr := Series{
		Terms: Terms{MerchantAccountID: r.MerchantAccountID, CustomerID: r.CustomerID, Prefix: r.Prefix, Amount: *amount,
			Memo: r.Memo, PONumber: r.PONumber, Delivery: &delivery, Reminders: r.Reminders, DueDays: r.DueDays, Send: r.Send,
			AutoPay: r.AutoPay},
		Schedule: Schedule{StartOn: civil(r.StartOn), Interval: Interval(r.Interval), Count: r.IntervalCount,
			EndAfter: r.EndAfter},
		ID: r.ID, OrganizationID: r.OrganizationID, Status: Status(r.Status), Next: r.Next,
		IssuedCount: r.IssuedCount, SkippedCount: r.SkippedCount, LastInvoiceID: r.LastInvoiceID,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.EndOn != nil {
		end := civil(*r.EndOn)
		sr.EndOn = &end
	}
	if r.Lines != nil {
		if err := json.Unmarshal(r.Lines, &sr.Lines); err != nil {
			return Series{}, fmt.Errorf("recurring: lines of %s: %w", r.ID, err)
		}
	}
	return sr, nil
}

// insert writes a new series, due as loc says.
func (s *Store) insert(ctx context.Context, tx *sqlx.Tx, sr *Series, loc *time.Location) error {
	lines, err := linesJSON(sr.Lines)
	if err != nil {
		return err
	}
	delivery := invoice.Email
	if sr.Delivery != nil {
		delivery = *sr.Delivery
	}
	sr.Delivery = &delivery
	_, err = tx.ExecContext(ctx, `
		INSERT INTO recurring_invoices (id, organization_id, merchant_account_id, customer_id, invoice_number_prefix, amount,
			lines, memo, po_number, delivery, reminders,
			interval, interval_count, start_on, end_after, end_on, due_days, send, status, next_n, next_due_at,
			auto_pay_saved_card_id, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6::numeric, $7::jsonb, $8, $9, $10, $11, $12, $13, $14::date,
			$15, $16::date, $17, $18, $19, 0, $20, $22, $21, $21)`,
		sr.ID, sr.OrganizationID, sr.MerchantAccountID, sr.CustomerID, sr.Prefix, sr.Amount.Text('f'), lines,
		sr.Memo, sr.PONumber, delivery, sr.Reminders, string(sr.Interval), sr.Count, sr.StartOn, sr.EndAfter, sr.EndOn, sr.DueDays, sr.Send,
		string(sr.Status), sr.dueAt(loc), sr.CreatedAt, sr.AutoPay)
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" && pqErr.Constraint == "recurring_invoices_prefix" {
		return rule.New(rule.Unprocessable, "invoiceNumberPrefix", "Invoice number prefix already used",
			fmt.Sprintf("Another recurring invoice of your organization numbers its invoices %s-0001 on; choose another prefix.", sr.Prefix))
	}
	if err != nil {
		return fmt.Errorf("recurring: unable to create recurring invoice: %w", err)
	}
	return nil
}

func linesJSON(lines []invoice.Line) (*string, error) {
	if lines == nil {
		return nil, nil
	}
	b, err := json.Marshal(lines)
	if err != nil {
		return nil, fmt.Errorf("recurring: lines: %w", err)
	}
	text := string(b)
	return &text, nil
}

// save writes what a change or an occurrence changed of sr, due as loc
// says; a series with no occurrence left has ended.
func (s *Store) save(ctx context.Context, tx *sqlx.Tx, sr *Series, loc *time.Location) error {
	due := sr.dueAt(loc)
	if due == nil {
		sr.Status = Ended
	}
	lines, err := linesJSON(sr.Lines)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `
		UPDATE recurring_invoices SET amount = $2::numeric, lines = $3::jsonb, memo = $4, po_number = $5, due_days = $6,
			end_after = $7, end_on = $8::date, status = $9, next_n = $10, next_due_at = $11, issued_count = $12,
			skipped_count = $13, last_invoice_id = $14, updated_at = $15, auto_pay_saved_card_id = $16
		WHERE id = $1`,
		sr.ID, sr.Amount.Text('f'), lines, sr.Memo, sr.PONumber, sr.DueDays, sr.EndAfter, sr.EndOn, string(sr.Status),
		sr.Next, due, sr.IssuedCount, sr.SkippedCount, sr.LastInvoiceID, sr.UpdatedAt, sr.AutoPay)
	if err != nil {
		return fmt.Errorf("recurring: unable to save recurring invoice %s: %w", sr.ID, err)
	}
	return nil
}

// Get reads a series of the organization.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (Series, error) {
	return s.read(ctx, s.DB, org, id, "")
}

// read reads a series through q, with lock (" FOR UPDATE") or not.
func (s *Store) read(ctx context.Context, q sqlx.QueryerContext, org, id uuid.UUID, lock string) (Series, error) {
	var r row
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+columns+` FROM recurring_invoices WHERE id = $1 AND organization_id = $2`+lock, id, org)
	if errors.Is(err, sql.ErrNoRows) {
		return Series{}, ErrNotFound
	}
	if err != nil {
		return Series{}, fmt.Errorf("recurring: unable to read recurring invoice: %w", err)
	}
	return r.series()
}

// Filter narrows a list; nil members do not.
type Filter struct {
	Status     *string
	CustomerID *uuid.UUID
}

// List is the organization's series, newest first, a page at a time.
func (s *Store) List(ctx context.Context, org uuid.UUID, f Filter, limit int, after string) ([]Series, string, error) {
	q := keyset.NewQuery(`SELECT `+columns+` FROM recurring_invoices`, "created_at", "id")
	q.Where("organization_id = $%d", org)
	if f.Status != nil {
		q.Where("status = $%d", *f.Status)
	}
	if f.CustomerID != nil {
		q.Where("customer_id = $%d", *f.CustomerID)
	}
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	list, next, err := keyset.Fetch(ctx, s.DB, q, limit, func(r *sql.Rows) (Series, error) {
		var rw row
		if err := (&sqlx.Rows{Rows: r, Mapper: s.DB.Mapper}).StructScan(&rw); err != nil {
			return Series{}, err
		}
		return rw.series()
	}, func(sr Series) keyset.Cursor { return keyset.Cursor{At: sr.CreatedAt, ID: sr.ID} })
	if err != nil {
		return nil, "", fmt.Errorf("recurring: unable to list recurring invoices: %w", err)
	}
	return list, next, nil
}

// Change is a PATCH of a series: nil members keep their value; Set* ones
// replace nullable members (their value nil: cleared).
type Change struct {
	Status      *Status
	Amount      *apd.Decimal
	SetLines    bool
	Lines       []invoice.Line
	SetMemo     bool
	Memo        *string
	SetPONumber bool
	PONumber    *string
	DueDays     *int
	SetEndAfter bool
	EndAfter    *int
	SetEndOn    bool
	EndOn       *time.Time
	SetAutoPay  bool
	AutoPay     *uuid.UUID
}

// Update changes what the series issues from now on, pauses it or resumes
// it (the next occurrence then the first on or after today in the
// location's zone: none passed while paused is issued). An ended series
// is refused.
func (s *Store) Update(ctx context.Context, org, id uuid.UUID, c Change) (sr Series, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		if sr, err = s.read(ctx, tx, org, id, " FOR UPDATE"); err != nil {
			return err
		}
		if sr.Status == Ended {
			return errEnded
		}
		if c.SetLines {
			sr.Lines = c.Lines
			if c.Amount == nil && c.Lines != nil {
				sub, tax := invoice.Totals(c.Lines)
				var total apd.Decimal
				if _, err := decimals.Add(&total, &sub, &tax); err != nil {
					return err
				}
				sr.Amount = total
			}
		}
		if c.Amount != nil {
			sr.Amount = *c.Amount
		}
		if c.SetMemo {
			sr.Memo = c.Memo
		}
		if c.SetPONumber {
			sr.PONumber = c.PONumber
		}
		if c.DueDays != nil {
			sr.DueDays = *c.DueDays
		}
		if c.SetEndAfter {
			sr.Schedule.EndAfter = c.EndAfter
		}
		if c.SetEndOn {
			sr.Schedule.EndOn = c.EndOn
		}
		if err := validate(sr.Terms, sr.Schedule); err != nil {
			return err
		}
		if c.SetAutoPay {
			sr.AutoPay = c.AutoPay
			if err := checkAutoPay(ctx, tx, org, sr.Terms); err != nil {
				return err
			}
		}
		loc, err := zone(ctx, tx, org, sr.MerchantAccountID)
		if err != nil {
			return err
		}
		if c.Status != nil && *c.Status != sr.Status {
			if *c.Status == Active {
				// Resumed: the occurrences passed while paused are passed over.
				today := Today(now, loc)
				for day, ok := sr.remaining().On(sr.Next); ok && day.Before(today); day, ok = sr.remaining().On(sr.Next) {
					sr.Next++
				}
			}
			sr.Status = *c.Status
		}
		if sr.EndAfter != nil && *sr.EndAfter <= sr.IssuedCount {
			sr.Status = Ended
		}
		sr.UpdatedAt = now
		if err := s.save(ctx, tx, &sr, loc); err != nil {
			return err
		}
		if _, err := event.Append(ctx, tx, org, event.RecurringInvoiceUpdated, sr.Model(), now); err != nil {
			return err
		}
		if sr.Status == Ended {
			_, err = event.Append(ctx, tx, org, event.RecurringInvoiceEnded, sr.Model(), now)
		}
		return err
	})
	return sr, err
}

// End ends the series: it issues nothing more. An ended series is
// answered as it is.
func (s *Store) End(ctx context.Context, org, id uuid.UUID) (sr Series, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		if sr, err = s.read(ctx, tx, org, id, " FOR UPDATE"); err != nil || sr.Status == Ended {
			return err
		}
		sr.Status, sr.UpdatedAt = Ended, now
		if err := s.save(ctx, tx, &sr, time.UTC); err != nil {
			return err
		}
		_, err = event.Append(ctx, tx, org, event.RecurringInvoiceEnded, sr.Model(), now)
		return err
	})
	return sr, err
}

// Occurrence is an occurrence of a series handled: its invoice, or none
// when it was skipped.
type Occurrence struct {
	N         int        `db:"n"`
	IssueOn   time.Time  `db:"issue_on"`
	InvoiceID *uuid.UUID `db:"invoice_id"`
	Skipped   bool       `db:"skipped"`
}

// Occurrences are the latest limit occurrences of the organization's
// series id handled, newest first.
func (s *Store) Occurrences(ctx context.Context, org, id uuid.UUID, limit int) ([]Occurrence, error) {
	var out []Occurrence
	err := s.DB.SelectContext(ctx, &out, `SELECT o.n, o.issue_on, o.invoice_id, o.skipped FROM recurring_occurrences o
		JOIN recurring_invoices r ON r.id = o.recurring_invoice_id
		WHERE o.recurring_invoice_id = $1 AND r.organization_id = $2 ORDER BY o.n DESC LIMIT $3`, id, org, limit)
	if err != nil {
		return nil, fmt.Errorf("recurring: unable to read the occurrences of %s: %w", id, err)
	}
	for i := range out {
		out[i].IssueOn = civil(out[i].IssueOn)
	}
	return out, nil
}
