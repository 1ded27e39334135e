package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payreq/payreq/internal/clip"
	"github.com/payreq/payreq/internal/event"
	"github.com/payreq/payreq/internal/tracing"
)

// Schedule is the default wait before each retry (Standard Webhooks'
// recommendation): after the first failure 5 s, then 5 min, … 24 h; after
// the last retry fails the delivery has failed.
var Schedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
	10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// DisableAfter: an endpoint with no successful delivery for this long
// (counted from its first failure since its last success) is disabled.
const DisableAfter = 5 * 24 * time.Hour

// maxRetryAfter bounds the wait a receiver may ask for with Retry-After.
const maxRetryAfter = 24 * time.Hour

// WorkerConfig tunes the delivery worker.
type WorkerConfig struct {
	Timeout      time.Duration   // of one attempt; 15 s when zero
	Schedule     []time.Duration // Schedule when nil
	Workers      int             // delivery loops per instance, each with up to 8 attempts under way; 4 when zero
	PollInterval time.Duration   // 500 ms when zero
	AllowPrivate bool            // deliveries may reach private addresses (development, tests)
	// Count, when set, is told each attempt's result: delivered, retry
	// (a failure with tries left) or failed.
	Count func(result string)
}

// Worker fans events out into deliveries and delivers the due ones. Any
// number of instances may run one: an event is fanned out once (FanOut),
// and a delivery is claimed with SKIP LOCKED and a lease longer than an
// attempt, so it is never attempted twice at once, and one whose process
// died is attempted again once the lease is over (at least once).
type Worker struct {
	db     *sqlx.DB
	open   func(sealed []byte, keyID, aad string) (string, error)
	cfg    WorkerConfig
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
}

