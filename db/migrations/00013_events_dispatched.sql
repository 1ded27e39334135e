-- +goose Up

-- A change appends its event alone, in its own transaction; the webhook
-- worker fans it out into deliveries afterwards, claiming the events not
-- yet dispatched (dispatched_at IS NULL) and marking them in the
-- transaction that writes their deliveries. The events already here were
-- fanned out when they were written: the column's default marks them so
-- without rewriting the table, and is dropped at once, so new events start
-- undispatched.
ALTER TABLE events ADD COLUMN dispatched_at timestamptz DEFAULT now();
ALTER TABLE events ALTER COLUMN dispatched_at DROP DEFAULT;
CREATE INDEX events_undispatched ON events (created_at) WHERE dispatched_at IS NULL;

-- +goose Down
DROP INDEX events_undispatched;
ALTER TABLE events DROP COLUMN dispatched_at;
