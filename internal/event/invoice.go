package event

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// invoiceEvents selects the events of one invoice: those whose data is the
// invoice (invoice.*), holds it (invoice.payment_recorded and _removed) or
// names it (card_payment.*). The expression and the predicate are those of
// the index events_invoice (migration 00035), word for word, so that
// PostgreSQL reads the index and never the data of other events.
const invoiceEvents = `SELECT id, type, created_at, data::text AS data FROM events
	WHERE organization_id = $1
	  AND (CASE WHEN type IN ('invoice.payment_recorded', 'invoice.payment_removed') THEN data -> 'invoice' ->> 'id'
	            WHEN type LIKE 'card_payment.%' THEN data ->> 'invoiceId'
	            ELSE data ->> 'id' END) = $2
	  AND (type LIKE 'invoice.%' OR type LIKE 'card_payment.%')
	  AND type = ANY($3)
	ORDER BY created_at DESC, id DESC
	LIMIT $4`

// OfInvoice returns, through q, the newest events, at most limit, of one
// invoice of the organization that a holder of permissions may read: the
// invoice's own and those of its card payments.
func (s *Store) OfInvoice(ctx context.Context, q sqlx.QueryerContext, org uuid.UUID, permissions []string, invoiceID uuid.UUID, limit int) ([]Event, error) {
	var rows []row
	err := sqlx.SelectContext(ctx, q, &rows, invoiceEvents, org, invoiceID.String(), pq.Array(Readable(permissions)), limit)
	if err != nil {
		return nil, fmt.Errorf("event: unable to list an invoice's events: %w", err)
	}
	list := make([]Event, len(rows))
	for i, r := range rows {
		list[i] = r.event()
	}
	return list, nil
}
