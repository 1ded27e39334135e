-- +goose Up
-- Every table that holds an organization's data carries organization_id, and
-- every query filters by it: ids of other organizations are never reachable.

CREATE TABLE organizations (
    id         uuid PRIMARY KEY,
    name       text NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('merchant', 'reseller')),
    status     text NOT NULL DEFAULT 'active' CHECK (status IN ('onboarding', 'active', 'suspended', 'closed')),
    logo_url   text,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A reseller's portfolio: the merchants signed up through it.
CREATE TABLE portfolio_merchants (
    reseller_id uuid NOT NULL REFERENCES organizations (id),
    merchant_id uuid NOT NULL REFERENCES organizations (id),
    PRIMARY KEY (reseller_id, merchant_id)
);

CREATE TABLE products (
    key  text PRIMARY KEY,
    name text NOT NULL
);

-- The products a merchant has switched on.
CREATE TABLE organization_products (
    organization_id uuid NOT NULL REFERENCES organizations (id),
    product_key     text NOT NULL REFERENCES products (key),
    PRIMARY KEY (organization_id, product_key)
);

CREATE TABLE users (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    name            text NOT NULL,
    email           text NOT NULL,
    role            text NOT NULL CHECK (role IN ('Owner', 'Admin', 'Member')),
    -- What the user may do across the whole organization; a key it creates
    -- gets a subset of these.
    permissions     text[] NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, email)
);

CREATE TABLE api_keys (
    id                 text PRIMARY KEY CHECK (id ~ '^mk_[0-9A-Za-z]{24}$'),
    organization_id    uuid NOT NULL REFERENCES organizations (id),
    name               text NOT NULL,
    -- HMAC-SHA256 of the secret under the server's pepper; the secret itself is never kept.
    secret_fingerprint bytea NOT NULL,
    permissions        text[] NOT NULL,
    created_by         uuid NOT NULL REFERENCES users (id),
    created_at         timestamptz NOT NULL DEFAULT now(),
    revoked_at         timestamptz
);
CREATE INDEX api_keys_organization ON api_keys (organization_id, created_at);

-- Token requests per client address and minute, shared by every instance.
CREATE TABLE token_requests (
    address      text NOT NULL,
    window_start timestamptz NOT NULL,
    requests     integer NOT NULL,
    PRIMARY KEY (address, window_start)
);

CREATE TABLE locations (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    name            text NOT NULL,
    time_zone       text NOT NULL,
    status          text NOT NULL CHECK (status IN ('active', 'inactive')),
    receipt_name    text,
    address_line1   text NOT NULL,
    address_line2   text,
    city            text NOT NULL,
    state           text NOT NULL,
    postal_code     text NOT NULL,
    phone           text,
    email           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX locations_organization_name ON locations (organization_id, name, id);

CREATE TABLE merchant_accounts (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    location_id     uuid NOT NULL REFERENCES locations (id),
    mid             text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, mid)
);
CREATE INDEX merchant_accounts_location ON merchant_accounts (location_id);

CREATE TABLE invoices (
    id                  uuid PRIMARY KEY,
    organization_id     uuid NOT NULL REFERENCES organizations (id),
    merchant_account_id uuid NOT NULL REFERENCES merchant_accounts (id),
    invoice_number      text NOT NULL,
    po_number           text,
    amount              numeric(11, 2) NOT NULL CHECK (amount > 0),
    amount_paid         numeric(11, 2) NOT NULL DEFAULT 0 CHECK (amount_paid >= 0 AND amount_paid <= amount),
    customer_name       text,
    customer_company    text,
    customer_email      text NOT NULL,
    customer_phone      text,
    delivery            text NOT NULL CHECK (delivery IN ('email', 'text')),
    sent_via            text CHECK (sent_via IN ('email', 'text')),
    sent_at             timestamptz,
    send_problem        text,
    memo                text,
    due_date            date,
    line_count          integer NOT NULL DEFAULT 0,
    status              text NOT NULL CHECK (status IN ('open', 'part_paid', 'paid', 'cancelled')),
    failed_attempts     integer NOT NULL DEFAULT 0,
    problem             text,
    paid_at             timestamptz,
    level3_sent         boolean NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL,
    created_by_name     text NOT NULL,
    cancelled_at        timestamptz,
    cancelled_by_name   text,
    -- The secret part of the pay link; never the invoice id.
    pay_token           text NOT NULL UNIQUE,
    UNIQUE (organization_id, invoice_number)
);
-- Newest-first keyset pages, and the list filters.
CREATE INDEX invoices_organization_created ON invoices (organization_id, created_at DESC, id DESC);
CREATE INDEX invoices_merchant_account_created ON invoices (merchant_account_id, created_at DESC, id DESC);
CREATE INDEX invoices_customer_email ON invoices (organization_id, lower(customer_email));

