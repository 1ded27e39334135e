-- +goose Up

-- Payments made outside the card processor (cash, checks, bank transfers)
-- that the merchant records toward an invoice. They move the invoice as a
-- card payment does, and are no card payment: never in card_payments, so
-- never in a deposit.
CREATE TABLE recorded_payments (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    invoice_id      uuid NOT NULL REFERENCES invoices (id),
    amount          numeric(11, 2) NOT NULL CHECK (amount > 0),
    method          text NOT NULL CHECK (method IN ('cash', 'check', 'bank_transfer', 'other')),
    reference       text,
    received_at     timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    created_by_name text NOT NULL
);
CREATE INDEX recorded_payments_invoice ON recorded_payments (invoice_id, received_at);

-- +goose Down
DROP TABLE recorded_payments;
