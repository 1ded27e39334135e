-- +goose Up
-- Every invoice belongs to a customer (package invoice); the preference a
-- customer stated now lives on the customer (customers.prefers).
ALTER TABLE invoices ADD COLUMN customer_id uuid REFERENCES customers (id);
UPDATE invoices i SET customer_id = c.id
FROM customers c
WHERE c.organization_id = i.organization_id AND lower(c.email) = lower(i.customer_email);
ALTER TABLE invoices ALTER COLUMN customer_id SET NOT NULL;
-- GET /payment-requests?customerId= pages, and a customer's totals.
CREATE INDEX invoices_customer_created ON invoices (customer_id, created_at DESC, id DESC);
DROP TABLE customer_preferences;

-- +goose Down
CREATE TABLE customer_preferences (
    organization_id uuid NOT NULL REFERENCES organizations (id),
    customer_email  text NOT NULL,
    prefers         text NOT NULL CHECK (prefers IN ('email', 'text')),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, customer_email)
);
INSERT INTO customer_preferences (organization_id, customer_email, prefers, updated_at)
SELECT organization_id, lower(email), prefers, updated_at FROM customers WHERE prefers IS NOT NULL;
ALTER TABLE invoices DROP COLUMN customer_id;
