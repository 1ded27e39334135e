// Package terminal is the point-of-sale gateway: the card terminals in
// merchants' stores, the payments asked of them toward invoices, the
// pings that keep each terminal's status current, and the worker that
// asks the terminals (processor.Terminals) outside any transaction and
// records each outcome in one, the card payment through package payment.
//
// It owns the tables terminals and terminal_payments. The MIDs and their
// locations are directory's; invoices invoice's.
package terminal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/postgres"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/rule"
)

// Statuses of a terminal.
const (
	Online  = "online"
	Offline = "offline"
	Busy    = "busy"
)

// SeenWithin is how recent a terminal's last answered ping must be for it
// to be online; PingInterval how often each is pinged.
const (
	SeenWithin   = time.Minute
	PingInterval = 20 * time.Second
)

// DefaultTimeout is how long a terminal payment may stay pending before
// the gateway is asked about it (PAYREQ_TERMINAL_TIMEOUT).
const DefaultTimeout = 3 * time.Minute

// Store keeps the terminals and their payments.
type Store struct {
	DB *sqlx.DB
	// Terminals are asked for cards; nil when the deployment has none
	// (every terminal then stays offline).
	Terminals processor.Terminals
	// Gateway voids a charge a terminal made that cannot be recorded.
	Gateway      processor.Processor
	CardPayments *payment.Store
	Now          func() time.Time
	// Timeout: a payment pending longer is looked up at the gateway.
	Timeout time.Duration
}

// Terminal is a card terminal in a store.
type Terminal struct {
	ID                uuid.UUID  `db:"id"`
	OrganizationID    uuid.UUID  `db:"organization_id"`
	MerchantAccountID uuid.UUID  `db:"merchant_account_id"`
	Name              string     `db:"name"`
	HSN               string     `db:"hsn"`
	LastSeenAt        *time.Time `db:"last_seen_at"`
	CreatedAt         time.Time  `db:"created_at"`
	Waiting           bool       `db:"waiting"` // a payment waits on it
	// From directory: its MID's location and MID.
	LocationID uuid.UUID `db:"-"`
	MID        string    `db:"-"`
	// Status is as of the read: Busy, Online or Offline.
	Status string `db:"-"`
}

const selectTerminal = `SELECT t.id, t.organization_id, t.merchant_account_id, t.name, t.hsn, t.last_seen_at, t.created_at,
		EXISTS (SELECT 1 FROM terminal_payments p WHERE p.terminal_id = t.id AND p.status = 'pending') AS waiting
	FROM terminals t`

// ErrNotFound: no terminal of that id in the organization (or removed).
var ErrNotFound = rule.New(rule.NotFound, "", "Terminal not found", "No terminal with this id exists in your organization.")

// read completes terminals read from q: status, location and MID.
func (s *Store) read(ctx context.Context, q sqlx.QueryerContext, ts []Terminal) error {
	var ids []uuid.UUID
	for _, t := range ts {
		ids = append(ids, t.MerchantAccountID)
	}
	accounts, err := directory.AccountsByID(ctx, q, ids)
	if err != nil {
		return err
	}
	now := s.Now()
	for i := range ts {
		t := &ts[i]
		a := accounts[t.MerchantAccountID]
		t.LocationID, t.MID = a.LocationID, a.MID
		switch {
		case t.Waiting:
			t.Status = Busy
		case t.LastSeenAt != nil && now.Sub(*t.LastSeenAt) < SeenWithin:
			t.Status = Online
		default:
			t.Status = Offline
		}
	}
	return nil
}

// List is the organization's terminals (every organization's, for an
// operator, when org is nil), ordered by name then id.
func (s *Store) List(ctx context.Context, org *uuid.UUID) ([]Terminal, error) {
	var ts []Terminal
	err := s.DB.SelectContext(ctx, &ts, selectTerminal+` WHERE t.removed_at IS NULL AND ($1::uuid IS NULL OR t.organization_id = $1)
		ORDER BY t.name, t.id`, org)
	if err != nil {
		return nil, fmt.Errorf("terminal: unable to list terminals: %w", err)
	}
	return ts, s.read(ctx, s.DB, ts)
}

