-- +goose Up
-- Receipts: a receipt's message is about one card payment (a sale or a
-- refund), and is queued once per payment, whoever records it again.
ALTER TABLE outbox ADD COLUMN payment_id uuid;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('pay_link', 'reminder', 'receipt'));
ALTER TABLE outbox ADD CONSTRAINT outbox_receipt_payment CHECK ((kind = 'receipt') = (payment_id IS NOT NULL));
CREATE UNIQUE INDEX outbox_receipt ON outbox (payment_id) WHERE kind = 'receipt';

-- Whether the organization's customers get receipts: on unless turned off.
ALTER TABLE organizations ADD COLUMN receipts boolean NOT NULL DEFAULT true;

-- What each member chooses to hear of by email. notify_invoice_paid NULL:
-- never chosen, the role's default (on for Owners and Admins).
ALTER TABLE memberships
    ADD COLUMN notify_invoice_paid boolean,
    ADD COLUMN notify_card_declined boolean NOT NULL DEFAULT false,
    ADD COLUMN notify_deposit_paid boolean NOT NULL DEFAULT false,
    ADD COLUMN notify_terminal_failed boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE memberships DROP COLUMN notify_invoice_paid, DROP COLUMN notify_card_declined,
    DROP COLUMN notify_deposit_paid, DROP COLUMN notify_terminal_failed;
ALTER TABLE organizations DROP COLUMN receipts;
DELETE FROM outbox WHERE kind = 'receipt';
DROP INDEX outbox_receipt;
ALTER TABLE outbox DROP CONSTRAINT outbox_receipt_payment;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('pay_link', 'reminder'));
ALTER TABLE outbox DROP COLUMN payment_id;
