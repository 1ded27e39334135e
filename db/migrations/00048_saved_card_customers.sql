-- +goose Up
-- A saved card belongs to a customer (package payment), no longer to an email.
ALTER TABLE saved_cards ADD COLUMN customer_id uuid REFERENCES customers (id);
UPDATE saved_cards s SET customer_id = c.id
FROM customers c
WHERE c.organization_id = s.organization_id AND lower(c.email) = s.customer_email;
ALTER TABLE saved_cards ALTER COLUMN customer_id SET NOT NULL;
DROP INDEX saved_cards_customer;
ALTER TABLE saved_cards DROP COLUMN customer_email;
CREATE INDEX saved_cards_customer ON saved_cards (customer_id, saved_at DESC, id);

-- +goose Down
ALTER TABLE saved_cards ADD COLUMN customer_email text;
UPDATE saved_cards s SET customer_email = lower(c.email) FROM customers c WHERE c.id = s.customer_id;
ALTER TABLE saved_cards ALTER COLUMN customer_email SET NOT NULL;
DROP INDEX saved_cards_customer;
ALTER TABLE saved_cards DROP COLUMN customer_id;
CREATE INDEX saved_cards_customer ON saved_cards (organization_id, customer_email, saved_at);