// Get reads one terminal of the organization.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (Terminal, error) {
	return s.get(ctx, s.DB, org, id, "")
}

func (s *Store) get(ctx context.Context, q sqlx.QueryerContext, org, id uuid.UUID, lock string) (Terminal, error) {
	var t Terminal
	err := sqlx.GetContext(ctx, q, &t, selectTerminal+` WHERE t.id = $1 AND t.organization_id = $2 AND t.removed_at IS NULL`+lock, id, org)
	if errors.Is(err, sql.ErrNoRows) {
		return Terminal{}, ErrNotFound
	}
	if err != nil {
		return Terminal{}, fmt.Errorf("terminal: unable to read terminal: %w", err)
	}
	ts := []Terminal{t}
	err = s.read(ctx, q, ts)
	return ts[0], err
}

// NewTerminal is a terminal to register.
type NewTerminal struct {
	MerchantAccountID uuid.UUID
	HSN               string
	Name              string
}

// Add registers a terminal on a MID (of any organization: an operator's
// command); its organization is the MID's.
func (s *Store) Add(ctx context.Context, n NewTerminal) (Terminal, error) {
	return s.add(ctx, nil, n)
}

// Actor is a member who registers, renames or removes terminals of its
// organization in the portal, as the audit log names it.
type Actor struct {
	OrganizationID uuid.UUID
	Audit          *audit.Actor
}

// audit writes a's entry of a change to a terminal in the change's tx.
func (a *Actor) audit(ctx context.Context, tx *sqlx.Tx, action string, t Terminal, at time.Time) error {
	if a == nil || a.Audit == nil {
		return nil
	}
	return audit.Append(ctx, tx, audit.Entry{Organization: &a.OrganizationID, Actor: *a.Audit, Action: action,
		Detail: fmt.Sprintf("%s (HSN %s)", t.Name, t.HSN), At: at})
}

// AddAs registers a terminal on one of the actor's organization's MIDs,
// audited; another organization's MID is refused as unknown.
func (s *Store) AddAs(ctx context.Context, a Actor, n NewTerminal) (Terminal, error) {
	return s.add(ctx, &a, n)
}

