package invoice

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/customer"
	"github.com/payreq/payreq/internal/delivery"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/keyset"
	"github.com/payreq/payreq/internal/optional"
	"github.com/payreq/payreq/internal/people"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/rule"
)

// Store keeps invoices. Every method is scoped by organization.
type Store struct {
	DB        *sqlx.DB
	Now       func() time.Time
	PublicURL string
	PayLinks  *PayLinks
	Cards     Cards
	Terminals TerminalPayments
	// Members are told of invoices paid, as each chose (nil: nobody is).
	Members Members
}

// Actor is who acts: the caller's organization and the name the invoice
// keeps (the API key's or the member's); Audit, when a person acts, is
// audited in the change's transaction.
type Actor struct {
	OrganizationID uuid.UUID
	Name           string
	Audit          *audit.Actor
}

// audit appends the entry of a change the actor made in tx, the change's
// transaction; none when no person acts.
func (a Actor) audit(ctx context.Context, tx *sqlx.Tx, action, detail string, at time.Time) error {
	if a.Audit == nil {
		return nil
	}
	return audit.Append(ctx, tx, audit.Entry{Organization: &a.OrganizationID, Actor: *a.Audit, Action: action, Detail: detail, At: at})
}

// named is how the log names an invoice.
func named(inv Invoice) string { return inv.InvoiceNumber + " (" + inv.ID.String() + ")" }

// Link is the invoice's pay link; "" for a draft, which has none.
func (s *Store) Link(inv *Invoice) string {
	if inv.Status == InDraft {
		return ""
	}
	var b strings.Builder
	b.Grow(len(s.PublicURL) + len("/pay/") + tokenLength)
	b.WriteString(s.PublicURL)
	b.WriteString("/pay/")
	s.PayLinks.writeToken(&b, inv.ID)
	return b.String()
}

// invoiceColumns and invoiceFrom are what every read of invoices selects
// and joins; scanInvoice reads them in this order. The MID and its
// location's name are directory's, the customer's stated preference is
// customer's (withOwners).
const (
	invoiceColumns = `i.id, i.organization_id, i.merchant_account_id, i.invoice_number, i.po_number,
		i.amount::text, i.amount_paid::text, i.amount_refunded::text, i.customer_name, i.customer_company, i.customer_email,
		i.customer_phone, i.delivery, i.sent_via, i.sent_at, i.send_problem, i.memo, i.due_date, i.line_count, i.tax_amount::text,
		i.status, i.failed_attempts, i.problem, i.paid_at, i.level3_sent, i.created_at, i.created_by_name,
		i.cancelled_at, i.cancelled_by_name, i.customer_id, i.scheduled_send_at, i.reminders, i.reminders_sent, i.last_reminded_at,
		i.version`
	invoiceFrom = `
	FROM invoices i`
)

const selectInvoice = `
	SELECT ` + invoiceColumns + invoiceFrom

// selectFullInvoice adds the lines and the payments recorded outside the
// card, each a JSON array of rows of text (decoded by decodeText), so that
// what invoice keeps of an invoice is one statement. Its card payments
// and the customer's saved cards are the payment package's (Cards).
const selectFullInvoice = `
	SELECT ` + invoiceColumns + `, ` + fullInvoiceColumns + invoiceFrom

// fullInvoiceColumns are what a full read adds to invoiceColumns.
const fullInvoiceColumns = `
		(SELECT json_agg(json_build_array(il.description, il.quantity::text, il.unit_cost::text, il.uom,
				il.commodity_code, il.upc, il.tax_rate::text) ORDER BY il.position)
			FROM invoice_lines il WHERE il.invoice_id = i.id),
		(SELECT json_agg(json_build_array(r.id, r.amount::text, r.received_at, r.method, r.reference, r.created_at)
				ORDER BY r.received_at, r.id)
			FROM recorded_payments r WHERE r.invoice_id = i.id)`

// Cards is what the payment package keeps of an invoice and its customer,
// read through q (the transaction of the read or the change): invoice
// cannot import payment, which moves invoices.
type Cards interface {
	// InvoiceSales are the approved card sales toward the invoice.
	InvoiceSales(ctx context.Context, q sqlx.QueryerContext, org, invoiceID uuid.UUID) ([]Payment, error)
	// SavedCardsOf are the customer's saved cards, newest first.
	SavedCardsOf(ctx context.Context, q sqlx.QueryerContext, org, customerID uuid.UUID) ([]SavedCard, error)
	// ChargesUnderWay says whether a charge toward the invoice is reserved
	// and its outcome not yet recorded (read under the invoice's row lock).
	ChargesUnderWay(ctx context.Context, q sqlx.QueryerContext, invoiceID uuid.UUID) (bool, error)
}

// TerminalPayments is what invoice asks of the terminal payments
// (internal/terminal's, which imports invoice).
type TerminalPayments interface {
	// PendingFor says whether a terminal is taking a payment toward the
	// invoice (read under the invoice's row lock, which taking one holds).
	PendingFor(ctx context.Context, q sqlx.QueryerContext, invoiceID uuid.UUID) (bool, error)
}

type scanner interface{ Scan(dest ...any) error }

