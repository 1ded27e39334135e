-- +goose Up

-- payment.Pay reserves, asks the processor with no transaction open, then
-- records: a pending charge is written under the invoice's row lock before
-- the processor is asked, and holds its amount of the balance until its
-- outcome is recorded. The form it was sent with (attempt_id) lets a
-- second POST of that form wait for the first's answer rather than charge
-- again. Rows written before this migration have none.
ALTER TABLE pending_charges ADD COLUMN attempt_id uuid;
CREATE INDEX pending_charges_invoice ON pending_charges (invoice_id);

-- +goose Down
DROP INDEX pending_charges_invoice;
ALTER TABLE pending_charges DROP COLUMN attempt_id;
