package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/postgres"
)

// Config is how a Worker delivers. Zero durations and counts take the defaults
// below.
type Config struct {
	Invoices Invoices // the invoices messages are about; required
	// Documents draws the PDFs emails carry; without it emails go
	// without one, and receipts fail.
	Documents Documents
	// Logos reads a business's logo by its hash (directory.Store.LogoPNG),
	// carried inside its emails; without it emails show the name alone.
	Logos func(ctx context.Context, sha256 string) ([]byte, error)
	// Open opens sealed notices (internal/vault); without it notices fail.
	Open func(sealed []byte, keyID, aad string) (string, error)
	// PasswordResets writes the reset email of a PasswordReset notice's
	// address (people.Store.ResetNotice); ok false: the address has no
	// sign-in, and nothing is sent. Without it those notices fail.
	PasswordResets func(ctx context.Context, email string) (n Notice, ok bool, err error)
	DataDir        string // files go under DataDir/outbox when a provider is missing
	SMTPURL        string // PAYREQ_SMTP_URL; empty: email goes to files
	SMSURL         string // PAYREQ_SMS_URL; empty: text messages go to files

	// PollInterval is how often the outbox is checked for due messages.
	PollInterval time.Duration
	// Lease is how long a claimed message is left to its worker; after it the
	// message is claimed again (the worker is taken to have died). Each
	// delivery is given at most half of it, and never more than 30 s.
	Lease time.Duration
	// The wait before try n+1 is BackoffBase·2^(n-1), at most BackoffMax, of
	// which a random part of up to a half is taken off (jitter).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxAttempts is how many tries a message gets before it fails.
	MaxAttempts int
	// Concurrency is how many messages one worker delivers at once.
	Concurrency int
}

// Defaults: the last of 8 tries comes roughly 30 to 60 minutes after the
// first, so a provider outage of several minutes loses nothing and a merchant
// hears of a real problem within the hour.
const (
	DefaultPollInterval = 500 * time.Millisecond
	DefaultLease        = 2 * time.Minute
	DefaultBackoffBase  = 30 * time.Second
	DefaultBackoffMax   = 30 * time.Minute
	DefaultMaxAttempts  = 8
	DefaultConcurrency  = 4

	maxSendTimeout = 30 * time.Second
)

func (c *Config) setDefaults() {
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
}

// sendTimeout bounds one delivery so that it ends well before its lease does.
func (c Config) sendTimeout() time.Duration { return min(c.Lease/2, maxSendTimeout) }

// Sender hands a rendered message to a provider. An error means the message
// may not have arrived; a *ProviderError says whether trying again can help.
type Sender interface {
	Send(ctx context.Context, m Rendered) error
}

// ProviderError is a provider's refusal of a message.
type ProviderError struct {
	// Permanent says that trying again will not help (a bad address, a
	// rejected request); the message fails at once.
	Permanent bool
	// Reason says in plain words what the provider answered.
	Reason string
	Err    error
}