// withOwners sets what others keep of the invoices, read through q: the
// MIDs and location names (withAccounts), and the customers' stated
// preferences, customer's, in one statement for them all.
func withOwners(ctx context.Context, q sqlx.QueryerContext, invs ...*Invoice) error {
	if err := withAccounts(ctx, q, invs...); err != nil {
		return err
	}
	ids := make([]uuid.UUID, 0, len(invs))
	for _, inv := range invs {
		if !slices.Contains(ids, inv.CustomerID) {
			ids = append(ids, inv.CustomerID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	prefers, err := customer.PrefersOf(ctx, q, ids)
	if err != nil {
		return err
	}
	for _, inv := range invs {
		if p, ok := prefers[inv.CustomerID]; ok {
			inv.CustomerPrefers = &p
		}
	}
	return nil
}

// withAccounts sets the invoices' MIDs and location names, directory's,
// read through q in one statement for them all.
func withAccounts(ctx context.Context, q sqlx.QueryerContext, invs ...*Invoice) error {
	ids := make([]uuid.UUID, 0, len(invs))
	for _, inv := range invs {
		if !slices.Contains(ids, inv.MerchantAccountID) {
			ids = append(ids, inv.MerchantAccountID)
		}
	}
	accounts, err := directory.AccountsByID(ctx, q, ids)
	if err != nil {
		return err
	}
	names := make(map[uuid.UUID]*string, len(accounts))
	for id, a := range accounts {
		names[id] = &a.Location
	}
	for _, inv := range invs {
		inv.MID, inv.LocationName = accounts[inv.MerchantAccountID].MID, names[inv.MerchantAccountID]
	}
	return nil
}

// scanInvoice reads a row of selectInvoice; extra receives the columns
// that follow (those of selectFullInvoice).
func scanInvoice(row scanner, extra ...any) (Invoice, error) {
	return newInvoiceRow(extra...).scan(row)
}

// invoiceRow receives rows of selectInvoice: Scan's destinations are its
// fields, made once, so that a list page scans all of its rows into one
// and a row costs no allocation but the driver's own values and one for
// the invoice's optional values. (Each row had cost some 30 more: Scan
// makes a new value, by reflection, for each destination that is a
// pointer to a pointer, and uuid.UUID's Scan copies lib/pq's text of a
// uuid into a string.)
type invoiceRow struct {
	inv                                                   Invoice // the columns that are never NULL, as they are
	id, organizationID, merchantAccountID, customerID     uuidColumn
	amount, amountPaid, amountRefunded, taxAmount, status string
	lineCount, failedAttempts, remindersSent, version     int64
	po, customerName, customerCompany                     sql.NullString
	customerPhone, sentVia, sendProblem, memo, problem    sql.NullString
	cancelledByName                                       sql.NullString
	sentAt, dueDate, paidAt, cancelledAt, scheduledSendAt sql.NullTime
	lastRemindedAt                                        sql.NullTime
	reminders                                             sql.NullBool
	dest                                                  []any
}

func newInvoiceRow(extra ...any) *invoiceRow {
	r := &invoiceRow{}
	r.dest = append([]any{&r.id, &r.organizationID, &r.merchantAccountID, &r.inv.InvoiceNumber,
		&r.po, &r.amount, &r.amountPaid, &r.amountRefunded, &r.customerName, &r.customerCompany, &r.inv.CustomerEmail,
		&r.customerPhone, &r.inv.Delivery, &r.sentVia, &r.sentAt, &r.sendProblem, &r.memo, &r.dueDate, &r.lineCount, &r.taxAmount,
		&r.status, &r.failedAttempts, &r.problem, &r.paidAt, &r.inv.Level3Sent, &r.inv.CreatedAt, &r.inv.CreatedByName,
		&r.cancelledAt, &r.cancelledByName, &r.customerID, &r.scheduledSendAt, &r.reminders, &r.remindersSent,
		&r.lastRemindedAt, &r.version}, extra...)
	return r
}

// optionals hold the values of one invoice's optional fields, which
// point into them: one allocation a row, not one a value.
type optionals struct {
	po, customerName, customerCompany, customerPhone, sentVia, sendProblem, memo, problem string
	cancelledByName                                                                       string
	sentAt, dueDate, paidAt, cancelledAt, scheduledSendAt, lastRemindedAt                 time.Time
	reminders                                                                             bool
}

// scan reads row into an invoice of its own.
func (r *invoiceRow) scan(row scanner) (Invoice, error) {
	if err := row.Scan(r.dest...); err != nil {
		return Invoice{}, err
	}
	inv := r.inv
	inv.ID, inv.OrganizationID, inv.MerchantAccountID = uuid.UUID(r.id), uuid.UUID(r.organizationID), uuid.UUID(r.merchantAccountID)
	inv.CustomerID = uuid.UUID(r.customerID)
	inv.Status = Status(r.status)
	inv.LineCount, inv.FailedAttempts, inv.RemindersSent = int(r.lineCount), int(r.failedAttempts), int(r.remindersSent)
	inv.Version = int(r.version)
	for _, err := range []error{numeric(&inv.Amount, r.amount), numeric(&inv.AmountPaid, r.amountPaid),
		numeric(&inv.AmountRefunded, r.amountRefunded), numeric(&inv.TaxAmount, r.taxAmount)} {
		if err != nil {
			return Invoice{}, err
		}
	}
	o := &optionals{}
	str := func(v sql.NullString, to *string) *string {
		if !v.Valid {
			return nil
		}
		*to = v.String
		return to
	}
	tm := func(v sql.NullTime, to *time.Time) *time.Time {
		if !v.Valid {
			return nil
		}
		*to = v.Time
		return to
	}
	inv.PONumber = str(r.po, &o.po)
	inv.CustomerName, inv.CustomerCompany = str(r.customerName, &o.customerName), str(r.customerCompany, &o.customerCompany)
	inv.CustomerPhone, inv.SentVia = str(r.customerPhone, &o.customerPhone), str(r.sentVia, &o.sentVia)
	inv.SendProblem, inv.Memo, inv.Problem = str(r.sendProblem, &o.sendProblem), str(r.memo, &o.memo), str(r.problem, &o.problem)
	inv.CancelledByName = str(r.cancelledByName, &o.cancelledByName)
	inv.SentAt, inv.DueDate, inv.PaidAt = tm(r.sentAt, &o.sentAt), tm(r.dueDate, &o.dueDate), tm(r.paidAt, &o.paidAt)
	inv.CancelledAt, inv.ScheduledSendAt = tm(r.cancelledAt, &o.cancelledAt), tm(r.scheduledSendAt, &o.scheduledSendAt)
	inv.LastRemindedAt = tm(r.lastRemindedAt, &o.lastRemindedAt)
	if r.reminders.Valid {
		o.reminders = r.reminders.Bool
		inv.Reminders = &o.reminders
	}
	return inv, nil
}

// uuidColumn scans a uuid as uuid.UUID does, without copying lib/pq's
// text of it (the 36 characters it makes of the binary value) into a
// string first.
type uuidColumn uuid.UUID

func (u *uuidColumn) Scan(src any) error {
	var (
		id  uuid.UUID
		err error
	)
	switch v := src.(type) {
	case []byte:
		if len(v) == 16 {
			copy(u[:], v)
			return nil
		}
		id, err = uuid.ParseBytes(v)
	case string:
		id, err = uuid.Parse(v)
	default:
		return fmt.Errorf("invoice: a uuid column of type %T", src)
	}
	if err != nil {
		return fmt.Errorf("invoice: a uuid column: %w", err)
	}
	*u = uuidColumn(id)
	return nil
}

// Create makes an invoice from a draft (refused as Validate refuses it)
// and, unless Send is false, queues its pay link in the same transaction;
// with AsDraft it is saved as a draft, with no pay link and nothing sent.
// With an idempotency key (nil: none), a repeat of the same request
// answers the invoice already made (replayed true), the key with another
// draft is refused (idempotency.ErrReused), and concurrent repeats wait
// for the first.
func (s *Store) Create(ctx context.Context, actor Actor, d Draft, key *string) (inv Invoice, replayed bool, err error) {
	if err := Validate(d); err != nil {
		return Invoice{}, false, err
	}
	k, err := idempotency.OptionalKey(key, d)
	if err != nil {
		return Invoice{}, false, err
	}
	id := uuid.Must(uuid.NewV7())
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		found, err := k.Claim(ctx, tx, actor.OrganizationID, idempotency.CreateInvoice, id, now)
		if err != nil || found != uuid.Nil {
			id, replayed = found, found != uuid.Nil
			return err
		}
		// sendAt is checked against the clock after the key (in create):
		// a repeat of a request whose sendAt has passed since answers what
		// the first made.
		inv, err = s.create(ctx, tx, actor, d, id, now)
		return err
	})
	if err != nil {
		return Invoice{}, false, err
	}
	if replayed {
		inv, err = s.Get(ctx, actor.OrganizationID, id)
	}
	return inv, replayed, err
}

// numberTaken is the refusal of an invoice number the organization has
// already, when err (of a statement writing it) says so; nil otherwise.
func numberTaken(err error, number string) error {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23505" && pqErr.Constraint == "invoices_organization_id_invoice_number_key" {
		return unprocessable("invoiceNumber", "Invoice number already used",
			fmt.Sprintf("Your organization already has an invoice numbered %q; invoice numbers are unique.", number))
	}
	return nil
}

