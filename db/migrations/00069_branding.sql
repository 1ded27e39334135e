-- +goose Up

-- What an organization's customers see of it (issue 39): the name they
-- know it by, its logo, an accent colour, how to reach it, its payment
-- terms and the footer of its invoices. Every column is optional: unset,
-- the pages show what they showed before.
ALTER TABLE organizations
    ADD COLUMN display_name       text,
    ADD COLUMN logo_sha256        text,
    ADD COLUMN accent_color       text CHECK (accent_color ~ '^#[0-9a-f]{6}$'),
    ADD COLUMN support_email      text,
    ADD COLUMN support_phone      text,
    ADD COLUMN payment_terms_days integer CHECK (payment_terms_days BETWEEN 0 AND 365),
    ADD COLUMN invoice_footer     text CHECK (char_length(invoice_footer) <= 500);

-- The logos, as re-encoded (PNG, at most 512 pixels wide), under the
-- SHA-256 of their bytes: the address a logo is served at. A logo replaced
-- stays, so that an email sent with it still shows it.
CREATE TABLE logos (
    sha256          text PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    png             bytea NOT NULL,
    width           integer NOT NULL,
    height          integer NOT NULL,
    created_at      timestamptz NOT NULL
);
ALTER TABLE organizations ADD CONSTRAINT organizations_logo FOREIGN KEY (logo_sha256) REFERENCES logos (sha256);

-- +goose Down
ALTER TABLE organizations DROP CONSTRAINT organizations_logo;
DROP TABLE logos;
ALTER TABLE organizations
    DROP COLUMN display_name, DROP COLUMN logo_sha256, DROP COLUMN accent_color, DROP COLUMN support_email,
    DROP COLUMN support_phone, DROP COLUMN payment_terms_days, DROP COLUMN invoice_footer;
