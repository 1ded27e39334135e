-- +goose Up
-- Customers become a resource of their own (package customer): one per
-- organization and email, compared without regard to case, the email kept
-- as the customer's latest invoice sent it. Today's invoices, saved cards
-- and stated preferences make them: name, company and phone from the
-- latest invoice, the preference from customer_preferences (which
-- 00047 drops once invoices point to their customer).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE customers (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    email           text NOT NULL,
    name            text,
    company         text,
    phone           text,
    -- {line1, line2, city, state, postalCode, country}, or NULL.
    address         jsonb,
    tax_exempt      boolean NOT NULL DEFAULT false,
    notes           text,
    -- The customer's own choice on the pay page; NULL: none stated.
    prefers         text CHECK (prefers IN ('email', 'text')),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE UNIQUE INDEX customers_email ON customers (organization_id, lower(email));
-- Newest-first keyset pages.
CREATE INDEX customers_organization_created ON customers (organization_id, created_at DESC, id DESC);
-- q: a substring of name, company or email in any case (ILIKE), each by
-- its own trigram index.
CREATE INDEX customers_name_trgm ON customers USING gin (name gin_trgm_ops);
CREATE INDEX customers_company_trgm ON customers USING gin (company gin_trgm_ops);
CREATE INDEX customers_email_trgm ON customers USING gin (email gin_trgm_ops);

INSERT INTO customers (id, organization_id, email, name, company, phone, prefers, created_at, updated_at)
SELECT gen_random_uuid(), latest.organization_id, latest.customer_email, latest.customer_name, latest.customer_company,
       latest.customer_phone, cp.prefers, latest.first_at, latest.created_at
FROM (
    SELECT DISTINCT ON (organization_id, lower(customer_email)) organization_id, customer_email, customer_name,
           customer_company, customer_phone, created_at,
           min(created_at) OVER (PARTITION BY organization_id, lower(customer_email)) AS first_at
    FROM invoices
    ORDER BY organization_id, lower(customer_email), created_at DESC, id DESC
) latest
LEFT JOIN customer_preferences cp
    ON cp.organization_id = latest.organization_id AND cp.customer_email = lower(latest.customer_email);

-- Saved cards and preferences of an email no invoice names (kept lower-cased there).
INSERT INTO customers (id, organization_id, email, prefers, created_at, updated_at)
SELECT gen_random_uuid(), e.organization_id, e.email, cp.prefers, e.at, e.at
FROM (
    SELECT organization_id, customer_email AS email, saved_at AS at FROM saved_cards
    UNION ALL
    SELECT organization_id, customer_email, updated_at FROM customer_preferences
) e
LEFT JOIN customer_preferences cp ON cp.organization_id = e.organization_id AND cp.customer_email = e.email
ON CONFLICT (organization_id, lower(email)) DO NOTHING;

-- +goose Down
DROP TABLE customers;
