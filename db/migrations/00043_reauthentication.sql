-- +goose Up

-- "Confirm it's you" (issue 36, item 4): when the session's person last
-- gave their password (and their current code, with a second factor),
-- on the confirmation page or by signing in. Changes to the second
-- factor and new API keys need it within the last 10 minutes. NULL:
-- never (sessions started before this migration confirm first).
ALTER TABLE sessions ADD COLUMN confirmed_at timestamptz;

-- Recovery codes (item 16): codes made from now on are kept as
-- HMAC-SHA-256 under a key derived from the pepper ('hmac'). Codes made
-- before are unsalted SHA-256 ('sha256'), which no migration can re-hash
-- (there is no plaintext): they keep working, once each, until used or
-- replaced by a new set, so that nobody is locked out of their account.
ALTER TABLE recovery_codes ADD COLUMN scheme text NOT NULL DEFAULT 'sha256' CHECK (scheme IN ('sha256', 'hmac'));
ALTER TABLE recovery_codes ALTER COLUMN scheme DROP DEFAULT;

-- +goose Down
ALTER TABLE recovery_codes DROP COLUMN scheme;
ALTER TABLE sessions DROP COLUMN confirmed_at;
