-- +goose Up

-- A send scheduled for later: the delivery of the pay link at
-- scheduled_send_at, claimed (FOR UPDATE SKIP LOCKED) by one instance in
-- the transaction that queues the message and clears the column, so it
-- goes out once however many instances look. Cleared by a send, a
-- cancellation and a payment in full.
ALTER TABLE invoices ADD COLUMN scheduled_send_at timestamptz;
CREATE INDEX invoices_scheduled_send ON invoices (scheduled_send_at) WHERE scheduled_send_at IS NOT NULL;

-- Reminders: the invoice's own choice (NULL follows its organization's
-- settings), how many went out and when the last did (at most one a day
-- in the location's time zone).
ALTER TABLE invoices ADD COLUMN reminders boolean;
ALTER TABLE invoices ADD COLUMN reminders_sent integer NOT NULL DEFAULT 0;
ALTER TABLE invoices ADD COLUMN last_reminded_at timestamptz;
-- The invoices a reminder may be due for, by due date.
CREATE INDEX invoices_remindable ON invoices (due_date)
    WHERE due_date IS NOT NULL AND status IN ('open', 'part_paid');

-- An organization's reminder schedule; no row: disabled, the default
-- offsets (package invoice).
CREATE TABLE reminder_settings (
    organization_id uuid PRIMARY KEY REFERENCES organizations (id),
    enabled         boolean NOT NULL,
    offsets_days    integer[] NOT NULL,
    updated_at      timestamptz NOT NULL
);

-- What a message is: the pay link, or a reminder of the balance.
ALTER TABLE outbox ADD COLUMN kind text NOT NULL DEFAULT 'pay_link' CHECK (kind IN ('pay_link', 'reminder'));

-- +goose Down
ALTER TABLE outbox DROP COLUMN kind;
DROP TABLE reminder_settings;
DROP INDEX invoices_remindable;
ALTER TABLE invoices DROP COLUMN last_reminded_at, DROP COLUMN reminders_sent, DROP COLUMN reminders;
DROP INDEX invoices_scheduled_send;
ALTER TABLE invoices DROP COLUMN scheduled_send_at;
