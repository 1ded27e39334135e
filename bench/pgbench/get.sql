-- GET /payment-requests/{id}: internal/invoice Store.Get, in one read-only
-- snapshot: the invoice with its lines and recorded payments (invoice's),
-- then its card sales and the customer's saved cards (payment's).
-- Each transaction reads a random invoice of bench_sample, named inside the
-- statement (bench/load.sql), as the HTTP load takes a random one each time.
\set n random(1, :samples)
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
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
COMMIT;
