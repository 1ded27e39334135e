-- +goose Up

-- The portal's chart of the last 30 days' net deposits sums an
-- organization's deposits by batch date.
CREATE INDEX deposits_by_day ON deposits (organization_id, batch_date);

-- +goose Down
DROP INDEX deposits_by_day;
