-- +goose Up

-- One table of idempotency keys for every operation that takes one (package
-- idempotency): a key is scoped to its organization and its operation, and
-- names what its first request made (an invoice, a refund) in result_id,
-- which therefore references no one table. A refund's key is claimed when
-- the refund is reserved, as an invoice's is when it is made, and given
-- back when the processor made no refund; pending_refunds no longer keeps
-- a copy. Keys of refunds under way move with them. A request hash is now
-- made by the domain from what it received, so a key sent before this
-- migration and again after it with the same body is refused as reused
-- (422) for the rest of its 24 hours.
ALTER TABLE idempotency_keys ADD COLUMN operation text NOT NULL DEFAULT 'invoice.create';
ALTER TABLE idempotency_keys ALTER COLUMN operation DROP DEFAULT;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_invoice_id_fkey;
ALTER TABLE idempotency_keys RENAME COLUMN invoice_id TO result_id;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (organization_id, operation, key);

INSERT INTO idempotency_keys (organization_id, operation, key, request_hash, result_id, created_at)
SELECT organization_id, 'card_payment.refund', key, request_hash, refund_id, created_at FROM refund_idempotency_keys;
INSERT INTO idempotency_keys (organization_id, operation, key, request_hash, result_id, created_at)
SELECT organization_id, 'card_payment.refund', idempotency_key, request_hash, refund_id, created_at
FROM pending_refunds WHERE idempotency_key IS NOT NULL
ON CONFLICT DO NOTHING;
DROP TABLE refund_idempotency_keys;
DROP INDEX pending_refunds_key;
ALTER TABLE pending_refunds DROP COLUMN idempotency_key, DROP COLUMN request_hash;

-- +goose Down

ALTER TABLE pending_refunds ADD COLUMN idempotency_key text, ADD COLUMN request_hash bytea;
CREATE UNIQUE INDEX pending_refunds_key ON pending_refunds (organization_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE refund_idempotency_keys (
    organization_id uuid NOT NULL REFERENCES organizations (id),
    key             text NOT NULL,
    request_hash    bytea NOT NULL,
    refund_id       uuid NOT NULL REFERENCES card_payments (id) DEFERRABLE INITIALLY DEFERRED,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (organization_id, key)
);
CREATE INDEX refund_idempotency_keys_created ON refund_idempotency_keys (created_at);
INSERT INTO refund_idempotency_keys (organization_id, key, request_hash, refund_id, created_at)
SELECT k.organization_id, k.key, k.request_hash, k.result_id, k.created_at
FROM idempotency_keys k JOIN card_payments c ON c.id = k.result_id
WHERE k.operation = 'card_payment.refund';
DELETE FROM idempotency_keys WHERE operation <> 'invoice.create';
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (organization_id, key);
ALTER TABLE idempotency_keys RENAME COLUMN result_id TO invoice_id;
DELETE FROM idempotency_keys k WHERE NOT EXISTS (SELECT 1 FROM invoices i WHERE i.id = k.invoice_id);
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_invoice_id_fkey FOREIGN KEY (invoice_id)
    REFERENCES invoices (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE idempotency_keys DROP COLUMN operation;