// NewWorker makes a delivery worker.
func NewWorker(db *sqlx.DB, open func(sealed []byte, keyID, aad string) (string, error), cfg WorkerConfig, log *slog.Logger, now func() time.Time) *Worker {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.Schedule == nil {
		cfg.Schedule = Schedule
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	transport := &http.Transport{
		Proxy:                 nil, // straight to the endpoint: a proxy would dial for us, unchecked
		DialContext:           newDialer(cfg.AllowPrivate).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   cfg.Workers * claimBatch, // a connection kept for each attempt under way
		IdleConnTimeout:       time.Minute,
	}
	return &Worker{
		db: db, open: open, cfg: cfg, log: log, now: now,
		client: &http.Client{
			Transport: tracing.Transport(transport),
			Timeout:   cfg.Timeout,
			// A redirect is an answer like any other non-2xx: never followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// lease is how long a claimed delivery is held: past the attempt's time
// limit, so that a second claim cannot overlap the first attempt.
func (w *Worker) lease() time.Duration { return w.cfg.Timeout + 5*time.Second }

// claimBatch is how many deliveries one loop claims at once (in one
// statement: the fan-out's or DeliverDue's) and attempts side by side.
const claimBatch = 8

// Run delivers until ctx ends, with cfg.Workers loops each fanning out
// the events not yet dispatched, fanOutBatch at a time, and claiming up to
// claimBatch due deliveries at a time; attempts under way when ctx ends
// are finished.
func (w *Worker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range w.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fanned, _, err := w.FanOut(ctx, fanOutBatch)
				if err != nil && ctx.Err() == nil {
					w.log.Error("webhook: fan-out", "error", err.Error())
				}
				n, err := w.DeliverDue(ctx, claimBatch)
				if err != nil && ctx.Err() == nil {
					w.log.Error("webhook: delivery", "error", err.Error())
				}
				if n > 0 || fanned > 0 {
					continue
				}
				select {
				case <-ctx.Done():
				case <-time.After(w.cfg.PollInterval):
				}
			}
		}()
	}
	wg.Wait()
}

type claimed struct {
	EventID    uuid.UUID `db:"event_id"`
	EndpointID uuid.UUID `db:"endpoint_id"`
	Attempts   int       `db:"attempts"`
}

type target struct {
	URL          string     `db:"url"`
	Status       string     `db:"status"`
	Secret       []byte     `db:"secret"`
	SecretKeyID  string     `db:"secret_key_id"`
	Previous     []byte     `db:"previous_secret"`
	PreviousKey  *string    `db:"previous_key_id"`
	PrevUntil    *time.Time `db:"previous_until"`
	FailingSince *time.Time `db:"failing_since"`
}

// claim is a claimed delivery with its endpoint, read by the statement
// that claims it, and its event (withEvents).
type claim struct {
	claimed
	target
	event event.Event
}

// selectClaimed reads the deliveries of the CTE claimed with their
// endpoints: the end of both statements that claim deliveries, the
// fan-out's and DeliverDue's.
const selectClaimed = `
	SELECT c.event_id, c.endpoint_id, c.attempts, e.url, e.status, e.secret, e.secret_key_id, e.previous_secret,
		e.previous_key_id, e.previous_until, e.failing_since
	FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id`

// withEvents sets the claims' events, package event's, read through q in
// one statement, and orders the claims oldest event first. A claim whose
// event is gone (past its retention) is dropped: its delivery went with it.
func withEvents(ctx context.Context, q sqlx.QueryerContext, claims []claim) ([]claim, error) {
	var ids []uuid.UUID
	for _, c := range claims {
		if !slices.Contains(ids, c.EventID) {
			ids = append(ids, c.EventID)
		}
	}
	events, err := event.ByID(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	kept := claims[:0]
	for _, c := range claims {
		if ev, ok := events[c.EventID]; ok {
			c.event = ev
			kept = append(kept, c)
		}
	}
	slices.SortFunc(kept, func(a, b claim) int {
		return cmp.Or(a.event.CreatedAt.Compare(b.event.CreatedAt), bytes.Compare(a.EventID[:], b.EventID[:]),
			bytes.Compare(a.EndpointID[:], b.EndpointID[:]))
	})
	return kept, nil
}

// DeliverDue claims up to limit due deliveries, with their endpoints and
// events, in one statement, and attempts them side by side; n is how many
// it claimed.
func (w *Worker) DeliverDue(ctx context.Context, limit int) (n int, err error) {
	now := w.now()
	var claims []claim
	// The limit is in the statement, so that its generic plan knows it.
	err = w.db.SelectContext(ctx, &claims, fmt.Sprintf(`
		WITH due AS (
			SELECT event_id, endpoint_id FROM webhook_deliveries
			WHERE status = 'pending' AND next_attempt_at <= $1
			ORDER BY next_attempt_at LIMIT %d FOR UPDATE SKIP LOCKED
		), claimed AS (
			UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = $2
			FROM due WHERE d.event_id = due.event_id AND d.endpoint_id = due.endpoint_id
			RETURNING d.event_id, d.endpoint_id, d.attempts
		)`, limit)+selectClaimed,
		now, now.Add(w.lease()))
	if err != nil {
		return 0, fmt.Errorf("webhook: unable to claim deliveries: %w", err)
	}
	if claims, err = withEvents(ctx, w.db, claims); err != nil {
		return 0, err
	}
	return len(claims), w.attemptAll(ctx, claims, now)
}

// attemptAll attempts claimed deliveries side by side, and records their
// outcomes all in one statement once the last has ended. The attempts
// outlive a shutdown: each is claimed for longer than an attempt can
// take.
func (w *Worker) attemptAll(ctx context.Context, claims []claim, now time.Time) error {
	if len(claims) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	outs := make([]outcome, len(claims))
	errs := make([]error, len(claims))
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = w.deliver(ctx, c, now)
		}()
	}
	wg.Wait()
	// One not attempted (its secret unreadable) is left claimed: tried
	// again when its lease ends.
	var done []claim
	var doneOuts []outcome
	for i, c := range claims {
		if errs[i] == nil {
			done, doneOuts = append(done, c), append(doneOuts, outs[i])
		}
	}
	if len(done) > 0 {
		errs = append(errs, w.record(ctx, done, doneOuts))
	}
	return errors.Join(errs...)
}

// deliver attempts a claimed delivery.
func (w *Worker) deliver(ctx context.Context, c claim, now time.Time) (outcome, error) {
	if c.Status != Enabled {
		return outcome{failed: true, err: "The endpoint is disabled."}, nil
	}
	secrets, err := w.secrets(c.EndpointID, c.target, now)
	if err != nil {
		return outcome{}, err
	}
	return w.attempt(ctx, c.URL, c.event, secrets, c.Attempts), nil
}

