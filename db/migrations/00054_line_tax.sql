-- +goose Up

-- A line's tax rate, a percent (0 to 100, at most 4 places; NULL: no
-- tax). A line's amount and tax amount follow from its quantity, unit
-- cost and rate, so they are not stored.
ALTER TABLE invoice_lines ADD COLUMN tax_rate numeric CHECK (tax_rate >= 0 AND tax_rate <= 100);

-- The invoice's tax, the sum of its lines' tax amounts (0 without lines),
-- kept on the invoice so that every read, lists included, answers
-- subtotal (amount − tax_amount) and taxAmount without reading the lines.
-- Unbounded: with discount lines the tax may exceed the amount.
ALTER TABLE invoices ADD COLUMN tax_amount numeric NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE invoices DROP COLUMN tax_amount;
ALTER TABLE invoice_lines DROP COLUMN tax_rate;
