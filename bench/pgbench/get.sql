-- GET /payment-requests/{id}: internal/invoice Store.Get, one statement.
-- Each transaction reads a random invoice of bench_sample, named inside the
-- statement (bench/load.sql), as the HTTP load takes a random one each time.
\set n random(1, :samples)
SELECT i.id, i.organization_id, i.merchant_account_id, ma.mid, l.name, i.invoice_number, i.po_number,
		i.amount::text, i.amount_paid::text, i.amount_refunded::text, i.customer_name, i.customer_company, i.customer_email,
		i.customer_phone, i.delivery, i.sent_via, i.sent_at, i.send_problem, i.memo, i.due_date, i.line_count,
		i.status, i.failed_attempts, i.problem, i.paid_at, i.level3_sent, i.created_at, i.created_by_name,
		i.cancelled_at, i.cancelled_by_name, cp.prefers, i.scheduled_send_at, i.reminders, i.reminders_sent, i.last_reminded_at,
		(SELECT json_agg(json_build_array(il.description, il.quantity::text, il.unit_cost::text, il.uom,
				il.commodity_code, il.upc) ORDER BY il.position)
			FROM invoice_lines il WHERE il.invoice_id = i.id),
		(SELECT json_agg(json_build_array(p.id, p.amount, p.ret_ref, p.card_brand, p.last_four, p.payer_name,
				p.paid_at, p.level3_sent, p.saved_card, p.amount_refunded, p.method, p.reference, p.recorded_at)
				ORDER BY p.paid_at, p.id)
			FROM (SELECT c.id, c.amount::text AS amount, c.ret_ref, c.card_brand, c.last_four, c.payer_name,
					c.created_at AS paid_at, c.level3_sent::text AS level3_sent, c.saved_card::text AS saved_card,
					c.amount_refunded::text AS amount_refunded, 'card' AS method, NULL AS reference, c.created_at AS recorded_at
				FROM card_payments c WHERE c.invoice_id = i.id AND c.kind = 'sale' AND c.status = 'approved'
				UNION ALL
				SELECT r.id, r.amount::text, NULL, NULL, NULL, NULL, r.received_at, 'false', 'false', '0.00', r.method,
					r.reference, r.created_at
				FROM recorded_payments r WHERE r.invoice_id = i.id) p),
		(SELECT json_agg(json_build_array(sc.id, sc.card_brand, sc.last_four, sc.expiry, sc.saved_at,
				sc.saved_by_name) ORDER BY sc.saved_at DESC, sc.id)
			FROM saved_cards sc WHERE sc.organization_id = i.organization_id AND sc.customer_email = lower(i.customer_email))
	FROM invoices i
	JOIN merchant_accounts ma ON ma.id = i.merchant_account_id
	JOIN locations l ON l.id = ma.location_id
	LEFT JOIN customer_preferences cp ON cp.organization_id = i.organization_id AND cp.customer_email = lower(i.customer_email) WHERE i.id = bench_sample_invoice(:n) AND i.organization_id = :org;