// secrets are the HMAC keys that sign now: the current one, and the
// previous one during a rotation.
func (w *Worker) secrets(endpoint uuid.UUID, t target, now time.Time) ([][]byte, error) {
	var keys [][]byte
	add := func(sealed []byte, keyID string) error {
		s, err := w.open(sealed, keyID, endpoint.String())
		if err != nil {
			return fmt.Errorf("webhook: endpoint %s secret: %w", endpoint, err)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
		if err != nil {
			return fmt.Errorf("webhook: endpoint %s secret: %w", endpoint, err)
		}
		keys = append(keys, key)
		return nil
	}
	if err := add(t.Secret, t.SecretKeyID); err != nil {
		return nil, err
	}
	if t.Previous != nil && t.PreviousKey != nil && t.PrevUntil != nil && now.Before(*t.PrevUntil) {
		if err := add(t.Previous, *t.PreviousKey); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// Sign is the webhook-signature header of a delivery: "v1," and the base64
// HMAC-SHA256 of id.timestamp.body under each key, separated by spaces.
func Sign(keys [][]byte, id string, timestamp int64, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		fmt.Fprintf(m, "%s.%d.", id, timestamp)
		m.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return strings.Join(sigs, " ")
}

type outcome struct {
	delivered  bool
	failed     bool // no more tries
	disable    string
	statusCode *int
	err        string // what kind of failure, as lastError shows it
	detail     string // the failure in the network's own words, for the log only
	retryAfter time.Duration
}

// attempt POSTs the event once.
func (w *Worker) attempt(ctx context.Context, rawURL string, ev event.Event, keys [][]byte, attempt int) outcome {
	body := ev.JSON()
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	// Set from the connection's goroutine, which may outlive the attempt.
	var tlsFailed atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err != nil {
				tlsFailed.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return outcome{err: "The URL cannot be requested."}
	}
	ts := w.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "payreq-webhooks/1")
	req.Header.Set("webhook-id", ev.ID.String())
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(keys, ev.ID.String(), ts, body))
	res, err := w.client.Do(req)
	if err != nil {
		return outcome{err: failureKind(err, tlsFailed.Load()), detail: failureDetail(err)}
	}
	// Only the start of the answer is read: a receiver that answers
	// megabytes costs nothing more.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	res.Body.Close()
	code := res.StatusCode
	out := outcome{statusCode: &code}
	switch {
	case code >= 200 && code <= 299:
		out.delivered = true
	case code == http.StatusGone:
		out.failed, out.disable = true, "The endpoint answered 410 Gone."
		out.err = "HTTP 410: the endpoint is gone; it is disabled."
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		out.retryAfter = retryAfter(res.Header.Get("Retry-After"), w.now())
		out.err = fmt.Sprintf("HTTP %d", code)
	case code >= 300 && code <= 399:
		out.err = fmt.Sprintf("HTTP %d: redirects are not followed", code)
	default:
		out.err = fmt.Sprintf("HTTP %d", code)
	}
	return out
}

// failureKind is what kind of failure a transport error was: all a caller
// is told of it, since an address, a port's state or a TLS library's words
// would make deliveries a scanner of the network they reach.
func failureKind(err error, tlsFailed bool) string {
	var ne net.Error
	switch {
	case errors.Is(err, errNotPublic):
		return "not a public internet address"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case tlsFailed:
		return "TLS handshake failed"
	}
	return "connection failed"
}

// failureDetail is a transport error in its own words, for the log,
// without the URL (which may carry a token of the receiver's).
func failureDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return clip.To(err.Error(), 500)
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), at most
// maxRetryAfter; 0 when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(0, min(d, maxRetryAfter))
}

