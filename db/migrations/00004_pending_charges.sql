-- +goose Up

-- A charge sent to the card processor whose outcome is not recorded yet. The
-- row is committed before the charge is sent and deleted in the transaction
-- that records the outcome. A row left behind — the processor's answer was
-- lost and so was the void, or the process died in the middle — is voided
-- at the processor by its order id, again and again until the processor
-- confirms; so no customer stays charged without a payment.
CREATE TABLE pending_charges (
    order_id    uuid PRIMARY KEY, -- the payment id, sent as the processor's order id
    invoice_id  uuid NOT NULL REFERENCES invoices (id),
    mid         text NOT NULL,
    amount      numeric(11, 2) NOT NULL,
    created_at  timestamptz NOT NULL,
    -- Not voided before: until then the payment may still be recorded.
    void_after  timestamptz NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    last_error  text
);
CREATE INDEX pending_charges_due ON pending_charges (void_after);

-- +goose Down
DROP TABLE pending_charges;
