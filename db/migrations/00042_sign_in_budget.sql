-- +goose Up

-- A failure of the second step is counted per person on its own
-- (second_factor, person_id); the email's password failures exclude them.
-- A sign-in that passes both steps clears the email's and the person's
-- failures (cleared_at) without deleting them: the address limit keeps
-- counting every failure it saw.
ALTER TABLE sign_in_failures
    ADD COLUMN person_id     uuid,
    ADD COLUMN second_factor boolean NOT NULL DEFAULT false,
    ADD COLUMN cleared_at    timestamptz;
CREATE INDEX sign_in_failures_person ON sign_in_failures (person_id, at) WHERE second_factor;

-- The second step of a person paused after too many wrong codes.
ALTER TABLE people ADD COLUMN second_factor_paused_until timestamptz;

-- Every password check that carried no device cookie (sign-in, reset,
-- invitation, password change), success or not, by address (an IPv6
-- address's /64), for the 30-a-minute budget; kept an hour.
CREATE TABLE password_checks (
    address text NOT NULL,
    at      timestamptz NOT NULL
);
CREATE INDEX password_checks_address ON password_checks (address, at);

-- Password reset requests, by email (lower case) and by address, for their
-- limits; kept a day. Nothing here says whether the email has a sign-in.
CREATE TABLE reset_requests (
    email   text NOT NULL,
    address text NOT NULL,
    at      timestamptz NOT NULL
);
CREATE INDEX reset_requests_email ON reset_requests (email, at);
CREATE INDEX reset_requests_address ON reset_requests (address, at);

-- +goose Down
DROP TABLE reset_requests;
DROP TABLE password_checks;
ALTER TABLE people DROP COLUMN second_factor_paused_until;
DROP INDEX sign_in_failures_person;
ALTER TABLE sign_in_failures DROP COLUMN cleared_at, DROP COLUMN second_factor, DROP COLUMN person_id;
