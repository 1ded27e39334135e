-- +goose Up

-- An event records a change, written in the change's own transaction.
-- data is the resource as the API returned it at that moment (json, not
-- jsonb: delivered byte for byte as stored). Kept 30 days.
CREATE TABLE events (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    type            text NOT NULL,
    data            json NOT NULL,
    created_at      timestamptz NOT NULL
);
CREATE INDEX events_newest ON events (organization_id, created_at DESC, id DESC);
CREATE INDEX events_created ON events (created_at);

-- Where an organization's events are pushed. The signing secrets are
-- sealed by the vault (the encryption key); the previous one keeps signing
-- beside the current one until previous_until, after a rotation.
CREATE TABLE webhook_endpoints (
    id                   uuid PRIMARY KEY,
    organization_id      uuid NOT NULL REFERENCES organizations (id),
    url                  text NOT NULL,
    description          text,
    event_types          text[] NOT NULL,
    status               text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    disabled_reason      text,
    secret               bytea NOT NULL,
    secret_key_id        text NOT NULL,
    previous_secret      bytea,
    previous_key_id      text,
    previous_until       timestamptz,
    -- The first failed delivery since the last success: five days of
    -- failures disable the endpoint.
    failing_since        timestamptz,
    created_at           timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_organization ON webhook_endpoints (organization_id, created_at, id);

-- The outbox of webhooks: one row per event and endpoint, claimed by any
-- instance with SKIP LOCKED and a lease (next_attempt_at moves past the
-- attempt's time limit while it runs).
CREATE TABLE webhook_deliveries (
    event_id         uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    status           text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    last_status_code integer,
    last_error       text,
    last_attempt_at  timestamptz,
    delivered_at     timestamptz,
    PRIMARY KEY (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
DROP TABLE events;
