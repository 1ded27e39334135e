-- +goose Up

-- The key made by a portal form that carried a one-time idempotency key
-- is found again by the id its claim names (idempotency_keys.result_id),
-- so that the form sent twice makes one key: api_keys' own ids are text.
-- NULL for keys made without one (the CLI, the demo).
ALTER TABLE api_keys ADD COLUMN request_id uuid UNIQUE;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN request_id;