// record writes the attempts' outcomes in one statement, on their
// deliveries and as rows of webhook_attempts, each unless its delivery was
// claimed again meanwhile (its attempts moved on), then what they change
// of their endpoints.
func (w *Worker) record(ctx context.Context, claims []claim, outs []outcome) error {
	now := w.now()
	n := len(claims)
	events, types, endpoints, attempts := make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	statuses, nexts, codes, errTexts, delivered := make([]string, n), make([]time.Time, n), make([]sql.NullInt64, n),
		make([]sql.NullString, n), make([]sql.NullTime, n)
	for i, c := range claims {
		out := outs[i]
		status, next := "pending", now
		switch {
		case out.delivered:
			status = "delivered"
		case out.failed || c.Attempts > len(w.cfg.Schedule):
			status = "failed"
		default:
			wait := w.cfg.Schedule[c.Attempts-1]
			// ±10 % jitter, so that retries of many deliveries spread out.
			wait += time.Duration((rand.Float64()*0.2 - 0.1) * float64(wait))
			next = now.Add(max(wait, out.retryAfter))
		}
		events[i], types[i], endpoints[i], attempts[i] = c.EventID.String(), c.event.Type, c.EndpointID.String(), int64(c.Attempts)
		statuses[i], nexts[i] = status, next
		if out.statusCode != nil {
			codes[i] = sql.NullInt64{Int64: int64(*out.statusCode), Valid: true}
		}
		errTexts[i] = sql.NullString{String: out.err, Valid: out.err != ""}
		delivered[i] = sql.NullTime{Time: now, Valid: out.delivered}
	}
	// Each attempt recorded on its delivery is kept in webhook_attempts by
	// the same statement.
	_, err := w.db.ExecContext(ctx, `
		WITH recorded AS (
			UPDATE webhook_deliveries d SET status = r.status, next_attempt_at = r.next,
				last_status_code = r.code, last_error = r.error, last_attempt_at = $9, delivered_at = r.delivered_at
			FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::text[], $5::timestamptz[], $6::int[], $7::text[], $8::timestamptz[],
					$10::text[])
				AS r(event_id, endpoint_id, attempts, status, next, code, error, delivered_at, event_type)
			WHERE d.event_id = r.event_id AND d.endpoint_id = r.endpoint_id AND d.attempts = r.attempts
			RETURNING d.event_id, r.event_type, d.endpoint_id, d.attempts, d.status, d.last_status_code, d.last_error
		)
		INSERT INTO webhook_attempts (event_id, event_type, endpoint_id, attempt, status, status_code, error, attempted_at)
		SELECT event_id, event_type, endpoint_id, attempts, status, last_status_code, last_error, $9 FROM recorded`,
		pq.Array(events), pq.Array(endpoints), pq.Array(attempts), pq.Array(statuses), pq.Array(nexts), pq.Array(codes),
		pq.Array(errTexts), pq.Array(delivered), now, pq.Array(types))
	if err != nil {
		return fmt.Errorf("webhook: unable to record delivery attempts: %w", err)
	}
	var errs []error
	for i, c := range claims {
		out, t := outs[i], c.target
		switch {
		case out.delivered && t.FailingSince != nil:
			// As read at the claim: a failure recorded meanwhile is cleared
			// by the next delivery that succeeds.
			_, err = w.db.ExecContext(ctx, `UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1`, c.EndpointID)
		case out.delivered:
		case out.disable != "":
			err = w.disable(ctx, c.EndpointID, out.disable)
		case t.Status == Enabled:
			if t.FailingSince != nil && now.Sub(*t.FailingSince) >= DisableAfter {
				err = w.disable(ctx, c.EndpointID, "No delivery succeeded for 5 days.")
				break
			}
			_, err = w.db.ExecContext(ctx, `UPDATE webhook_endpoints SET failing_since = $2 WHERE id = $1 AND failing_since IS NULL`, c.EndpointID, now)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("webhook: unable to update endpoint after a delivery: %w", err))
		}
		if w.cfg.Count != nil {
			w.cfg.Count(map[string]string{"delivered": "delivered", "pending": "retry", "failed": "failed"}[statuses[i]])
		}
		if !out.delivered {
			w.log.Info("webhook: delivery attempt failed", "event_id", c.EventID.String(), "endpoint_id", c.EndpointID.String(),
				"attempt", c.Attempts, "status", statuses[i], "error", out.err, "detail", out.detail)
		}
	}
	return errors.Join(errs...)
}

func (w *Worker) disable(ctx context.Context, endpoint uuid.UUID, reason string) error {
	_, err := w.db.ExecContext(ctx, `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $2 WHERE id = $1`, endpoint, reason)
	if err == nil {
		w.log.Warn("webhook: endpoint disabled", "endpoint_id", endpoint.String(), "reason", reason)
	}
	return err
}
