package event

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"
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

// OfInvoice returns the newest events, at most limit, of one invoice of
// the organization that a holder of permissions may read: the invoice's
// own and those of its card payments.
func (s *Store) OfInvoice(ctx context.Context, org uuid.UUID, permissions []string, invoiceID uuid.UUID, limit int) ([]Event, error) {
	var rows []row
	err := s.DB.SelectContext(ctx, &rows, invoiceEvents, org, invoiceID.String(), pq.Array(Readable(permissions)), limit)
	if err != nil {
		return nil, fmt.Errorf("event: unable to list an invoice's events: %w", err)
	}
	list := make([]Event, len(rows))
	for i, r := range rows {
		list[i] = r.event()
	}
	return list, nil
}

// InvoiceColumn is a column over an invoice's row (alias i) for a read
// that wants its events with it, in the same statement (the portal's
// invoice page): as OfInvoice, without their data, as a JSON array of
// [id, type, created_at], NULL when there are none. types is the
// parameter ("$3") holding Readable's types; DecodeInvoiceColumn reads
// it. The predicate is the index events_invoice's, as invoiceEvents'.
func InvoiceColumn(types string, limit int) string {
	return `(SELECT json_agg(json_build_array(ev.id, ev.type, ev.created_at) ORDER BY ev.created_at DESC, ev.id DESC)
		FROM (SELECT e.id, e.type, e.created_at FROM events e
			WHERE e.organization_id = i.organization_id
			  AND (CASE WHEN type IN ('invoice.payment_recorded', 'invoice.payment_removed') THEN data -> 'invoice' ->> 'id'
			            WHEN type LIKE 'card_payment.%' THEN data ->> 'invoiceId'
			            ELSE data ->> 'id' END) = i.id::text
			  AND (type LIKE 'invoice.%' OR type LIKE 'card_payment.%')
			  AND type = ANY(` + types + `)
			ORDER BY e.created_at DESC, e.id DESC
			LIMIT ` + strconv.Itoa(limit) + `) ev)`
}

// DecodeInvoiceColumn reads a column of InvoiceColumn: events without
// their data.
func DecodeInvoiceColumn(b []byte) ([]Event, error) {
	if b == nil {
		return nil, nil
	}
	var raw [][3]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("event: unable to read an invoice's events: %w", err)
	}
	list := make([]Event, len(raw))
	for i, r := range raw {
		e := &list[i]
		for j, dest := range []any{&e.ID, &e.Type, &e.CreatedAt} {
			if err := json.Unmarshal(r[j], dest); err != nil {
				return nil, fmt.Errorf("event: unable to read an invoice's events: %w", err)
			}
		}
	}
	return list, nil
}
