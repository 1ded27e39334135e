-- +goose Up

-- When the endpoint was pinged or sent an event again on request within
-- the last minute: it takes at most 10 such sends a minute.
ALTER TABLE webhook_endpoints ADD COLUMN requested_sends timestamptz[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE webhook_endpoints DROP COLUMN requested_sends;
