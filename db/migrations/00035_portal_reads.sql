-- +goose Up

-- What the portal's pages read that no list of the API does.

-- An invoice's events, newest first, on its page: those whose data is the
-- invoice (invoice.*), holds it (invoice.payment_recorded and _removed) or
-- names it (card_payment.*). package event reads them with this very
-- expression and predicate (Store.OfInvoice).
CREATE INDEX events_invoice ON events (organization_id,
    (CASE WHEN type IN ('invoice.payment_recorded', 'invoice.payment_removed') THEN data -> 'invoice' ->> 'id'
          WHEN type LIKE 'card_payment.%' THEN data ->> 'invoiceId'
          ELSE data ->> 'id' END),
    created_at DESC, id DESC)
    WHERE type LIKE 'invoice.%' OR type LIKE 'card_payment.%';

-- The home page's open and overdue invoices: the unpaid ones alone, with
-- what their sums need.
CREATE INDEX invoices_unpaid ON invoices (organization_id)
    INCLUDE (merchant_account_id, amount, amount_paid, due_date)
    WHERE status IN ('open', 'part_paid');

-- The home page's payments made outside the card this week.
CREATE INDEX recorded_payments_organization ON recorded_payments (organization_id, received_at);

-- +goose Down
DROP INDEX recorded_payments_organization;
DROP INDEX invoices_unpaid;
DROP INDEX events_invoice;
