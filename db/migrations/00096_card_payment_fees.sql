-- +goose Up

-- The processor's fee of each card payment (package payment's), written
-- with its deposit: NULL until then, and when the processor's funding
-- report gives fees per funding only. A refund's is 0.00.
ALTER TABLE card_payments ADD COLUMN fee_amount numeric(13, 2) CHECK (fee_amount >= 0);

-- +goose Down
ALTER TABLE card_payments DROP COLUMN fee_amount;
