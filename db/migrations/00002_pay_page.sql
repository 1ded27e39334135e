-- +goose Up

-- Pay page POSTs per pay link, shared by every instance, for the limit of
-- 10 attempts an hour per link (against card testing). Rows older than an
-- hour are deleted by housekeeping.
CREATE TABLE pay_attempts (
    invoice_id   uuid NOT NULL REFERENCES invoices (id),
    attempted_at timestamptz NOT NULL
);
CREATE INDEX pay_attempts_invoice ON pay_attempts (invoice_id, attempted_at);
CREATE INDEX pay_attempts_attempted ON pay_attempts (attempted_at);

-- A stored card lives at the processor under the MID it was charged with;
-- deleting it there needs that MID.
ALTER TABLE saved_cards ADD COLUMN merchant_account_id uuid REFERENCES merchant_accounts (id);
-- One row per processor profile.
CREATE UNIQUE INDEX saved_cards_profile ON saved_cards (organization_id, profile_id, account_id);

-- +goose Down
DROP INDEX saved_cards_profile;
ALTER TABLE saved_cards DROP COLUMN merchant_account_id;
DROP TABLE pay_attempts;