// errUnknownCustomer refuses a customerId that is not a customer of the
// caller's organization.
var errUnknownCustomer = unprocessable("customerId", "Unknown customer", "The customer is not a customer of your organization.")

// customerOf is the customer of the draft being made into an invoice in
// tx: the one its CustomerID names, whose details fill the draft's
// customer fields left nil (a CustomerEmail not the customer's is
// refused), or the organization's customer with its CustomerEmail, made
// from its name, company and phone when there is none.
func customerOf(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, d *Draft, now time.Time) (customer.Customer, error) {
	if d.CustomerID == nil {
		return customer.Ensure(ctx, tx, org, *d.CustomerEmail, d.CustomerName, d.CustomerCompany, d.CustomerPhone, now)
	}
	c, err := customer.ForInvoice(ctx, tx, org, *d.CustomerID)
	if errors.Is(err, customer.ErrNotFound) {
		return customer.Customer{}, errUnknownCustomer
	}
	if err != nil {
		return customer.Customer{}, err
	}
	if d.CustomerEmail != nil && !strings.EqualFold(*d.CustomerEmail, c.Email) {
		return customer.Customer{}, unprocessable("customerEmail", "Customer email differs",
			fmt.Sprintf("customerEmail is not the email of the customer customerId names (%s); leave it null or change the customer.", c.Email))
	}
	fill := func(field **string, from *string) {
		if *field == nil {
			*field = from
		}
	}
	fill(&d.CustomerEmail, &c.Email)
	fill(&d.CustomerName, c.Name)
	fill(&d.CustomerCompany, c.Company)
	fill(&d.CustomerPhone, c.Phone)
	return c, checkCustomerFields(*d)
}

