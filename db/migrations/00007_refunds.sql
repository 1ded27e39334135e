-- +goose Up

-- A refund under way: written (and committed) before the processor is
-- asked, deleted in the transaction that records the refund. One left
-- behind had its answer lost (a timeout, a crash): once due, it is settled
-- by asking the processor (internal/payment SettlePendingRefunds), and a
-- retry of its request settles it first. Its amount counts as taken from
-- the sale until then.
CREATE TABLE pending_refunds (
    refund_id       uuid PRIMARY KEY, -- the refund's card payment id, sent as the processor's order id
    organization_id uuid NOT NULL REFERENCES organizations (id),
    sale_id         uuid NOT NULL REFERENCES card_payments (id),
    amount          numeric(11, 2) NOT NULL CHECK (amount > 0),
    whole           boolean NOT NULL,
    reason          text,
    created_by_name text NOT NULL,
    idempotency_key text,
    request_hash    bytea,
    created_at      timestamptz NOT NULL,
    -- Not settled before: until then its request may still record it.
    settle_after    timestamptz NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text
);
CREATE INDEX pending_refunds_due ON pending_refunds (settle_after);
CREATE INDEX pending_refunds_sale ON pending_refunds (sale_id);
CREATE UNIQUE INDEX pending_refunds_key ON pending_refunds (organization_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Idempotency-Key of POST /card-payments/{id}/refund, as for invoices:
-- claimed first in the refund's transaction, remembered 24 hours.
CREATE TABLE refund_idempotency_keys (
    organization_id uuid NOT NULL REFERENCES organizations (id),
    key             text NOT NULL,
    request_hash    bytea NOT NULL,
    refund_id       uuid NOT NULL REFERENCES card_payments (id) DEFERRABLE INITIALLY DEFERRED,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (organization_id, key)
);
CREATE INDEX refund_idempotency_keys_created ON refund_idempotency_keys (created_at);

-- +goose Down
DROP TABLE refund_idempotency_keys;
DROP TABLE pending_refunds;
