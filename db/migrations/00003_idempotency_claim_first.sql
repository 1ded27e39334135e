-- +goose Up

-- Creating an invoice claims its Idempotency-Key first, with INSERT … ON
-- CONFLICT on the key (a concurrent request with the same key waits there
-- for the first to commit or roll back), and inserts the invoice it names
-- afterwards in the same transaction: the reference is checked at commit.
ALTER TABLE idempotency_keys ALTER CONSTRAINT idempotency_keys_invoice_id_fkey DEFERRABLE INITIALLY DEFERRED;

-- +goose Down

ALTER TABLE idempotency_keys ALTER CONSTRAINT idempotency_keys_invoice_id_fkey NOT DEFERRABLE;