// checkExempt refuses a taxed line on an invoice to a tax-exempt customer.
func checkExempt(c customer.Customer, lines []Line) error {
	if !c.TaxExempt {
		return nil
	}
	for i, l := range lines {
		if l.TaxRate != nil && l.TaxRate.Sign() != 0 {
			return unprocessable(fmt.Sprintf("lines[%d].taxRate", i), "Customer is tax-exempt",
				"The invoice's customer is tax-exempt, so its lines carry no tax; leave taxRate null or 0.")
		}
	}
	return nil
}

// CustomerTotals are the totals of each customer's invoices, read through
// q in one statement (customer.Invoices).
func (s *Store) CustomerTotals(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]customer.Totals, error) {
	rows, err := q.QueryContext(ctx, `
		SELECT customer_id, count(*),
			coalesce(sum(amount - amount_paid) FILTER (WHERE status IN ('open', 'part_paid')), 0)::numeric(13, 2)::text
		FROM invoices WHERE organization_id = $1 AND customer_id = ANY($2::uuid[])
		GROUP BY customer_id`, org, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("invoice: unable to read customers' totals: %w", err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID]customer.Totals, len(ids))
	for rows.Next() {
		var (
			id      uuid.UUID
			t       customer.Totals
			balance string
		)
		if err := rows.Scan(&id, &t.Count, &balance); err != nil {
			return nil, fmt.Errorf("invoice: unable to read customers' totals: %w", err)
		}
		if err := numeric(&t.OpenBalance, balance); err != nil {
			return nil, err
		}
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("invoice: unable to read customers' totals: %w", err)
	}
	return out, nil
}

// CreateIn makes an invoice from a draft (refused as Validate refuses it)
// inside tx, the transaction of the caller's own change (a recurring
// invoice's occurrence, claimed in the same transaction), and, unless Send
// is false, queues its pay link there: Create without an idempotency key.
func (s *Store) CreateIn(ctx context.Context, tx *sqlx.Tx, actor Actor, d Draft, now time.Time) (Invoice, error) {
	if err := Validate(d); err != nil {
		return Invoice{}, err
	}
	return s.create(ctx, tx, actor, d, uuid.Must(uuid.NewV7()), now)
}

// create is Create's change, inside tx, for an invoice id of Validate'd d.
func (s *Store) create(ctx context.Context, tx *sqlx.Tx, actor Actor, d Draft, id uuid.UUID, now time.Time) (inv Invoice, err error) {
	if err := checkSendAt(d.SendAt, now); err != nil {
		return Invoice{}, err
	}
	delivery := Email
	if d.Delivery != nil {
		delivery = *d.Delivery
	}
	status := Open
	if d.AsDraft {
		status = InDraft
	}
	// The MID must be the caller's and its location active.
	if err := checkAccount(ctx, tx, actor.OrganizationID, d.MerchantAccountID); err != nil {
		return Invoice{}, err
	}
	// The customer it names, or the one of its email (made when
	// there is none). Its TaxExempt is for the invoice's tax.
	cust, err := customerOf(ctx, tx, actor.OrganizationID, &d, now)
	if err != nil {
		return Invoice{}, err
	}
	if err := checkExempt(cust, d.Lines); err != nil {
		return Invoice{}, err
	}
	// The lines go in the same statement (one round trip; their
	// foreign key is checked at its end).
	lines := lineArrays(d.Lines)
	_, tax := Totals(d.Lines)
	_, err = tx.ExecContext(ctx, `
		WITH invoice AS (
			INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, po_number, amount,
				customer_name, customer_company, customer_email, customer_phone, delivery, memo, due_date,
				line_count, status, created_at, created_by_name, scheduled_send_at, reminders, tax_amount, customer_id)
			VALUES ($1::uuid, $2::uuid, $3::uuid, $4, $5, $6::numeric, $7, $8, $9, $10, $11, $12, $13::date,
				$14::integer, $27, $15::timestamptz, $16, $23::timestamptz, $24::boolean, $26::numeric, $28::uuid)
			RETURNING id
		), lines AS (
			INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_cost, uom, commodity_code, upc, tax_rate)
			SELECT invoice.id, t.ord - 1, t.d, t.q::numeric, t.c::numeric, t.u, t.cc, t.upc, t.tr::numeric
			FROM invoice, unnest($17::text[], $18::text[], $19::text[], $20::text[], $21::text[], $22::text[], $25::text[])
				WITH ORDINALITY AS t(d, q, c, u, cc, upc, tr, ord)
		)
		SELECT count(*) FROM invoice`,
		id, actor.OrganizationID, d.MerchantAccountID, d.InvoiceNumber, d.PONumber, d.Amount.Text('f'),
		d.CustomerName, d.CustomerCompany, *d.CustomerEmail, d.CustomerPhone, delivery, d.Memo, d.DueDate,
		len(d.Lines), now, actor.Name,
		pq.Array(lines.desc), pq.Array(lines.qty), pq.Array(lines.cost), pq.Array(lines.uom), pq.Array(lines.code), pq.Array(lines.upc),
		d.SendAt, d.Reminders, pq.Array(lines.rate), tax.Text('f'), string(status), cust.ID)
	var pqErr *pq.Error
	if err := numberTaken(err, d.InvoiceNumber); err != nil {
		return Invoice{}, err
	}
	if errors.As(err, &pqErr) && pqErr.Code == "23503" && pqErr.Constraint == "invoices_customer_id_fkey" {
		return Invoice{}, errUnknownCustomer // deleted meanwhile
	}
	if err != nil {
		return Invoice{}, fmt.Errorf("invoice: unable to create invoice: %w", err)
	}
	sent := (d.Send == nil || *d.Send) && d.SendAt == nil && !d.AsDraft
	if sent {
		if err := s.send(ctx, tx, actor.OrganizationID, id, now); err != nil {
			return Invoice{}, err
		}
	}
	// The invoice as made (and sent), read once: the answer, and the
	// data of both events, rendered once.
	if inv, err = s.read(ctx, tx, actor.OrganizationID, id); err != nil {
		return Invoice{}, err
	}
	data := inv.Model(s.Link(&inv), true)
	if _, err := event.Append(ctx, tx, inv.OrganizationID, event.InvoiceCreated, data, now); err != nil {
		return Invoice{}, err
	}
	if err := actor.audit(ctx, tx, audit.InvoiceCreated, named(inv)+", "+Money(inv.Amount), now); err != nil {
		return Invoice{}, err
	}
	if sent {
		_, err = event.Append(ctx, tx, inv.OrganizationID, event.InvoiceSent, data, now)
	}
	return inv, err
}

