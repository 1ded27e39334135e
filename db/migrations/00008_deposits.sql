-- +goose Up

-- A deposit is the money the processor sends to the merchant's bank for
-- (part of) one MID's batch. Amounts are what payreq recorded of the
-- payments it holds; fees are the processor's. net = sales - refunds - fees,
-- negative when refunds outweigh sales.
CREATE TABLE deposits (
    id                  uuid PRIMARY KEY,
    organization_id     uuid NOT NULL REFERENCES organizations (id),
    merchant_account_id uuid NOT NULL REFERENCES merchant_accounts (id),
    -- The processor's funding id (CardPointe); NULL for the simulator. A
    -- funding becomes one deposit, however often its report is read.
    processor_ref       text,
    batch_date          date NOT NULL,
    expected_at         date NOT NULL,
    status              text NOT NULL CHECK (status IN ('pending', 'paid')),
    paid_at             timestamptz,
    sales_count         integer NOT NULL CHECK (sales_count >= 0),
    sales_amount        numeric(13, 2) NOT NULL CHECK (sales_amount >= 0),
    refunds_count       integer NOT NULL CHECK (refunds_count >= 0),
    refunds_amount      numeric(13, 2) NOT NULL CHECK (refunds_amount >= 0),
    fees_amount         numeric(13, 2) NOT NULL CHECK (fees_amount >= 0),
    net_amount          numeric(13, 2) NOT NULL,
    created_at          timestamptz NOT NULL,
    UNIQUE (merchant_account_id, processor_ref),
    CHECK (net_amount = sales_amount - refunds_amount - fees_amount),
    CHECK ((status = 'paid') = (paid_at IS NOT NULL))
);
CREATE INDEX deposits_newest ON deposits (organization_id, created_at DESC, id DESC);
CREATE INDEX deposits_pending ON deposits (expected_at) WHERE status = 'pending';

-- Every approved card payment belongs to at most one deposit.
ALTER TABLE card_payments ADD COLUMN deposit_id uuid REFERENCES deposits (id);
ALTER TABLE card_payments ADD CONSTRAINT card_payments_deposit CHECK (deposit_id IS NULL OR status = 'approved');
CREATE INDEX card_payments_deposit ON card_payments (deposit_id) WHERE deposit_id IS NOT NULL;
CREATE INDEX card_payments_open ON card_payments (merchant_account_id, created_at)
    WHERE deposit_id IS NULL AND status = 'approved';

-- The cutoff up to which each MID's batch is closed: the row is locked
-- while a batch closes, so a batch closes once however many instances try.
CREATE TABLE batch_closings (
    merchant_account_id uuid PRIMARY KEY REFERENCES merchant_accounts (id),
    closed_until        timestamptz NOT NULL
);

-- +goose Down
DROP TABLE batch_closings;
DROP INDEX card_payments_open;
DROP INDEX card_payments_deposit;
ALTER TABLE card_payments DROP CONSTRAINT card_payments_deposit;
ALTER TABLE card_payments DROP COLUMN deposit_id;
DROP TABLE deposits;
