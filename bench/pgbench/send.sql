-- POST /payment-requests/{id}/send: internal/invoice Store.Send (lock the
-- row, queue the message, save the row, count the day's sends of its link,
-- read it back, append the event; its
-- deliveries are the webhook worker's, later), all in one transaction. Invoices as in get.sql: a random one each time.
-- The UPDATE writes the row's values back, as Store.update does with the
-- values it read (here from the row itself: pgbench variables hold no NULL).
-- Not here: the server's delivery worker, which sends the queued messages.
\set n random(1, :samples)
BEGIN;
SELECT i.id, i.organization_id, i.merchant_account_id, i.invoice_number, i.po_number,
		i.amount::text AS amount, i.amount_paid::text AS amount_paid, i.amount_refunded::text AS amount_refunded, i.customer_name, i.customer_company, i.customer_email,
		i.customer_phone, i.delivery, i.sent_via, i.sent_at, i.send_problem, i.memo, i.due_date, i.line_count, i.tax_amount::text,
		i.status, i.failed_attempts, i.problem, i.paid_at, i.level3_sent, i.created_at, i.created_by_name,
		i.cancelled_at, i.cancelled_by_name, i.customer_id, i.scheduled_send_at, i.reminders, i.reminders_sent, i.last_reminded_at,
		i.version
	FROM invoices i WHERE i.id = bench_sample_invoice(:n) AND i.organization_id = :org FOR UPDATE OF i;
SELECT ma.id, ma.organization_id, ma.location_id, ma.mid, l.name AS location, l.time_zone, l.status AS location_status
	FROM merchant_accounts ma JOIN locations l ON l.id = ma.location_id WHERE ma.id = ANY(bench_sample_mids(:n)::uuid[]);
SELECT id, prefers FROM customers WHERE id = ANY(bench_sample_customers(:n)::uuid[]) AND prefers IS NOT NULL;
INSERT INTO outbox
		(id, organization_id, invoice_id, channel, recipient, next_attempt_at, created_at)
		VALUES (gen_random_uuid(), :org, bench_sample_invoice(:n), 'email', bench_sample_email(:n), now(), now());
UPDATE invoices SET amount_paid = amount_paid, sent_via = 'email', sent_at = now(), send_problem = NULL, status = status,
			failed_attempts = 0, problem = NULL, paid_at = NULL, level3_sent = false, cancelled_at = NULL,
			cancelled_by_name = NULL, amount_refunded = amount_refunded, scheduled_send_at = NULL, reminders_sent = reminders_sent,
			last_reminded_at = last_reminded_at
		WHERE id = bench_sample_invoice(:n);
SELECT count(*), min(created_at) FROM outbox
		WHERE invoice_id = bench_sample_invoice(:n) AND kind = 'pay_link' AND created_at > now() - interval '24 hours';
SELECT i.id, i.organization_id, i.merchant_account_id, i.invoice_number, i.po_number,
		i.amount::text, i.amount_paid::text, i.amount_refunded::text, i.customer_name, i.customer_company, i.customer_email,
		i.customer_phone, i.delivery, i.sent_via, i.sent_at, i.send_problem, i.memo, i.due_date, i.line_count, i.tax_amount::text,
		i.status, i.failed_attempts, i.problem, i.paid_at, i.level3_sent, i.created_at, i.created_by_name,
		i.cancelled_at, i.cancelled_by_name, i.customer_id, i.scheduled_send_at, i.reminders, i.reminders_sent, i.last_reminded_at,
		i.version,
		(SELECT json_agg(json_build_array(il.description, il.quantity::text, il.unit_cost::text, il.uom,
				il.commodity_code, il.upc, il.tax_rate::text) ORDER BY il.position)
			FROM invoice_lines il WHERE il.invoice_id = i.id),
		(SELECT json_agg(json_build_array(r.id, r.amount::text, r.received_at, r.method, r.reference, r.created_at)
				ORDER BY r.received_at, r.id)
			FROM recorded_payments r WHERE r.invoice_id = i.id)
	FROM invoices i WHERE i.id = bench_sample_invoice(:n) AND i.organization_id = :org;
SELECT ma.id, ma.organization_id, ma.location_id, ma.mid, l.name AS location, l.time_zone, l.status AS location_status
	FROM merchant_accounts ma JOIN locations l ON l.id = ma.location_id WHERE ma.id = ANY(bench_sample_mids(:n)::uuid[]);
SELECT id, prefers FROM customers WHERE id = ANY(bench_sample_customers(:n)::uuid[]) AND prefers IS NOT NULL;
SELECT id, amount::text, ret_ref, card_brand, last_four, payer_name, created_at,
			level3_sent, saved_card, amount_refunded::text
		FROM card_payments
		WHERE organization_id = :org AND invoice_id = bench_sample_invoice(:n) AND kind = 'sale' AND status = 'approved'
		ORDER BY created_at, id;
SELECT customer_id, id, card_brand, last_four, expiry, saved_at, saved_by_name, charge_consent_at
		FROM saved_cards
		WHERE organization_id = :org AND customer_id = ANY(bench_sample_customers(:n)::uuid[])
		ORDER BY saved_at DESC, id;
WITH e AS (
		INSERT INTO events (id, organization_id, type, data, created_at) VALUES (gen_random_uuid(), :org, 'invoice.sent', :eventdata, now()) RETURNING id
	)
	INSERT INTO events_to_fan_out (event_id) SELECT id FROM e WHERE NOT false::boolean;
COMMIT;
