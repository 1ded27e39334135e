-- +goose Up

-- Drafts: an invoice saved unfinished, with no pay link, never sent,
-- reminded or paid, until it is finalized (then open) or deleted.
ALTER TABLE invoices DROP CONSTRAINT invoices_status_check;
ALTER TABLE invoices ADD CONSTRAINT invoices_status_check
    CHECK (status IN ('draft', 'open', 'part_paid', 'paid', 'cancelled'));

-- Each change of an invoice's own fields (PATCH) counts: the ETag of its
-- answers, and what the pay page's form holds, so that a form shown
-- before a change charges nothing after it.
ALTER TABLE invoices ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version >= 1);

-- +goose Down
ALTER TABLE invoices DROP COLUMN version;
DELETE FROM invoice_lines l USING invoices i WHERE i.id = l.invoice_id AND i.status = 'draft';
DELETE FROM invoices WHERE status = 'draft';
ALTER TABLE invoices DROP CONSTRAINT invoices_status_check;
ALTER TABLE invoices ADD CONSTRAINT invoices_status_check
    CHECK (status IN ('open', 'part_paid', 'paid', 'cancelled'));
