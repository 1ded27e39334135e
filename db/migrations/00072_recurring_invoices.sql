-- +goose Up

-- Recurring invoices (package recurring): a series issues an invoice on
-- each of its occurrences (0 is start_on); next_n is the next occurrence
-- to handle and next_due_at when it is due (00:00 of its day in the MID's
-- location's zone), null once the series has ended.
CREATE TABLE recurring_invoices (
    id                    uuid PRIMARY KEY,
    organization_id       uuid NOT NULL REFERENCES organizations (id),
    merchant_account_id   uuid NOT NULL REFERENCES merchant_accounts (id),
    invoice_number_prefix text NOT NULL,
    amount                numeric NOT NULL,
    lines                 jsonb,
    memo                  text,
    po_number             text,
    -- The customer (package customer's) each invoice bills; no foreign
    -- key: a customer with no invoices may be deleted, and the series'
    -- next invoice is then refused (Unknown customer) and logged.
    customer_id           uuid NOT NULL,
    delivery              text NOT NULL CHECK (delivery IN ('email', 'text')),
    reminders             boolean,
    interval              text NOT NULL CHECK (interval IN ('week', 'month', 'year')),
    interval_count        integer NOT NULL CHECK (interval_count BETWEEN 1 AND 12),
    start_on              date NOT NULL,
    end_after             integer CHECK (end_after >= 1),
    end_on                date,
    due_days              integer NOT NULL CHECK (due_days BETWEEN 0 AND 365),
    send                  boolean NOT NULL,
    status                text NOT NULL CHECK (status IN ('active', 'paused', 'ended')),
    next_n                integer NOT NULL DEFAULT 0,
    next_due_at           timestamptz,
    issued_count          integer NOT NULL DEFAULT 0,
    skipped_count         integer NOT NULL DEFAULT 0,
    last_invoice_id       uuid,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    CHECK (end_after IS NULL OR end_on IS NULL)
);
-- A prefix once per organization, ended series too: their invoices keep
-- the numbers, and two series of one prefix would number alike.
CREATE UNIQUE INDEX recurring_invoices_prefix ON recurring_invoices (organization_id, invoice_number_prefix);
CREATE INDEX recurring_invoices_list ON recurring_invoices (organization_id, created_at DESC, id DESC);
CREATE INDEX recurring_invoices_customer ON recurring_invoices (organization_id, customer_id, created_at DESC, id DESC);
-- What the issuing loop looks for: the active series that are due.
CREATE INDEX recurring_invoices_due ON recurring_invoices (next_due_at) WHERE status = 'active';

-- Each occurrence handled, once: the primary key is the claim made in the
-- transaction that makes its invoice (or records it skipped), whatever
-- instances run and whenever they restart.
CREATE TABLE recurring_occurrences (
    recurring_invoice_id uuid NOT NULL REFERENCES recurring_invoices (id),
    n                    integer NOT NULL,
    issue_on             date NOT NULL,
    invoice_id           uuid REFERENCES invoices (id),
    skipped              boolean NOT NULL,
    handled_at           timestamptz NOT NULL,
    PRIMARY KEY (recurring_invoice_id, n),
    CHECK (NOT (skipped AND invoice_id IS NOT NULL))
);

-- +goose Down
DROP TABLE recurring_occurrences;
DROP TABLE recurring_invoices;
