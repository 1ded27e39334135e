-- GET /customers?limit=25&q=Customer%20n: internal/customer Store.List, in
-- one read-only snapshot: the page of customers whose name, company or
-- email holds the text (each by its trigram index), then their invoices'
-- totals (invoice's) and saved cards (payment's). Customer n of the
-- organization under test (bench/load.sql), from 2,000 on: the one who
-- holds that name.
\set n random(2000, 19999)
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SELECT c.id, c.organization_id, c.email, c.name, c.company, c.phone, c.address, c.tax_exempt, c.notes,
	c.prefers, c.created_at, c.updated_at FROM customers c
	WHERE c.organization_id = :org AND (c.name ILIKE bench_customer_q(:n) OR c.company ILIKE bench_customer_q(:n) OR c.email ILIKE bench_customer_q(:n))
	ORDER BY c.created_at DESC, c.id DESC
	LIMIT 26;
SELECT customer_id, count(*),
			coalesce(sum(amount - amount_paid) FILTER (WHERE status IN ('open', 'part_paid')), 0)::numeric(13, 2)::text
		FROM invoices WHERE organization_id = :org AND customer_id = ANY(bench_customer_ids(:n)::uuid[])
		GROUP BY customer_id;
SELECT customer_id, id, card_brand, last_four, expiry, saved_at, saved_by_name, charge_consent_at
		FROM saved_cards
		WHERE organization_id = :org AND customer_id = ANY(bench_customer_ids(:n)::uuid[])
		ORDER BY saved_at DESC, id;
COMMIT;