// checkAccount refuses an invoice on mid unless it is the organization's
// and its location is active.
func checkAccount(ctx context.Context, q sqlx.QueryerContext, org, mid uuid.UUID) error {
	accounts, err := directory.AccountsByID(ctx, q, []uuid.UUID{mid})
	a, ok := accounts[mid]
	switch {
	case err != nil:
		return err
	case !ok || a.OrganizationID != org:
		return unprocessable("merchantAccountId", "Unknown merchant account",
			"The merchant account is not a MID of your organization.")
	case a.LocationStatus != "active":
		return unprocessable("merchantAccountId", "Merchant account unavailable",
			"The location of this MID is not active, so it cannot take invoices.")
	}
	return nil
}

// lineColumns are an invoice's lines as one array per column, for unnest.
type lineColumns struct {
	desc, qty, cost []string
	uom, code, upc  []sql.NullString
	rate            []sql.NullString
}

func lineArrays(lines []Line) lineColumns {
	n := len(lines)
	c := lineColumns{desc: make([]string, n), qty: make([]string, n), cost: make([]string, n),
		uom: make([]sql.NullString, n), code: make([]sql.NullString, n), upc: make([]sql.NullString, n),
		rate: make([]sql.NullString, n)}
	opt := func(s *string) sql.NullString {
		if s == nil {
			return sql.NullString{}
		}
		return sql.NullString{String: *s, Valid: true}
	}
	for i, l := range lines {
		c.desc[i], c.qty[i], c.cost[i] = l.Description, l.Quantity.Text('f'), l.UnitCost.Text('f')
		c.uom[i], c.code[i], c.upc[i] = opt(l.UOM), opt(l.CommodityCode), opt(l.UPC)
		if l.TaxRate != nil {
			c.rate[i] = sql.NullString{String: l.TaxRate.Text('f'), Valid: true}
		}
	}
	return c
}

// Get reads an invoice with its lines, payments, and the customer's saved
// cards and preference, in one snapshot.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (inv Invoice, err error) {
	err = postgres.InSnapshot(ctx, s.DB, func(tx *sqlx.Tx) error {
		inv, err = s.read(ctx, tx, org, id)
		return err
	})
	return inv, err
}

// read is Get through q: a transaction sees the invoice as it stands in it.
func (s *Store) read(ctx context.Context, q sqlx.QueryerContext, org, id uuid.UUID) (Invoice, error) {
	inv, err := scanFullInvoice(q.QueryRowxContext(ctx, selectFullInvoice+` WHERE i.id = $1 AND i.organization_id = $2`, id, org))
	if err != nil {
		return Invoice{}, err
	}
	if err := withOwners(ctx, q, &inv); err != nil {
		return Invoice{}, err
	}
	return inv, s.addCards(ctx, q, &inv)
}

// scanFullInvoice reads a row of selectFullInvoice.
func scanFullInvoice(row scanner) (Invoice, error) {
	var lines, payments []byte
	inv, err := scanInvoice(row, &lines, &payments)
	if errors.Is(err, sql.ErrNoRows) {
		return Invoice{}, ErrNotFound
	}
	if err != nil {
		return Invoice{}, fmt.Errorf("invoice: unable to read invoice: %w", err)
	}
	if inv.Lines, err = decodeLines(lines); err != nil {
		return Invoice{}, err
	}
	if inv.Payments, err = decodeRecordedPayments(payments); err != nil {
		return Invoice{}, err
	}
	return inv, nil
}

