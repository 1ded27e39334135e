-- +goose Up

-- The type of the event an attempt delivered, kept with the attempt (an
-- event's type never changes), so that webhook lists an endpoint's
-- attempts filtered by the types a member may read from its own table,
-- without reading package event's.
ALTER TABLE webhook_attempts ADD COLUMN event_type text;
UPDATE webhook_attempts a SET event_type = ev.type FROM events ev WHERE ev.id = a.event_id;
ALTER TABLE webhook_attempts ALTER COLUMN event_type SET NOT NULL;

-- +goose Down
ALTER TABLE webhook_attempts DROP COLUMN event_type;
