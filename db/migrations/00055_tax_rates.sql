-- +goose Up

-- An organization's named tax rates ("Sales tax" 8.25), offered by the
-- portal's lines editor; a line keeps its own rate (invoice_lines.tax_rate),
-- so removing or adding a named rate changes no invoice.
CREATE TABLE tax_rates (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    name            text NOT NULL,
    rate            numeric NOT NULL CHECK (rate >= 0 AND rate <= 100),
    created_at      timestamptz NOT NULL
);
-- A name once per organization, whatever its case.
CREATE UNIQUE INDEX tax_rates_organization_name ON tax_rates (organization_id, lower(name));

-- +goose Down
DROP TABLE tax_rates;