func (e *ProviderError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Worker delivers the outbox's due messages. Several workers, in one process or
// in several, may share one database.
type Worker struct {
	db      *sqlx.DB
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	senders map[string]Sender
}

// NewWorker checks the configuration and sets up the senders: SMTP and the SMS
// provider when their URLs are given, files under DataDir/outbox otherwise.
// now is the clock; nil means time.Now.
func NewWorker(db *sqlx.DB, cfg Config, log *slog.Logger, now func() time.Time) (*Worker, error) {
	cfg.setDefaults()
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Invoices == nil {
		return nil, errors.New("delivery: the invoices are needed to render messages")
	}
	w := &Worker{db: db, cfg: cfg, log: log, now: now, senders: map[string]Sender{}}

	var files *fileSender
	if cfg.SMTPURL == "" || cfg.SMSURL == "" {
		if cfg.DataDir == "" {
			return nil, errors.New("delivery: a data directory is needed when a provider is not configured")
		}
		files = newFileSender(cfg.DataDir, log)
	}
	if cfg.SMTPURL != "" {
		s, err := newSMTPSender(cfg.SMTPURL, cfg.sendTimeout())
		if err != nil {
			return nil, err
		}
		w.senders[ChannelEmail] = s
	} else {
		w.senders[ChannelEmail] = files
	}
	if cfg.SMSURL != "" {
		s, err := newSMSSender(cfg.SMSURL, cfg.sendTimeout())
		if err != nil {
			return nil, err
		}
		w.senders[ChannelText] = s
	} else {
		w.senders[ChannelText] = files
	}
	return w, nil
}

// Run delivers due messages until ctx ends, then waits for the deliveries under
// way; a delivery cut short is given back to the outbox and tried again.
func (w *Worker) Run(ctx context.Context) {
	ticker := time.NewTicker(w.cfg.PollInterval)
	defer ticker.Stop()
	finished := make(chan struct{}, w.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()

	active := 0
	more := true // there may be due messages that are not claimed yet
	for {
		if more && active < w.cfg.Concurrency {
			want := w.cfg.Concurrency - active
			msgs, err := w.claim(ctx, want, w.cfg.Lease)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				w.log.Error("delivery: claim messages", "error", err.Error())
			}
			for _, c := range msgs {
				active++
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.deliver(ctx, c)
					finished <- struct{}{}
				}()
			}
			more = err == nil && len(msgs) == want
			if more && active < w.cfg.Concurrency {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-finished:
			active--
		case <-ticker.C:
			more = true
		}
	}
}

// claimed is a message a worker holds the lease of; Attempts, counting this
// one, also fences the outcome: it is recorded only while no other worker has
// claimed the message since.
type claimed struct {
	ID             uuid.UUID `db:"id"`
	Kind           string    `db:"kind"`
	OrganizationID uuid.UUID `db:"organization_id"`
	InvoiceID      uuid.UUID `db:"invoice_id"`
	PaymentID      uuid.UUID `db:"payment_id"`
	Channel        string    `db:"channel"`
	Recipient      string    `db:"recipient"`
	Attempts       int       `db:"attempts"`
	Notice         []byte    `db:"notice"`
	NoticeKeyID    *string   `db:"notice_key_id"`
	// Until is when the lease ends, on the process's clock (the worker's
	// may be a test's): no other worker claims the message before.
	Until time.Time `db:"-"`
}

// isNotice: a message to a person, about no invoice.
func (c claimed) isNotice() bool { return c.NoticeKeyID != nil }

// claim takes up to n due messages and leases them: they are not due again
// until the lease ends. SKIP LOCKED lets concurrent workers take different rows
// rather than wait for each other.
func (w *Worker) claim(ctx context.Context, n int, lease time.Duration) ([]claimed, error) {
	until := time.Now().Add(lease)
	now := w.now()
	var msgs []claimed
	err := w.db.SelectContext(ctx, &msgs, `WITH due AS (
			SELECT id FROM outbox
			WHERE delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL
			  AND next_attempt_at <= $1
			ORDER BY next_attempt_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED)
		UPDATE outbox o SET attempts = o.attempts + 1, next_attempt_at = $3
		FROM due WHERE o.id = due.id
		RETURNING o.id, o.kind, coalesce(o.organization_id, '00000000-0000-0000-0000-000000000000') AS organization_id,
			coalesce(o.invoice_id, '00000000-0000-0000-0000-000000000000') AS invoice_id,
			coalesce(o.payment_id, '00000000-0000-0000-0000-000000000000') AS payment_id, o.channel, o.recipient, o.attempts,
			o.notice, o.notice_key_id`,
		now, n, now.Add(lease))
	if err != nil {
		return nil, fmt.Errorf("delivery: unable to claim messages: %w", err)
	}
	for i := range msgs {
		msgs[i].Until = until
	}
	return msgs, nil
}

// deliver renders and sends one claimed message and records the outcome.
func (w *Worker) deliver(ctx context.Context, c claimed) {
	log := w.log.With("invoice_id", c.InvoiceID.String(), "message_id", c.ID.String(),
		"channel", c.Channel, "attempt", c.Attempts)
	// The outcome is recorded even when ctx has just ended, and tried again
	// while the lease lasts when the database is unavailable (failing over):
	// a message that went out must not be sent again for want of a row
	// update, nor one that failed wait for its lease to end.
	record, cancel := context.WithDeadline(context.WithoutCancel(ctx), c.Until)
	defer cancel()

	err := w.send(ctx, c)
	switch {
	case err == nil:
		if err := postgres.Retry(record, func() error { return w.markDelivered(record, c) }); err != nil {
			log.Error("delivery: message sent but not recorded; it will be sent again", "error", err.Error())
			return
		}
		log.Info("message delivered")
	case errors.Is(err, errInvoiceCancelled), errors.Is(err, errNothingDue), errors.Is(err, errNoSignIn):
		if err := postgres.Retry(record, func() error { return w.markCancelled(record, c) }); err != nil {
			log.Error("delivery: record cancelled message", "error", err.Error())
			return
		}
		log.Info("message not sent: " + err.Error())
	case ctx.Err() != nil:
		// Shutting down: give the message back so the next worker need not
		// wait for the lease to end.
		if err := w.release(record, c); err != nil {
			log.Error("delivery: release message", "error", err.Error())
		}
	default:
		var failed bool
		recErr := postgres.Retry(record, func() (rerr error) {
			failed, rerr = w.recordFailure(record, c, err)
			return rerr
		})
		if recErr != nil {
			log.Error("delivery: record failed attempt", "error", err.Error(), "record_error", recErr.Error())
			return
		}
		if failed {
			log.Warn("message failed; no more attempts", "error", err.Error())
		} else {
			log.Info("message not delivered; will try again", "error", err.Error())
		}
	}
}

func (w *Worker) send(ctx context.Context, c claimed) error {
	r, err := w.render(ctx, c)
	if err != nil {
		return err
	}
	s := w.senders[c.Channel]
	if s == nil {
		return &ProviderError{Permanent: true, Reason: "no way to send " + c.Channel + " messages"}
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.sendTimeout())
	defer cancel()
	return s.Send(ctx, r)
}

func (w *Worker) markDelivered(ctx context.Context, c claimed) error {
	// Not fenced by attempts: whichever delivery arrived first is the one
	// recorded, even if its lease had run out.
	_, err := w.db.ExecContext(ctx, `UPDATE outbox SET delivered_at = $2, last_error = NULL, notice = NULL
		WHERE id = $1 AND delivered_at IS NULL`, c.ID, w.now())
	if err != nil {
		return fmt.Errorf("delivery: unable to record delivery: %w", err)
	}
	return nil
}

func (w *Worker) markCancelled(ctx context.Context, c claimed) error {
	_, err := w.db.ExecContext(ctx, `UPDATE outbox SET cancelled_at = $2
		WHERE id = $1 AND delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL`,
		c.ID, w.now())
	if err != nil {
		return fmt.Errorf("delivery: unable to cancel message: %w", err)
	}
	return nil
}

// release gives back a claim whose attempt was cut short by shutdown: the
// attempt does not count, and the message is due at once.
func (w *Worker) release(ctx context.Context, c claimed) error {
	_, err := w.db.ExecContext(ctx, `UPDATE outbox SET attempts = attempts - 1, next_attempt_at = $3
		WHERE id = $1 AND attempts = $2
		  AND delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL`,
		c.ID, c.Attempts, w.now())
	if err != nil {
		return fmt.Errorf("delivery: unable to release message: %w", err)
	}
	return nil
}

// recordFailure schedules the next try after a backoff or, after the last try
// or a permanent refusal, fails the message and tells the merchant through the
// invoice's send_problem. It reports whether the message failed for good.
func (w *Worker) recordFailure(ctx context.Context, c claimed, sendErr error) (bool, error) {
	now := w.now()
	var pe *ProviderError
	final := c.Attempts >= w.cfg.MaxAttempts || (errors.As(sendErr, &pe) && pe.Permanent)
	lastErr := clip.Marked(oneLine(sendErr.Error()), 1000)
	if !final {
		_, err := w.db.ExecContext(ctx, `UPDATE outbox SET next_attempt_at = $3, last_error = $4
			WHERE id = $1 AND attempts = $2
			  AND delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL`,
			c.ID, c.Attempts, now.Add(w.backoff(c.Attempts)), lastErr)
		if err != nil {
			return false, fmt.Errorf("delivery: unable to schedule next attempt: %w", err)
		}
		return false, nil
	}
	failed := false
	err := postgres.InTx(ctx, w.db, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET failed_at = $3, last_error = $4
			WHERE id = $1 AND attempts = $2
			  AND delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL`,
			c.ID, c.Attempts, now, lastErr)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // another worker holds the message now, or it was settled
		}
		failed = true
		if c.isNotice() {
			_, err := tx.ExecContext(ctx, `UPDATE outbox SET notice = NULL WHERE id = $1`, c.ID)
			return err
		}
		if c.Kind == KindReceipt {
			// A receipt is not the invoice's send: send_problem speaks of
			// pay links and reminders only.
			return nil
		}
		// Only the invoice's latest message speaks for it: a failure of an
		// older send must not hide that a newer one is under way or arrived.
		var latest bool
		err = tx.GetContext(ctx, &latest, `SELECT NOT EXISTS (
				SELECT 1 FROM outbox o, outbox me
				WHERE me.id = $1 AND o.invoice_id = me.invoice_id AND o.id <> me.id AND o.kind <> 'receipt'
				  AND (o.created_at, o.id) > (me.created_at, me.id))`, c.ID)
		if err != nil || !latest {
			return err
		}
		return w.cfg.Invoices.SendFailed(ctx, tx, c.OrganizationID, c.InvoiceID, sendProblem(c, sendErr))
	})
	if err != nil {
		return false, fmt.Errorf("delivery: unable to record failed message: %w", err)
	}
	return failed, nil
}

// backoff is the wait after the given failed try: exponential, capped, with
// up to half of it taken off at random so that messages that failed together
// do not all come back together.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.cfg.BackoffMax
	if attempt < 1 {
		attempt = 1
	}
	if shift := attempt - 1; shift < 32 {
		if e := w.cfg.BackoffBase << shift; e > 0 && e < d {
			d = e
		}
	}
	return d - rand.N(d/2+1)
}

// sendProblem is what the merchant reads on the invoice: which message could
// not be delivered, after how many tries, and the provider's answer, in short.
func sendProblem(c claimed, err error) string {
	what := "Email"
	if c.Channel == ChannelText {
		what = "Text message"
	}
	tries := "1 attempt"
	if c.Attempts != 1 {
		tries = fmt.Sprintf("%d attempts", c.Attempts)
	}
	return fmt.Sprintf("%s could not be delivered to %s after %s: %s.", what, c.Recipient, tries,
		strings.TrimRight(plainReason(c.Channel, err), "."))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
