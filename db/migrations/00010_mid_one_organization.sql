-- +goose Up

-- A MID belongs to one organization: the processor funds its sales to one
-- merchant's account, and each organization's batch closing asks for the
-- MID's fundings, so a MID in two organizations would route one merchant's
-- sales to another and fund them twice over. A database where two
-- organizations hold one MID stops here, naming them: which one keeps it is
-- the operator's call. (The older UNIQUE (organization_id, mid) stays: it is
-- the index an organization's MIDs are listed in order by.)
-- +goose StatementBegin
DO $$
DECLARE
    held record;
BEGIN
    SELECT mid, string_agg(organization_id::text, ', ' ORDER BY organization_id) AS organizations INTO held
    FROM merchant_accounts GROUP BY mid HAVING count(*) > 1 ORDER BY mid LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'MID % is held by organizations %: a MID belongs to one organization: leave it in one of them before upgrading',
            held.mid, held.organizations;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE UNIQUE INDEX merchant_accounts_mid ON merchant_accounts (mid);

-- +goose Down
DROP INDEX merchant_accounts_mid;