// addCards adds to a full read what Cards keeps: the invoice's card sales
// among its payments (all of them by when they were received), and the
// customer's saved cards.
func (s *Store) addCards(ctx context.Context, q sqlx.QueryerContext, inv *Invoice) error {
	sales, err := s.Cards.InvoiceSales(ctx, q, inv.OrganizationID, inv.ID)
	if err != nil {
		return err
	}
	if len(sales) > 0 {
		inv.Payments = append(sales, inv.Payments...)
		slices.SortStableFunc(inv.Payments, func(a, b Payment) int {
			if c := a.PaidAt.Compare(b.PaidAt); c != 0 {
				return c
			}
			return bytes.Compare(a.ID[:], b.ID[:])
		})
	}
	inv.SavedCards, err = s.Cards.SavedCardsOf(ctx, q, inv.OrganizationID, inv.CustomerID)
	return err
}

// decodeText decodes a JSON array of rows of n strings or nulls (NULL: no
// rows), as selectFullInvoice makes them: uuids, numerics, booleans and
// times are text there, read here.
func decodeText(what string, b []byte, n int) ([][]*string, error) {
	if b == nil {
		return nil, nil
	}
	rows, err := parseTextRows(b, n)
	if err != nil {
		return nil, fmt.Errorf("invoice: unable to read %s: %w", what, err)
	}
	return rows, nil
}

// textRow reads the values of one row of decodeText, keeping the first error.
type textRow struct {
	what string
	row  []*string
	err  error
}

func (r *textRow) text(i int) string {
	if r.row[i] == nil {
		if r.err == nil {
			r.err = fmt.Errorf("invoice: unable to read %s: value %d is null", r.what, i)
		}
		return ""
	}
	return *r.row[i]
}

func (r *textRow) optional(i int) *string { return r.row[i] }

func (r *textRow) uuid(i int) uuid.UUID {
	id, err := uuid.Parse(r.text(i))
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("invoice: unable to read %s: %w", r.what, err)
	}
	return id
}

func (r *textRow) numeric(i int) apd.Decimal {
	d, err := parseNumeric(r.text(i))
	if err != nil && r.err == nil {
		r.err = err
	}
	return d
}

// optionalNumeric is a nullable numeric value: nil for null.
func (r *textRow) optionalNumeric(i int) *apd.Decimal {
	if r.row[i] == nil {
		return nil
	}
	d := r.numeric(i)
	return &d
}

func (r *textRow) time(i int) time.Time {
	t, err := time.Parse(time.RFC3339Nano, r.text(i))
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("invoice: unable to read %s: %w", r.what, err)
	}
	return t
}

func decodeLines(b []byte) ([]Line, error) {
	rows, err := decodeText("lines", b, 7)
	if err != nil {
		return nil, err
	}
	lines := make([]Line, len(rows))
	for i, row := range rows {
		r := textRow{what: "lines", row: row}
		lines[i] = Line{Description: r.text(0), Quantity: r.numeric(1), UnitCost: r.numeric(2),
			UOM: r.optional(3), CommodityCode: r.optional(4), UPC: r.optional(5), TaxRate: r.optionalNumeric(6)}
		if r.err != nil {
			return nil, r.err
		}
	}
	return lines, nil
}

func decodeRecordedPayments(b []byte) ([]Payment, error) {
	rows, err := decodeText("payments", b, 6)
	if err != nil {
		return nil, err
	}
	payments := make([]Payment, len(rows))
	for i, row := range rows {
		r := textRow{what: "payments", row: row}
		payments[i] = Payment{ID: r.uuid(0), Amount: r.numeric(1), PaidAt: r.time(2), Method: r.text(3), Reference: r.optional(4),
			RecordedAt: r.time(5), AmountRefunded: cents(apd.Decimal{})}
		if r.err != nil {
			return nil, r.err
		}
	}
	return payments, nil
}

// Locked is an invoice held under its row lock, inside the transaction of
// the one function that owns a change (Send, Cancel here; a payment in
// package payment): the one way an invoice's state moves. What another
// package does to an invoice in its change goes through these methods, and
// Save writes the state back in the same transaction, beside whatever
// else the change writes (its own rows, its messages, its events).
type Locked struct {
	Invoice
	ctx context.Context
	tx  *sqlx.Tx
}

// Lock reads the invoice and holds its row until tx ends; others' changes
// of it wait.
func Lock(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID) (*Locked, error) {
	inv, err := scanInvoice(tx.QueryRowxContext(ctx, selectInvoice+` WHERE i.id = $1 AND i.organization_id = $2 FOR UPDATE OF i`, id, org))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("invoice: unable to lock invoice: %w", err)
	}
	if err := withOwners(ctx, tx, &inv); err != nil {
		return nil, err
	}
	return &Locked{Invoice: inv, ctx: ctx, tx: tx}, nil
}

