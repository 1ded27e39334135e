-- +goose Up

-- A saved card's consent to future charges (package payment): when the
-- customer gave it on the pay page and the exact words it was given to;
-- both null without it.
ALTER TABLE saved_cards ADD COLUMN charge_consent_at timestamptz, ADD COLUMN charge_consent text,
    ADD CONSTRAINT saved_cards_charge_consent CHECK ((charge_consent_at IS NULL) = (charge_consent IS NULL));

-- The saved card each invoice of a series is charged with (package
-- recurring), null without automatic payment. No foreign key: removing
-- the card sets it null in the removal's transaction, with its event.
ALTER TABLE recurring_invoices ADD COLUMN auto_pay_saved_card_id uuid;
CREATE INDEX recurring_invoices_auto_pay ON recurring_invoices (auto_pay_saved_card_id)
    WHERE auto_pay_saved_card_id IS NOT NULL;

-- The automatic charges still to make (package payment): one per invoice
-- issued with automatic payment, gone once approved, given up or no longer
-- payable. tries counts the processor's asks (try n's order id is derived
-- from order_base, the occurrence's id), declines the declines; open while
-- the last try's outcome is not yet read; next_at is when it is looked at
-- next (a try under way holds it as a lease).
CREATE TABLE auto_charges (
    invoice_id      uuid PRIMARY KEY REFERENCES invoices (id),
    organization_id uuid NOT NULL REFERENCES organizations (id),
    saved_card_id   uuid NOT NULL,
    order_base      uuid NOT NULL UNIQUE,
    tries           integer NOT NULL DEFAULT 0,
    declines        integer NOT NULL DEFAULT 0,
    open            boolean NOT NULL DEFAULT false,
    first_at        timestamptz NOT NULL,
    next_at         timestamptz NOT NULL
);
CREATE INDEX auto_charges_due ON auto_charges (next_at);

-- Whether an invoice was issued by a series (the pay page offers the
-- consent to future charges for those).
CREATE INDEX recurring_occurrences_invoice ON recurring_occurrences (invoice_id) WHERE invoice_id IS NOT NULL;

-- +goose Down
DROP INDEX recurring_occurrences_invoice;
DROP TABLE auto_charges;
DROP INDEX recurring_invoices_auto_pay;
ALTER TABLE recurring_invoices DROP COLUMN auto_pay_saved_card_id;
ALTER TABLE saved_cards DROP CONSTRAINT saved_cards_charge_consent, DROP COLUMN charge_consent, DROP COLUMN charge_consent_at;
