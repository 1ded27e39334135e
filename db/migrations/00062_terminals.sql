-- +goose Up

-- Card terminals in stores (CardPointe's Integrated Terminal API), owned
-- by the terminal package. A terminal is on one MID; its HSN (hardware
-- serial number) names it at the gateway and is unique among the
-- terminals not removed. last_seen_at is the last ping it answered.
CREATE TABLE terminals (
    id                  uuid PRIMARY KEY,
    organization_id     uuid NOT NULL REFERENCES organizations (id),
    merchant_account_id uuid NOT NULL REFERENCES merchant_accounts (id),
    name                text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    hsn                 text NOT NULL CHECK (length(hsn) BETWEEN 1 AND 64),
    last_seen_at        timestamptz,
    created_at          timestamptz NOT NULL,
    removed_at          timestamptz
);
CREATE UNIQUE INDEX terminals_hsn ON terminals (hsn) WHERE removed_at IS NULL;
CREATE INDEX terminals_organization ON terminals (organization_id, name) WHERE removed_at IS NULL;

-- A payment asked of a terminal. order_id is its own short id at the
-- gateway (at most 19 characters). A worker holds a pending one until
-- claimed_until; asked_at is when the terminal was first asked, after
-- which it is never asked again (the gateway is asked about the order).
-- One pending payment per terminal.
CREATE TABLE terminal_payments (
    id                uuid PRIMARY KEY,
    organization_id   uuid NOT NULL REFERENCES organizations (id),
    terminal_id       uuid NOT NULL REFERENCES terminals (id),
    invoice_id        uuid NOT NULL REFERENCES invoices (id),
    order_id          text NOT NULL UNIQUE CHECK (length(order_id) <= 19),
    amount            numeric(11, 2) NOT NULL CHECK (amount > 0),
    status            text NOT NULL CHECK (status IN ('pending', 'approved', 'declined', 'cancelled', 'timed_out', 'failed')),
    card_payment_id   uuid REFERENCES card_payments (id),
    decline_reason    text,
    entry_mode        text CHECK (entry_mode IN ('chip', 'contactless', 'swipe', 'manual')),
    card_brand        text,
    last_four         text,
    application_label text,
    aid               text,
    asked_at          timestamptz,
    claimed_until     timestamptz,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
CREATE UNIQUE INDEX terminal_payments_one_per_terminal ON terminal_payments (terminal_id) WHERE status = 'pending';
CREATE INDEX terminal_payments_list ON terminal_payments (organization_id, created_at DESC, id DESC);
CREATE INDEX terminal_payments_pending ON terminal_payments (created_at) WHERE status = 'pending';

-- A sale made at a terminal says so: how the card was entered, and which
-- terminal (NULL for the pay page).
ALTER TABLE card_payments ADD COLUMN entry_mode text CHECK (entry_mode IN ('chip', 'contactless', 'swipe', 'manual')),
    ADD COLUMN terminal_id uuid REFERENCES terminals (id);

-- +goose Down
ALTER TABLE card_payments DROP COLUMN entry_mode, DROP COLUMN terminal_id;
DROP TABLE terminal_payments;
DROP TABLE terminals;