// Save writes the invoice's state back.
func (l *Locked) Save() error {
	inv := &l.Invoice
	_, err := l.tx.ExecContext(l.ctx, `
		UPDATE invoices SET amount_paid = $2, sent_via = $3, sent_at = $4, send_problem = $5, status = $6,
			failed_attempts = $7, problem = $8, paid_at = $9, level3_sent = $10, cancelled_at = $11,
			cancelled_by_name = $12, amount_refunded = $13, scheduled_send_at = $14, reminders_sent = $15,
			last_reminded_at = $16
		WHERE id = $1`,
		inv.ID, inv.AmountPaid.Text('f'), inv.SentVia, inv.SentAt, inv.SendProblem, string(inv.Status),
		inv.FailedAttempts, inv.Problem, inv.PaidAt, inv.Level3Sent, inv.CancelledAt, inv.CancelledByName,
		inv.AmountRefunded.Text('f'), inv.ScheduledSendAt, inv.RemindersSent, inv.LastRemindedAt)
	if err != nil {
		return fmt.Errorf("invoice: unable to save invoice: %w", err)
	}
	return nil
}

// send queues the pay link and records the send, inside tx.
func (s *Store) send(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, now time.Time) error {
	l, err := Lock(ctx, tx, org, id)
	if err != nil {
		return err
	}
	if !l.Status.Payable() {
		return rule.Newf(rule.Conflict, "", "Invoice cannot be sent",
			"The invoice is %s; only open and part_paid invoices can be sent.", l.Status)
	}
	ch, recipient := channel(&l.Invoice)
	markSent(&l.Invoice, ch, now)
	err = delivery.Enqueue(ctx, tx, delivery.Message{
		ID: uuid.Must(uuid.NewV7()), OrganizationID: org, InvoiceID: id, Channel: ch, Recipient: recipient, At: now,
	})
	if err != nil {
		return err
	}
	return l.Save()
}

// SendIn queues the pay link again inside tx, for the change of another
// package that asks it (an automatic payment declined): once per such
// change, so outside the MaxSends limit of sends asked by people.
func (s *Store) SendIn(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, now time.Time) error {
	return s.send(ctx, tx, org, id, now)
}

// Sends bounds how often one invoice's pay link goes out: at most
// MaxSends in any SendWindow, counting every send (on creation, scheduled,
// asked through the API or the portal), so that no member floods a
// customer's inbox.
const (
	MaxSends   = 5
	SendWindow = 24 * time.Hour
)

// Send sends, or sends again, the pay link of an open or part-paid
// invoice; a send that would be the invoice's MaxSends+1th in SendWindow
// is refused (rule.Limited) and changes nothing.
func (s *Store) Send(ctx context.Context, actor Actor, id uuid.UUID) (inv Invoice, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		if err := s.send(ctx, tx, actor.OrganizationID, id, now); err != nil {
			return err
		}
		// Counted after the send, under its lock on the invoice, so
		// that sends at once count one after the other; a refusal rolls
		// the send back.
		now = now.Truncate(time.Microsecond) // as stored
		n, oldest, err := delivery.PayLinksSince(ctx, tx, id, now.Add(-SendWindow))
		if err != nil {
			return err
		}
		if n > MaxSends {
			return &rule.Error{Kind: rule.Limited, Title: "Too many sends",
				Message:    fmt.Sprintf("The pay link of an invoice can be sent at most %d times in 24 hours.", MaxSends),
				RetryAfter: oldest.Add(SendWindow).Sub(now)}
		}
		if inv, err = s.AppendEvent(ctx, tx, actor.OrganizationID, id, event.InvoiceSent, now); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.InvoiceSent, named(inv), now)
	})
	if err != nil {
		return Invoice{}, err
	}
	return inv, nil
}

// AppendEvent appends an event of the invoice inside tx, the transaction
// of the change it records, and returns the invoice as its data carries
// it: as the change left it, read in full inside tx (what a change holds
// under Lock lacks the lines, payments and saved cards).
func (s *Store) AppendEvent(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, t event.Type[models.Invoice], at time.Time) (Invoice, error) {
	inv, err := s.read(ctx, tx, org, id)
	if err != nil {
		return Invoice{}, err
	}
	return inv, s.appendEvent(ctx, tx, t, inv, at)
}

// appendEvent appends an event of the invoice, read in full inside tx,
// with the invoice as its data, as GET /payment-requests/{id} shows it.
// An invoice.paid tells the members who chose to hear of it, in the same
// transaction: once per event.
func (s *Store) appendEvent(ctx context.Context, tx *sqlx.Tx, t event.Type[models.Invoice], inv Invoice, at time.Time) error {
	if _, err := event.Append(ctx, tx, inv.OrganizationID, t, inv.Model(s.Link(&inv), true), at); err != nil {
		return err
	}
	if t != event.InvoicePaid || s.Members == nil {
		return nil
	}
	who := optional.Value(inv.CustomerName)
	if who == "" {
		who = inv.CustomerEmail
	}
	return s.Members.Notify(ctx, tx, inv.OrganizationID, people.Notification{
		Choice: people.NotifyInvoicePaid, Permission: event.Permission(t.Name),
		Subject: "Invoice " + inv.InvoiceNumber + " paid: " + Money(inv.Amount),
		Text: who + " paid invoice " + inv.InvoiceNumber + " of " + Money(inv.Amount) + " in full.\n\n" +
			s.PublicURL + "/portal/invoices/" + inv.ID.String(),
	}, at)
}

