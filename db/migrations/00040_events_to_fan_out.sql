-- +goose Up

-- The events not yet fanned out are listed apart from the events: a
-- change appends its event and the event's row here in one statement,
-- and the fan-out claims rows here by deleting them (SKIP LOCKED) in the
-- transaction that writes the deliveries. An event's row, with its data,
-- is then written once and never updated: marking it dispatched
-- (dispatched_at) wrote the whole row again, with a new entry in each of
-- its indexes, for every event, subscribed to or not. Ordered by event
-- id, a UUIDv7, in the order the events were made. No foreign key: its
-- check would lock the event's row, a write of its own; a row whose
-- event is gone (past its 30 days) is dropped when claimed.
DROP INDEX events_undispatched;
CREATE TABLE events_to_fan_out (
    event_id uuid PRIMARY KEY
);
INSERT INTO events_to_fan_out (event_id) SELECT id FROM events WHERE dispatched_at IS NULL;
ALTER TABLE events DROP COLUMN dispatched_at;

-- +goose Down
ALTER TABLE events ADD COLUMN dispatched_at timestamptz DEFAULT now();
ALTER TABLE events ALTER COLUMN dispatched_at DROP DEFAULT;
UPDATE events SET dispatched_at = NULL WHERE id IN (SELECT event_id FROM events_to_fan_out);
CREATE INDEX events_undispatched ON events (created_at) WHERE dispatched_at IS NULL;
DROP TABLE events_to_fan_out;
