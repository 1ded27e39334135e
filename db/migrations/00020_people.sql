-- +goose Up
-- People sign in to the portal; a person may belong to several
-- organizations, each a membership with a role and permissions. Today's
-- users become people (one per email, compared case-insensitively) and
-- memberships that keep the users' ids, so that api_keys.created_by still
-- names who made each key. A membership is never deleted: removing one
-- sets removed_at, and its keys keep working.
CREATE TABLE people (
    id                  uuid PRIMARY KEY,
    email               text NOT NULL,
    name                text NOT NULL,
    -- argon2id in the PHC string form; NULL: no sign-in yet (invited).
    password_hash       text,
    -- The TOTP secret, sealed with the encryption key; totp_pending is one
    -- being set up, not yet confirmed with a code.
    totp_secret         bytea,
    totp_key_id         text,
    totp_pending        bytea,
    totp_pending_key_id text,
    -- The last time step whose code was taken: each code works once.
    totp_last_step      bigint,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX people_email ON people (lower(email));

CREATE TABLE memberships (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    person_id       uuid NOT NULL REFERENCES people (id),
    role            text NOT NULL CHECK (role IN ('Owner', 'Admin', 'Member')),
    permissions     text[] NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- NULL until the invitation is accepted.
    accepted_at     timestamptz,
    removed_at      timestamptz
);
CREATE UNIQUE INDEX memberships_current ON memberships (organization_id, person_id) WHERE removed_at IS NULL;
CREATE INDEX memberships_person ON memberships (person_id);

INSERT INTO people (id, email, name, created_at)
SELECT DISTINCT ON (lower(email)) gen_random_uuid(), email, name, created_at
FROM users ORDER BY lower(email), created_at, id;

INSERT INTO memberships (id, organization_id, person_id, role, permissions, created_at, accepted_at)
SELECT u.id, u.organization_id, p.id, u.role, u.permissions, u.created_at, u.created_at
FROM users u JOIN people p ON lower(p.email) = lower(u.email);

ALTER TABLE api_keys DROP CONSTRAINT api_keys_created_by_fkey;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_created_by_fkey FOREIGN KEY (created_by) REFERENCES memberships (id);
-- The last token exchange, shown as "last used".
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
DROP TABLE users;

-- Organizations whose Owner requires a second factor of every member.
CREATE TABLE two_factor_required (
    organization_id uuid PRIMARY KEY REFERENCES organizations (id),
    since           timestamptz NOT NULL
);

-- One-use recovery codes, stored as SHA-256 digests.
CREATE TABLE recovery_codes (
    person_id uuid NOT NULL REFERENCES people (id),
    digest    bytea NOT NULL,
    used_at   timestamptz,
    PRIMARY KEY (person_id, digest)
);

-- Portal sessions, found by the SHA-256 of the cookie's token.
CREATE TABLE sessions (
    digest        bytea PRIMARY KEY,
    person_id     uuid NOT NULL REFERENCES people (id),
    -- The organization chosen; NULL until one is.
    membership_id uuid REFERENCES memberships (id),
    -- Signed in with a password, waiting for the second factor.
    awaiting_second_factor boolean NOT NULL,
    created_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL
);
CREATE INDEX sessions_person ON sessions (person_id);

-- One-use links: invitations (72 hours) and password resets (30 minutes).
CREATE TABLE invitations (
    digest        bytea PRIMARY KEY,
    membership_id uuid NOT NULL REFERENCES memberships (id),
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz
);
CREATE INDEX invitations_membership ON invitations (membership_id);

CREATE TABLE password_resets (
    digest     bytea PRIMARY KEY,
    person_id  uuid NOT NULL REFERENCES people (id),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);

-- Failed sign-ins, by email (lower case) and by address (an IPv6
-- address's /64), for the lockouts; kept a day.
CREATE TABLE sign_in_failures (
    email   text NOT NULL,
    address text NOT NULL,
    at      timestamptz NOT NULL
);
CREATE INDEX sign_in_failures_email ON sign_in_failures (email, at);
CREATE INDEX sign_in_failures_address ON sign_in_failures (address, at);

-- An email locked after too many failures, until a reset or the end.
CREATE TABLE sign_in_locks (
    email       text PRIMARY KEY,
    locked_until timestamptz NOT NULL
);

-- Who did what in the portal, kept a year. Never a secret.
CREATE TABLE audit_log (
    id              uuid PRIMARY KEY,
    organization_id uuid REFERENCES organizations (id),
    person_id       uuid REFERENCES people (id),
    actor           text NOT NULL,
    action          text NOT NULL,
    detail          text NOT NULL,
    address         text NOT NULL,
    at              timestamptz NOT NULL
);
CREATE INDEX audit_log_organization ON audit_log (organization_id, at DESC, id DESC);
CREATE INDEX audit_log_at ON audit_log (at);

-- Messages about people (invitations, resets, lockouts) go through the
-- outbox too: no invoice, and the message sealed, cleared once delivered.
ALTER TABLE outbox ALTER COLUMN invoice_id DROP NOT NULL;
ALTER TABLE outbox ALTER COLUMN organization_id DROP NOT NULL;
ALTER TABLE outbox ADD COLUMN notice bytea, ADD COLUMN notice_key_id text;

-- +goose Down
ALTER TABLE outbox DROP COLUMN notice, DROP COLUMN notice_key_id;
DELETE FROM outbox WHERE invoice_id IS NULL;
ALTER TABLE outbox ALTER COLUMN invoice_id SET NOT NULL;
ALTER TABLE outbox ALTER COLUMN organization_id SET NOT NULL;
DROP TABLE audit_log, sign_in_locks, sign_in_failures, password_resets, invitations, sessions, recovery_codes, two_factor_required;
CREATE TABLE users (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id),
    name            text NOT NULL,
    email           text NOT NULL,
    role            text NOT NULL CHECK (role IN ('Owner', 'Admin', 'Member')),
    permissions     text[] NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, email)
);
INSERT INTO users (id, organization_id, name, email, role, permissions, created_at)
SELECT m.id, m.organization_id, p.name, p.email, m.role, m.permissions, m.created_at
FROM memberships m JOIN people p ON p.id = m.person_id;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_created_by_fkey;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id);
ALTER TABLE api_keys DROP COLUMN last_used_at;
DROP TABLE memberships, people;