// Members queues the emails to the members who chose to hear of a change
// (people.Store.Notify), inside the change's transaction.
type Members interface {
	Notify(ctx context.Context, tx *sqlx.Tx, org uuid.UUID, n people.Notification, at time.Time) error
}

// Cancel cancels an open or part-paid invoice and any message of it not yet sent.
func (s *Store) Cancel(ctx context.Context, actor Actor, id uuid.UUID) (inv Invoice, err error) {
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		l, err := Lock(ctx, tx, actor.OrganizationID, id)
		if err != nil {
			return err
		}
		now := s.Now()
		if err := cancel(&l.Invoice, actor.Name, now); err != nil {
			return err
		}
		if err := delivery.CancelPending(ctx, tx, id, now); err != nil {
			return err
		}
		if err := l.Save(); err != nil {
			return err
		}
		if inv, err = s.AppendEvent(ctx, tx, actor.OrganizationID, id, event.InvoiceCancelled, now); err != nil {
			return err
		}
		return actor.audit(ctx, tx, audit.InvoiceCancelled, named(inv), now)
	})
	if err != nil {
		return Invoice{}, err
	}
	return inv, nil
}

// Filter narrows a list.
type Filter struct {
	Status            *string
	MerchantAccountID *uuid.UUID
	LocationID        *uuid.UUID
	InvoiceNumber     *string
	CustomerEmail     *string
	CustomerID        *uuid.UUID
	CreatedFrom       *time.Time
	CreatedTo         *time.Time
	// CustomerName keeps the invoices whose customer's name holds it,
	// case-insensitively: the portal's search (the API has no such filter).
	CustomerName *string
}

// List returns a page of invoices, newest first, and the cursor of the next
// page ("" on the last).
func (s *Store) List(ctx context.Context, org uuid.UUID, f Filter, limit int, after string) ([]Invoice, string, error) {
	q := keyset.NewQuery(selectInvoice, "i.created_at", "i.id")
	q.Where("i.organization_id = $%d", org)
	if f.Status != nil {
		q.Where("i.status = $%d", *f.Status)
	}
	if f.MerchantAccountID != nil {
		q.Where("i.merchant_account_id = $%d", *f.MerchantAccountID)
	}
	if f.LocationID != nil {
		mids, err := s.midsAt(ctx, org, *f.LocationID)
		if err != nil {
			return nil, "", err
		}
		q.Where("i.merchant_account_id = ANY($%d::uuid[])", pq.Array(mids))
	}
	if f.InvoiceNumber != nil {
		q.Where("i.invoice_number = $%d", *f.InvoiceNumber)
	}
	if f.CustomerEmail != nil {
		q.Where("lower(i.customer_email) = lower($%d)", *f.CustomerEmail)
	}
	if f.CustomerID != nil {
		q.Where("i.customer_id = $%d", *f.CustomerID)
	}
	if f.CustomerName != nil {
		q.Where(`i.customer_name ILIKE $%d`, "%"+likeEscaper.Replace(*f.CustomerName)+"%")
	}
	q.Created(f.CreatedFrom, f.CreatedTo)
	if err := q.After(after); err != nil {
		return nil, "", err
	}
	row := newInvoiceRow()
	list, next, err := keyset.Fetch(ctx, s.DB, q, limit, func(r *sql.Rows) (Invoice, error) { return row.scan(r) },
		func(inv Invoice) keyset.Cursor { return keyset.Cursor{At: inv.CreatedAt, ID: inv.ID} })
	if err != nil {
		return nil, "", fmt.Errorf("invoice: unable to list invoices: %w", err)
	}
	page := make([]*Invoice, len(list))
	for i := range list {
		page[i] = &list[i]
	}
	return list, next, withOwners(ctx, s.DB, page...)
}

// midsAt are the ids of the organization's MIDs at the location.
func (s *Store) midsAt(ctx context.Context, org, location uuid.UUID) ([]uuid.UUID, error) {
	accounts, err := directory.AccountsOf(ctx, s.DB, &org)
	if err != nil {
		return nil, err
	}
	var ids []uuid.UUID
	for _, a := range accounts {
		if a.LocationID == location {
			ids = append(ids, a.ID)
		}
	}
	return ids, nil
}

// likeEscaper makes text match itself in a LIKE pattern: %, _ and the
// escape character \ lose their meaning.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// Numbers are the invoice numbers of the invoices with these ids, read
// through q in one statement (a page of another package's records that
// names its invoices), by id.
func Numbers(ctx context.Context, q sqlx.QueryerContext, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	var rows []struct {
		ID     uuid.UUID `db:"id"`
		Number string    `db:"invoice_number"`
	}
	if len(ids) > 0 {
		if err := sqlx.SelectContext(ctx, q, &rows, `SELECT id, invoice_number FROM invoices WHERE id = ANY($1::uuid[])`, pq.Array(ids)); err != nil {
			return nil, fmt.Errorf("invoice: unable to read invoice numbers: %w", err)
		}
	}
	by := make(map[uuid.UUID]string, len(rows))
	for _, r := range rows {
		by[r.ID] = r.Number
	}
	return by, nil
}