func (s *Store) add(ctx context.Context, a *Actor, n NewTerminal) (Terminal, error) {
	n.HSN, n.Name = strings.TrimSpace(n.HSN), strings.TrimSpace(n.Name)
	fields := map[string][]string{}
	if m := nameProblem(n.Name); m != "" {
		fields["name"] = []string{m}
	}
	if !validHSN(n.HSN) {
		fields["hsn"] = []string{"must be 1 to 64 letters, digits and hyphens"}
	}
	if len(fields) > 0 {
		return Terminal{}, rule.InvalidFields(fields)
	}
	accounts, err := directory.AccountsByID(ctx, s.DB, []uuid.UUID{n.MerchantAccountID})
	if err != nil {
		return Terminal{}, err
	}
	acct, ok := accounts[n.MerchantAccountID]
	if !ok || a != nil && acct.OrganizationID != a.OrganizationID {
		return Terminal{}, rule.Newf(rule.Unprocessable, "mid", "Unknown merchant account", "No MID has the id %s.", n.MerchantAccountID)
	}
	id := uuid.Must(uuid.NewV7())
	var t Terminal
	err = postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		now := s.Now()
		_, err := tx.ExecContext(ctx, `INSERT INTO terminals (id, organization_id, merchant_account_id, name, hsn, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, id, acct.OrganizationID, acct.ID, n.Name, n.HSN, now)
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "23505" {
			return rule.Newf(rule.Unprocessable, "hsn", "Terminal already registered", "A terminal with the HSN %s is registered already.", n.HSN)
		}
		if err != nil {
			return fmt.Errorf("terminal: unable to add terminal: %w", err)
		}
		if t, err = s.get(ctx, tx, acct.OrganizationID, id, ""); err != nil {
			return err
		}
		return a.audit(ctx, tx, audit.TerminalAdded, t, now)
	})
	return t, err
}

// nameProblem is what is wrong with a terminal's name, or "".
func nameProblem(name string) string {
	if c := utf8.RuneCountInString(name); c < 1 || c > 100 {
		return "must be 1 to 100 characters"
	}
	return ""
}

// Rename renames one of the actor's organization's terminals, audited.
func (s *Store) Rename(ctx context.Context, a Actor, id uuid.UUID, name string) (Terminal, error) {
	name = strings.TrimSpace(name)
	if m := nameProblem(name); m != "" {
		return Terminal{}, rule.InvalidField("name", m)
	}
	var t Terminal
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		if t, err = s.get(ctx, tx, a.OrganizationID, id, " FOR UPDATE OF t"); err != nil {
			return err
		}
		if t.Name == name {
			return nil // sent again: nothing changes, nothing audited
		}
		now := s.Now()
		if _, err = tx.ExecContext(ctx, `UPDATE terminals SET name = $2 WHERE id = $1`, id, name); err != nil {
			return fmt.Errorf("terminal: unable to rename terminal: %w", err)
		}
		t.Name = name
		return a.audit(ctx, tx, audit.TerminalRenamed, t, now)
	})
	return t, err
}

func validHSN(h string) bool {
	if len(h) < 1 || len(h) > 64 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// ErrWaiting: a terminal with a payment waiting on it is not removed.
var ErrWaiting = rule.New(rule.Busy, "", "Terminal busy", "A payment is waiting on this terminal; cancel it or wait for its outcome.")

// Remove removes a terminal (of any organization: an operator's command).
// Its payments stay; its HSN may be registered again.
func (s *Store) Remove(ctx context.Context, id uuid.UUID) (Terminal, error) {
	var org uuid.UUID
	err := s.DB.GetContext(ctx, &org, `SELECT organization_id FROM terminals WHERE id = $1 AND removed_at IS NULL`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Terminal{}, ErrNotFound
	}
	if err != nil {
		return Terminal{}, fmt.Errorf("terminal: unable to read terminal: %w", err)
	}
	return s.remove(ctx, org, id, nil)
}

// RemoveAs removes one of the actor's organization's terminals, audited.
func (s *Store) RemoveAs(ctx context.Context, a Actor, id uuid.UUID) (Terminal, error) {
	return s.remove(ctx, a.OrganizationID, id, &a)
}

func (s *Store) remove(ctx context.Context, org, id uuid.UUID, a *Actor) (Terminal, error) {
	var t Terminal
	err := postgres.InTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		if t, err = s.get(ctx, tx, org, id, " FOR UPDATE OF t"); err != nil {
			return err
		}
		if t.Waiting {
			return ErrWaiting
		}
		now := s.Now()
		if _, err = tx.ExecContext(ctx, `UPDATE terminals SET removed_at = $2 WHERE id = $1`, id, now); err != nil {
			return fmt.Errorf("terminal: unable to remove terminal: %w", err)
		}
		return a.audit(ctx, tx, audit.TerminalRemoved, t, now)
	})
	return t, err
}

// Ping asks every terminal without a payment waiting on it whether it is
// connected, a few at once, and records when each answered.
func (s *Store) Ping(ctx context.Context, log *slog.Logger) error {
	if s.Terminals == nil {
		return nil
	}
	ts, err := s.List(ctx, nil)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for _, t := range ts {
		if t.Waiting {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := s.Terminals.Ping(ctx, t.MID, t.HSN)
			switch {
			case err == nil:
				_, err = s.DB.ExecContext(ctx, `UPDATE terminals SET last_seen_at = $2 WHERE id = $1`, t.ID, s.Now())
				if err != nil && ctx.Err() == nil {
					log.Error("terminal: record ping", "terminal", t.ID.String(), "error", err.Error())
				}
			case !errors.Is(err, processor.ErrTerminalOffline) && ctx.Err() == nil:
				log.Warn("terminal: ping", "terminal", t.ID.String(), "error", err.Error())
			}
		})
	}
	wg.Wait()
	return nil
}

// RunPings pings the terminals every interval until ctx ends.
func (s *Store) RunPings(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Ping(ctx, log); err != nil && ctx.Err() == nil {
			log.Error("terminal: ping terminals", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