CREATE TABLE invoice_lines (
    invoice_id     uuid NOT NULL REFERENCES invoices (id),
    position       integer NOT NULL,
    description    text NOT NULL,
    quantity       numeric NOT NULL,
    unit_cost      numeric NOT NULL,
    uom            text,
    commodity_code text,
    upc            text,
    PRIMARY KEY (invoice_id, position)
);

CREATE TABLE payments (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    invoice_id      uuid NOT NULL REFERENCES invoices (id),
    amount          numeric(11, 2) NOT NULL CHECK (amount > 0),
    ret_ref         text,
    card_brand      text,
    last_four       text,
    payer_name      text,
    paid_at         timestamptz NOT NULL,
    level3_sent     boolean NOT NULL DEFAULT false,
    saved_card      boolean NOT NULL DEFAULT false
);
CREATE INDEX payments_invoice ON payments (invoice_id, paid_at);

-- Customers are known by their email within an organization (stored lower-cased).
CREATE TABLE customer_preferences (
    organization_id uuid NOT NULL REFERENCES organizations (id),
    customer_email  text NOT NULL,
    prefers         text NOT NULL CHECK (prefers IN ('email', 'text')),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, customer_email)
);

CREATE TABLE saved_cards (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    customer_email  text NOT NULL,
    -- The processor's references to the stored card; never the card number.
    profile_id      text NOT NULL,
    account_id      text NOT NULL,
    card_brand      text,
    last_four       text,
    expiry          text,
    saved_at        timestamptz NOT NULL,
    saved_by_name   text NOT NULL
);
CREATE INDEX saved_cards_customer ON saved_cards (organization_id, customer_email, saved_at);

CREATE TABLE idempotency_keys (
    organization_id uuid NOT NULL REFERENCES organizations (id),
    key             text NOT NULL,
    request_hash    bytea NOT NULL,
    invoice_id      uuid NOT NULL REFERENCES invoices (id),
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (organization_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- Transactional outbox: a message row is written in the transaction that
-- decides to send; workers deliver it at least once. id is the message id the
-- provider sees, so a redelivery can be recognised.
CREATE TABLE outbox (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    invoice_id      uuid NOT NULL REFERENCES invoices (id),
    channel         text NOT NULL CHECK (channel IN ('email', 'text')),
    recipient       text NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    created_at      timestamptz NOT NULL,
    delivered_at    timestamptz,
    failed_at       timestamptz,
    cancelled_at    timestamptz
);
CREATE INDEX outbox_due ON outbox (next_attempt_at)
    WHERE delivered_at IS NULL AND failed_at IS NULL AND cancelled_at IS NULL;
CREATE INDEX outbox_invoice ON outbox (invoice_id);

-- Merchant applications submitted through a reseller. Full tax ids, social
-- security numbers and bank account numbers are kept only encrypted
-- (AES-256-GCM; *_key_id names the key), beside their last four digits.
CREATE TABLE applications (
    id                    uuid PRIMARY KEY,
    reseller_id           uuid NOT NULL REFERENCES organizations (id),
    stage                 text NOT NULL CHECK (stage IN ('submitted', 'in_review', 'needs_info', 'approved', 'declined', 'boarded')),
    submitted_at          timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    legal_name            text NOT NULL,
    dba_name              text NOT NULL,
    entity_type           text NOT NULL,
    tax_id_encrypted      bytea NOT NULL,
    tax_id_key_id         text NOT NULL,
    tax_id_last_four      text NOT NULL,
    phone                 text,
    email                 text NOT NULL,
    website               text,
    address_line1         text NOT NULL,
    address_line2         text,
    city                  text NOT NULL,
    state                 text NOT NULL,
    postal_code           text NOT NULL,
    routing_number        text NOT NULL,
    account_encrypted     bytea NOT NULL,
    account_key_id        text NOT NULL,
    account_last_four     text NOT NULL
);
CREATE INDEX applications_reseller_submitted ON applications (reseller_id, submitted_at DESC, id DESC);

CREATE TABLE application_owners (
    application_id    uuid NOT NULL REFERENCES applications (id),
    position          integer NOT NULL,
    name              text NOT NULL,
    title             text NOT NULL,
    ownership_percent numeric(5, 2) NOT NULL,
    ssn_encrypted     bytea NOT NULL,
    ssn_key_id        text NOT NULL,
    ssn_last_four     text NOT NULL,
    PRIMARY KEY (application_id, position)
);

CREATE TABLE application_history (
    application_id uuid NOT NULL REFERENCES applications (id),
    seq            integer NOT NULL,
    stage          text NOT NULL,
    at             timestamptz NOT NULL,
    note           text,
    PRIMARY KEY (application_id, seq)
);

-- +goose Down
DROP TABLE application_history, application_owners, applications, outbox, idempotency_keys,
    saved_cards, customer_preferences, payments, invoice_lines, invoices, merchant_accounts,
    locations, token_requests, api_keys, users, organization_products, products,
    portfolio_merchants, organizations;
