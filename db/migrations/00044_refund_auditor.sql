-- +goose Up

-- Who asked for a refund under way, as the audit log names them, so that
-- the transaction that records the refund writes its audit entry whichever
-- path records it (the request, or the settling of a lost answer later).
-- NULL when no person asked (an API key).
ALTER TABLE pending_refunds ADD COLUMN audit_person_id uuid REFERENCES people (id),
    ADD COLUMN audit_actor text,
    ADD COLUMN audit_address text;

-- +goose Down
ALTER TABLE pending_refunds DROP COLUMN audit_person_id, DROP COLUMN audit_actor, DROP COLUMN audit_address;
