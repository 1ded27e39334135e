-- POST /payment-requests (3 lines, send=false, Idempotency-Key): the SQL
-- internal/invoice Store.Create runs: the key's claim (idempotency.Claim), the MID's check
-- (directory.AccountsByID), the customer of its email (customer.Ensure), the invoice with its
-- lines (one statement), the invoice read back in the transaction (the
-- answer and the event's data), then the event alone (:eventdata stands for
-- the invoice's JSON; the webhook worker writes its deliveries later, out of
-- this transaction). The server makes the
-- invoice id (UUIDv7), pay token and time in Go; here gen_random_uuid(), :k
-- and now() stand for them, and the key's claim returns the id. Customer :n
-- on its MID, as the HTTP load's creates (bench/load.sql).
\set k random(1, 9000000000000000)
\set n random(0, 19999)
BEGIN;
INSERT INTO idempotency_keys (organization_id, operation, key, request_hash, result_id, created_at)
		VALUES (:org, 'invoice.create', :k, :hash, gen_random_uuid(), now())
		ON CONFLICT (organization_id, operation, key) DO UPDATE
			SET request_hash = excluded.request_hash, result_id = excluded.result_id, created_at = excluded.created_at
			WHERE idempotency_keys.created_at <= now() - interval '24 hours'
		RETURNING result_id AS id \gset
SELECT ma.id, ma.organization_id, ma.location_id, ma.mid, l.name AS location, l.time_zone, l.status AS location_status
	FROM merchant_accounts ma JOIN locations l ON l.id = ma.location_id WHERE ma.id = ANY(bench_customer_mids(:n)::uuid[]);
WITH made AS (
			INSERT INTO customers AS c (id, organization_id, email, name, company, phone, created_at, updated_at)
			VALUES (gen_random_uuid(), :org, bench_customer_email(:n), 'Dana Whitfield', NULL, NULL, now(), now())
			ON CONFLICT (organization_id, lower(email)) DO NOTHING
			RETURNING c.id, c.organization_id, c.email, c.name, c.company, c.phone, c.address, c.tax_exempt, c.notes,
	c.prefers, c.created_at, c.updated_at
		)
		SELECT * FROM made
		UNION ALL
		SELECT c.id, c.organization_id, c.email, c.name, c.company, c.phone, c.address, c.tax_exempt, c.notes,
	c.prefers, c.created_at, c.updated_at FROM customers c WHERE c.organization_id = :org AND lower(c.email) = lower(bench_customer_email(:n)) AND NOT EXISTS (SELECT FROM made);
WITH invoice AS (
	INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, po_number, amount,
					customer_name, customer_company, customer_email, customer_phone, delivery, memo, due_date,
					line_count, status, created_at, created_by_name, scheduled_send_at, reminders, tax_amount, customer_id)
				VALUES (:id::uuid, :org::uuid, bench_customer_mid(:n)::uuid, :k, NULL, '60.00'::numeric, 'Dana Whitfield', NULL, bench_customer_email(:n), NULL, 'email', NULL, NULL::date,
					3::integer, 'open', now()::timestamptz, 'bench', NULL::timestamptz, NULL::boolean, '0.00'::numeric, bench_customer_id(:n)::uuid)
				RETURNING id
			), lines AS (
				INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_cost, uom, commodity_code, upc, tax_rate)
				SELECT invoice.id, t.ord - 1, t.d, t.q::numeric, t.c::numeric, t.u, t.cc, t.upc, t.tr::numeric
				FROM invoice, unnest(:descs::text[], :qtys::text[], :costs::text[], :nulls::text[], :nulls::text[], :nulls::text[], :nulls::text[])
					WITH ORDINALITY AS t(d, q, c, u, cc, upc, tr, ord)
			)
			SELECT count(*) FROM invoice;
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
	FROM invoices i WHERE i.id = :id AND i.organization_id = :org;
SELECT ma.id, ma.organization_id, ma.location_id, ma.mid, l.name AS location, l.time_zone, l.status AS location_status
	FROM merchant_accounts ma JOIN locations l ON l.id = ma.location_id WHERE ma.id = ANY(bench_customer_mids(:n)::uuid[]);
SELECT id, prefers FROM customers WHERE id = ANY(bench_customer_ids(:n)::uuid[]) AND prefers IS NOT NULL;
SELECT id, amount::text, ret_ref, card_brand, last_four, payer_name, created_at,
			level3_sent, saved_card, amount_refunded::text
		FROM card_payments
		WHERE organization_id = :org AND invoice_id = :id AND kind = 'sale' AND status = 'approved'
		ORDER BY created_at, id;
SELECT customer_id, id, card_brand, last_four, expiry, saved_at, saved_by_name, charge_consent_at
		FROM saved_cards
		WHERE organization_id = :org AND customer_id = ANY(bench_customer_ids(:n)::uuid[])
		ORDER BY saved_at DESC, id;
WITH e AS (
		INSERT INTO events (id, organization_id, type, data, created_at) VALUES (gen_random_uuid(), :org, 'invoice.created', :eventdata, now()) RETURNING id
	)
	INSERT INTO events_to_fan_out (event_id) SELECT id FROM e WHERE NOT false::boolean;
COMMIT;
