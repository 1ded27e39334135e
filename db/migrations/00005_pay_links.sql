-- +goose Up

-- Pay link tokens are no longer stored: a token is now the invoice id
-- enciphered under a server key (internal/invoice PayLinks). The random
-- tokens of earlier invoices, which customers hold, keep working: only
-- their SHA-256 stays, to find them by.
ALTER TABLE invoices ADD COLUMN legacy_pay_token_digest bytea;
UPDATE invoices SET legacy_pay_token_digest = sha256(convert_to(pay_token, 'UTF8'));
CREATE UNIQUE INDEX invoices_legacy_pay_token ON invoices (legacy_pay_token_digest)
    WHERE legacy_pay_token_digest IS NOT NULL;
ALTER TABLE invoices DROP COLUMN pay_token;

-- The pay page's limits, shared by every instance: POSTs with a valid form
-- token per pay link ("link:<invoice id>", 10 an hour) and POSTs per client
-- address across every pay page ("address:<ip>", 60 an hour). Rows older
-- than an hour are deleted by housekeeping.
DROP TABLE pay_attempts;
CREATE TABLE pay_limits (
    subject      text NOT NULL,
    attempted_at timestamptz NOT NULL
);
CREATE INDEX pay_limits_subject ON pay_limits (subject, attempted_at);
CREATE INDEX pay_limits_attempted ON pay_limits (attempted_at);

-- One row per pay form submission that reached the processor and got an
-- answer: each rendered form carries a one-time attempt id, and a form
-- posted again (a retry, a double click, another instance) gets the first
-- answer without a second charge. Written in the payment's transaction.
CREATE TABLE pay_submissions (
    attempt_id     uuid PRIMARY KEY,
    invoice_id     uuid NOT NULL REFERENCES invoices (id),
    payment_id     uuid,
    decline_reason text,
    created_at     timestamptz NOT NULL,
    CHECK ((payment_id IS NULL) <> (decline_reason IS NULL))
);
CREATE INDEX pay_submissions_created ON pay_submissions (created_at);

-- +goose Down
DROP TABLE pay_submissions;
DROP TABLE pay_limits;
CREATE TABLE pay_attempts (
    invoice_id   uuid NOT NULL REFERENCES invoices (id),
    attempted_at timestamptz NOT NULL
);
CREATE INDEX pay_attempts_invoice ON pay_attempts (invoice_id, attempted_at);
CREATE INDEX pay_attempts_attempted ON pay_attempts (attempted_at);
-- The tokens are gone: every invoice gets a new random one.
ALTER TABLE invoices ADD COLUMN pay_token text;
UPDATE invoices SET pay_token = md5(random()::text || id::text) || md5(random()::text || id::text);
ALTER TABLE invoices ALTER COLUMN pay_token SET NOT NULL;
ALTER TABLE invoices ADD CONSTRAINT invoices_pay_token_key UNIQUE (pay_token);
DROP INDEX invoices_legacy_pay_token;
ALTER TABLE invoices DROP COLUMN legacy_pay_token_digest;
