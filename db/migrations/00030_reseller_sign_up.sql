-- +goose Up

-- Every reseller has a public sign-up page at /apply/{slug}: a slug is 3 to
-- 40 of a-z, 0-9 and '-', unique, held by resellers only. Resellers made
-- before it get one from their name (lower case, every run of other
-- characters a '-', at most 36 characters, '-2', '-3', … after a name
-- taken); package directory makes them so from now on.
ALTER TABLE organizations ADD COLUMN slug text;
-- +goose StatementBegin
DO $$
DECLARE
    r record;
    base text;
    candidate text;
    n integer;
BEGIN
    FOR r IN SELECT id, name FROM organizations WHERE kind = 'reseller' ORDER BY created_at, id LOOP
        base := trim(both '-' from left(trim(both '-' from regexp_replace(lower(r.name), '[^a-z0-9]+', '-', 'g')), 36));
        IF length(base) < 3 THEN
            base := 'reseller';
        END IF;
        candidate := base;
        n := 1;
        WHILE EXISTS (SELECT 1 FROM organizations WHERE slug = candidate) LOOP
            n := n + 1;
            candidate := base || '-' || n;
        END LOOP;
        UPDATE organizations SET slug = candidate WHERE id = r.id;
    END LOOP;
END
$$;
-- +goose StatementEnd
ALTER TABLE organizations
    ADD CONSTRAINT organizations_slug_key UNIQUE (slug),
    ADD CONSTRAINT organizations_slug_check CHECK (slug ~ '^[a-z0-9-]{3,40}$'),
    ADD CONSTRAINT organizations_reseller_slug CHECK ((kind = 'reseller') = (slug IS NOT NULL));

-- Submissions of the sign-up form from each client address (an IPv6
-- address's /64) in the last hour, counted across instances (package
-- reseller).
CREATE TABLE application_limits (
    subject      text NOT NULL,
    attempted_at timestamptz NOT NULL
);
CREATE INDEX application_limits_subject ON application_limits (subject, attempted_at);

-- +goose Down
DROP TABLE application_limits;
ALTER TABLE organizations DROP COLUMN slug;
