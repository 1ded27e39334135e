-- +goose Up

-- Every attempt to move money on a card is a card payment: a sale made on a
-- pay page (approved or declined) or a refund of an approved sale. The
-- payments table held the approved sales; it becomes card_payments, and
-- each of its rows is an earlier sale. Declined sales were only counted
-- (invoices.failed_attempts): from now on each is a row too.
ALTER TABLE payments RENAME TO card_payments;
ALTER TABLE card_payments RENAME CONSTRAINT payments_pkey TO card_payments_pkey;
ALTER INDEX payments_invoice RENAME TO card_payments_invoice;
ALTER TABLE card_payments RENAME COLUMN paid_at TO created_at;
ALTER TABLE card_payments
    ADD COLUMN kind                text NOT NULL DEFAULT 'sale' CHECK (kind IN ('sale', 'refund')),
    ADD COLUMN status              text NOT NULL DEFAULT 'approved' CHECK (status IN ('approved', 'declined')),
    ADD COLUMN merchant_account_id uuid REFERENCES merchant_accounts (id),
    ADD COLUMN decline_reason      text,
    -- A refund: the sale it returns money of.
    ADD COLUMN refund_of           uuid REFERENCES card_payments (id),
    -- A sale: the sum of its approved refunds.
    ADD COLUMN amount_refunded     numeric(11, 2) NOT NULL DEFAULT 0,
    -- A refund: why, as the merchant gave it; the key that made it.
    ADD COLUMN reason              text,
    ADD COLUMN created_by_name     text;
UPDATE card_payments c SET merchant_account_id = i.merchant_account_id FROM invoices i WHERE i.id = c.invoice_id;
ALTER TABLE card_payments
    ALTER COLUMN merchant_account_id SET NOT NULL,
    ALTER COLUMN kind DROP DEFAULT,
    ALTER COLUMN status DROP DEFAULT,
    ADD CONSTRAINT card_payments_refund_of CHECK ((kind = 'refund') = (refund_of IS NOT NULL)),
    ADD CONSTRAINT card_payments_declined CHECK ((status = 'declined') = (decline_reason IS NOT NULL)),
    ADD CONSTRAINT card_payments_refunded CHECK (amount_refunded >= 0 AND amount_refunded <= amount);
CREATE INDEX card_payments_newest ON card_payments (organization_id, created_at DESC, id DESC);
CREATE INDEX card_payments_refunds ON card_payments (refund_of) WHERE refund_of IS NOT NULL;

-- The sum of the approved refunds of the invoice's sales.
ALTER TABLE invoices ADD COLUMN amount_refunded numeric(11, 2) NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE invoices DROP COLUMN amount_refunded;
DELETE FROM card_payments WHERE kind = 'refund' OR status = 'declined';
DROP INDEX card_payments_refunds;
DROP INDEX card_payments_newest;
ALTER TABLE card_payments
    DROP COLUMN kind, DROP COLUMN status, DROP COLUMN merchant_account_id, DROP COLUMN decline_reason,
    DROP COLUMN refund_of, DROP COLUMN amount_refunded, DROP COLUMN reason, DROP COLUMN created_by_name;
ALTER TABLE card_payments RENAME COLUMN created_at TO paid_at;
ALTER INDEX card_payments_invoice RENAME TO payments_invoice;
ALTER TABLE card_payments RENAME CONSTRAINT card_payments_pkey TO payments_pkey;
ALTER TABLE card_payments RENAME TO payments;
