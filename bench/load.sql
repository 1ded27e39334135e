-- The benchmark's data, made in SQL (generate_series), not one API call per
-- invoice. Run by `make bench` on the bench cluster after the migrations:
--
--   psql "$DSN" -v invoices=1000000 -v others=50 -v other_invoices=1000 -f bench/load.sql
--
-- The organization under test, "Bench Merchant", gets :invoices invoices of 1
-- to 5 lines across 20 MIDs at 5 locations, spread over the two years before
-- 2026; :others more merchants get :other_invoices invoices each on one MID.
-- About a quarter of the invoices carry payments; one customer in four has a
-- saved card (one in eight two), one in ten a stated preference; every
-- customer is a row of customers, which its invoices and saved cards name. Every id is
-- derived from a name (bench_uuid), so the harness and the pgbench scripts know
-- them without asking; invoice ids are time-ordered like the server's UUIDv7.
--
-- The script starts from an empty schema: the harness drops and re-creates the
-- database when the data it finds is not what this file makes.

\set ON_ERROR_STOP on
SET synchronous_commit = off;
SET maintenance_work_mem = '512MB';

BEGIN;

-- A UUID (version 4, RFC 9562 variant, as the API's uuid format wants) made
-- from a name, so the same name always gives the same id.
CREATE FUNCTION bench_uuid(name text) RETURNS uuid IMMUTABLE LANGUAGE sql
    RETURN (substr(md5(name), 1, 12) || '4' || substr(md5(name), 14, 3) || '8' || substr(md5(name), 18, 15))::uuid;

-- One row per organization: n = 0 is the one under test.
CREATE TEMP TABLE bench_orgs ON COMMIT DROP AS
SELECT n,
       bench_uuid('bench-org-' || n) AS id,
       CASE WHEN n = 0 THEN 'Bench Merchant' ELSE 'Other Merchant ' || n END AS name,
       CASE WHEN n = 0 THEN :invoices ELSE :other_invoices END AS invoices,
       CASE WHEN n = 0 THEN 20 ELSE 1 END AS mids,
       CASE WHEN n = 0 THEN 5 ELSE 1 END AS locations
FROM generate_series(0, :others) AS n;

INSERT INTO organizations (id, name, kind, status, created_at)
SELECT id, name, 'merchant', 'active', '2023-12-01' FROM bench_orgs;

INSERT INTO people (id, email, name)
SELECT bench_uuid('bench-person-' || n), 'owner' || n || '@bench.example.com', 'Owner of ' || name FROM bench_orgs;

INSERT INTO memberships (id, organization_id, person_id, role, permissions, accepted_at)
SELECT bench_uuid('bench-owner-' || n), id, bench_uuid('bench-person-' || n), 'Owner',
       '{payments.view,payments.create,payments.refund,locations.view,accounts.view,events.view,webhooks.manage}', now()
FROM bench_orgs;

INSERT INTO locations (id, organization_id, name, time_zone, status, receipt_name, address_line1, city, state,
                       postal_code, phone, email)
SELECT bench_uuid('bench-location-' || o.n || '-' || l), o.id, 'Location ' || l, 'America/Chicago', 'active',
       o.name || ' ' || l, l || ' Main St', 'Austin', 'TX', '78701', '+15125550100', 'billing@bench.example.com'
FROM bench_orgs o, generate_series(0, o.locations - 1) AS l;

-- MID m of an organization is at location m % locations.
INSERT INTO merchant_accounts (id, organization_id, location_id, mid)
SELECT bench_uuid('bench-mid-' || o.n || '-' || m), o.id, bench_uuid('bench-location-' || o.n || '-' || (m % o.locations)),
       (496100000000 + o.n * 100 + m)::text
FROM bench_orgs o, generate_series(0, o.mids - 1) AS m;

-- Invoice i (1-based) of organization o: created every 60 s from 2024-01-01
-- (other organizations' spread over the same years), k = 1 + i % 5 lines;
-- line j (0-based) is (1 + (i + j) % 4) × ((i * 7 + j * 13) % 10000 / 100 + 1).
-- Status by i % 20: 0–13 open, 14–15 part_paid, 16–18 paid, 19 cancelled.
CREATE TEMP TABLE bench_invoices ON COMMIT DROP AS
SELECT o.n AS org_n, o.id AS org_id, i, o.mids,
       CASE WHEN o.n = 0 THEN timestamptz '2024-01-01 00:00:00+00' + i * interval '60 seconds'
            ELSE timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second' * (60000000 / greatest(o.invoices, 1))
       END + (i % 997) * interval '1 millisecond' AS created_at,
       1 + i % 5 AS k,
       i % 20 AS s,
       i % 20000 AS customer
FROM bench_orgs o, generate_series(1, o.invoices) AS i;

-- Customers c of each organization (those its invoices name), with the
-- name, company and phone their invoices carry; one in ten stated a
-- preference. Customer c of organization o is bench_uuid('bench-customer-o-c').
CREATE TEMP TABLE bench_customers ON COMMIT DROP AS
SELECT o.n AS org_n, o.id AS org_id, c
FROM bench_orgs o, generate_series(0, least(o.invoices, 19999)) AS c;

INSERT INTO customers (id, organization_id, email, name, company, phone, prefers, created_at, updated_at)
SELECT bench_uuid('bench-customer-' || org_n || '-' || c), org_id, 'customer' || c || '@example.com', 'Customer ' || c,
       CASE WHEN c % 3 = 0 THEN 'Company ' || c END,
       CASE WHEN c % 10 < 3 THEN '+1512555' || lpad((c % 10000)::text, 4, '0') END,
       CASE WHEN c % 20 = 0 THEN 'text' WHEN c % 10 = 0 THEN 'email' END,
       timestamptz '2023-12-15 00:00:00+00' + c * interval '1 second', timestamptz '2024-06-01 00:00:00+00'
FROM bench_customers;

CREATE TEMP TABLE bench_totals ON COMMIT DROP AS
SELECT b.org_n, b.i,
       (SELECT sum(round((1 + (b.i + j) % 4) * ((b.i * 7 + j * 13) % 10000 / 100.0 + 1), 2))
        FROM generate_series(0, b.k - 1) AS j) AS amount
FROM bench_invoices b;

INSERT INTO invoices (id, organization_id, merchant_account_id, invoice_number, po_number, amount, amount_paid,
                      customer_name, customer_company, customer_email, customer_phone, delivery, sent_via, sent_at,
                      memo, due_date, line_count, status, paid_at, created_at, created_by_name, cancelled_at,
                      cancelled_by_name, customer_id)
SELECT
    -- UUIDv7 layout: 48 bits of milliseconds, version 7, variant 8, then hash bits.
    (lpad(to_hex((extract(epoch FROM b.created_at) * 1000)::bigint), 12, '0') || '7'
        || substr(md5('bench-invoice-' || b.org_n || '-' || b.i), 1, 3) || '8'
        || substr(md5('bench-invoice-' || b.org_n || '-' || b.i), 4, 15))::uuid,
    b.org_id,
    bench_uuid('bench-mid-' || b.org_n || '-' || (b.i % b.mids)),
    'INV-' || lpad(b.i::text, 7, '0'),
    CASE WHEN b.i % 3 = 0 THEN 'PO-' || b.i END,
    t.amount,
    CASE b.s WHEN 14 THEN round(t.amount / 2, 2) WHEN 15 THEN round(t.amount / 2, 2)
             WHEN 16 THEN t.amount WHEN 17 THEN t.amount WHEN 18 THEN t.amount ELSE 0 END,
    'Customer ' || b.customer,
    CASE WHEN b.customer % 3 = 0 THEN 'Company ' || b.customer END,
    'customer' || b.customer || '@example.com',
    CASE WHEN b.customer % 10 < 3 THEN '+1512555' || lpad((b.customer % 10000)::text, 4, '0') END,
    CASE WHEN b.customer % 10 = 0 THEN 'text' ELSE 'email' END,
    CASE WHEN b.customer % 10 = 0 THEN 'text' ELSE 'email' END,
    b.created_at + interval '2 seconds',
    CASE WHEN b.i % 4 = 0 THEN 'Thank you for your business.' END,
    (b.created_at + interval '30 days')::date,
    b.k,
    CASE WHEN b.s < 14 THEN 'open' WHEN b.s < 16 THEN 'part_paid' WHEN b.s < 19 THEN 'paid' ELSE 'cancelled' END,
    CASE WHEN b.s BETWEEN 16 AND 18 THEN b.created_at + interval '3 days' END,
    b.created_at,
    'Bench key',
    CASE WHEN b.s = 19 THEN b.created_at + interval '5 days' END,
    CASE WHEN b.s = 19 THEN 'Bench key' END,
    bench_uuid('bench-customer-' || b.org_n || '-' || b.customer)
FROM bench_invoices b JOIN bench_totals t USING (org_n, i)
ORDER BY b.created_at;

CREATE TEMP TABLE bench_ids ON COMMIT DROP AS
SELECT b.org_n, b.i, b.k, b.s, b.created_at,
       (lpad(to_hex((extract(epoch FROM b.created_at) * 1000)::bigint), 12, '0') || '7'
        || substr(md5('bench-invoice-' || b.org_n || '-' || b.i), 1, 3) || '8'
        || substr(md5('bench-invoice-' || b.org_n || '-' || b.i), 4, 15))::uuid AS id,
       b.org_id, t.amount
FROM bench_invoices b JOIN bench_totals t USING (org_n, i);

INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_cost, uom, commodity_code, upc)
SELECT b.id, j, 'Item ' || (b.i + j) % 500 || ' of the catalogue', 1 + (b.i + j) % 4,
       (b.i * 7 + j * 13) % 10000 / 100.0 + 1,
       CASE WHEN j % 2 = 0 THEN 'EA' END, CASE WHEN j % 3 = 0 THEN '43211503' END, NULL
FROM bench_ids b, generate_series(0, b.k - 1) AS j
ORDER BY b.id, j;

-- part_paid: one payment of half; paid: one payment, or two halves when i % 40 = 17.
INSERT INTO card_payments (id, organization_id, kind, status, merchant_account_id, invoice_id, amount, ret_ref,
                           card_brand, last_four, payer_name, created_at, level3_sent, saved_card)
SELECT bench_uuid('bench-payment-' || b.org_n || '-' || b.i || '-' || p), b.org_id, 'sale', 'approved',
       inv.merchant_account_id, b.id,
       CASE WHEN b.s IN (14, 15) THEN round(b.amount / 2, 2)
            WHEN b.i % 40 = 17 AND p = 0 THEN round(b.amount / 2, 2)
            WHEN b.i % 40 = 17 THEN b.amount - round(b.amount / 2, 2)
            ELSE b.amount END,
       lpad((b.i * 10 + p)::text, 12, '0'), 'VISA', '1111', 'Customer ' || b.i % 20000,
       b.created_at + interval '1 day' * (1 + p), b.i % 2 = 0, p = 0 AND b.i % 8 = 0
FROM bench_ids b JOIN invoices inv ON inv.id = b.id, generate_series(0, 1) AS p
WHERE b.s BETWEEN 14 AND 18 AND (p = 0 OR b.i % 40 = 17)
ORDER BY b.id, p;

-- Every payment already settled, as two years of history would be: one paid
-- deposit per MID and day (fees 2.9 % + 0.30 a sale), and each MID's batch
-- closed now. Otherwise the server's cutoff worker would settle the history
-- during the first measured run, and the run would pay for it.
CREATE TEMP TABLE bench_deposits ON COMMIT DROP AS
SELECT bench_uuid('bench-deposit-' || merchant_account_id || '-' || created_at::date) AS id, organization_id,
       merchant_account_id, created_at::date AS day, count(*) AS n, sum(amount) AS sales,
       sum(round(amount * 0.029 + 0.30, 2)) AS fees
FROM card_payments GROUP BY organization_id, merchant_account_id, created_at::date;

INSERT INTO deposits (id, organization_id, merchant_account_id, processor_ref, batch_date, expected_at, status, paid_at,
                      sales_count, sales_amount, refunds_count, refunds_amount, fees_amount, net_amount, created_at)
SELECT id, organization_id, merchant_account_id, NULL, day, day + 1, 'paid', day + 1 + time '12:00', n, sales, 0, 0,
       fees, sales - fees, day + time '23:00'
FROM bench_deposits;

UPDATE card_payments p SET deposit_id = d.id
FROM bench_deposits d WHERE d.merchant_account_id = p.merchant_account_id AND d.day = p.created_at::date;

INSERT INTO batch_closings (merchant_account_id, closed_until) SELECT id, now() FROM merchant_accounts;

INSERT INTO saved_cards (id, organization_id, customer_id, profile_id, account_id, card_brand, last_four, expiry,
                         saved_at, saved_by_name)
SELECT bench_uuid('bench-card-' || b.org_n || '-' || b.c || '-' || x), b.org_id, bench_uuid('bench-customer-' || b.org_n || '-' || b.c),
       'P' || b.org_n || '-' || b.c || '-' || x, 'A' || x, CASE WHEN x = 0 THEN 'VISA' ELSE 'MC' END,
       CASE WHEN x = 0 THEN '1111' ELSE '4444' END, '1229', timestamptz '2024-06-01 00:00:00+00' + b.c * interval '1 minute' + x * interval '1 day',
       'Customer ' || b.c
FROM bench_customers b, generate_series(0, 1) AS x
WHERE b.c % 4 = 2 AND (x = 0 OR b.c % 8 = 6);

-- What the harness reads back: the invoices it reads and sends (part paid,
-- with payments, of customers with saved cards, spread over the whole range:
-- invoice i = 40(n - 1) + 14 of the organization under test is sample n),
-- and a stamp saying which data this is. The pgbench scripts pick a random n
-- and name its invoice with bench_sample_invoice(n) inside the statement, as
-- the HTTP load picks a random sample each time: both read the same rows
-- (about 6 µs a call, measured with pgbench: SELECT bench_sample_invoice(:n)
-- against SELECT :n::int).
-- (Bodies of immutable operations only, in integers: PostgreSQL inlines
-- such a function into the statement instead of calling it. Invoice i's
-- created_at above is 2024-01-01, 1,704,067,200,000 ms, + i minutes + i % 997 ms.)
CREATE FUNCTION bench_sample_invoice(n int) RETURNS uuid IMMUTABLE LANGUAGE sql AS $$
    SELECT (lpad(to_hex(1704067200000 + (40 * (n - 1) + 14) * 60000::bigint + (40 * (n - 1) + 14) % 997), 12, '0')
            || '7' || substr(md5('bench-invoice-0-' || (40 * (n - 1) + 14)::text), 1, 3) || '8'
            || substr(md5('bench-invoice-0-' || (40 * (n - 1) + 14)::text), 4, 15))::uuid
$$;
CREATE FUNCTION bench_sample_email(n int) RETURNS text IMMUTABLE LANGUAGE sql AS $$
    SELECT 'customer' || ((40 * (n - 1) + 14) % 20000)::text || '@example.com'
$$;
-- The customer of sample invoice n, as an array (its stated preference and
-- saved cards are read by it).
CREATE FUNCTION bench_sample_customers(n int) RETURNS uuid[] IMMUTABLE LANGUAGE sql AS $$
    SELECT ARRAY[bench_uuid('bench-customer-0-' || ((40 * (n - 1) + 14) % 20000)::text)]
$$;

-- The invoices a create makes, by pgbench as by the HTTP load: customer n
-- (0–19,999) on MID n % 20, the pairing of the invoices above, so that a
-- list page read after a create run meets as many MIDs and customers under
-- pgbench as under payreq. (A create run of one MID and one customer had
-- made pgbench's first page 11 % cheaper in instructions than payreq's, the
-- plan's Memoize nodes answering 25 of 26 lookups.)
CREATE FUNCTION bench_customer_email(n int) RETURNS text IMMUTABLE LANGUAGE sql AS $$
    SELECT 'customer' || n::text || '@example.com'
$$;
CREATE FUNCTION bench_customer_mid(n int) RETURNS uuid IMMUTABLE LANGUAGE sql AS $$
    SELECT bench_uuid('bench-mid-0-' || (n % 20)::text)
$$;

-- Customer n of the organization under test, alone and as an array, and
-- the q that finds it by name (from n = 2,000 on, it alone).
CREATE FUNCTION bench_customer_id(n int) RETURNS uuid IMMUTABLE LANGUAGE sql AS $$
    SELECT bench_uuid('bench-customer-0-' || n::text)
$$;
CREATE FUNCTION bench_customer_ids(n int) RETURNS uuid[] IMMUTABLE LANGUAGE sql AS $$
    SELECT ARRAY[bench_customer_id(n)]
$$;
CREATE FUNCTION bench_customer_q(n int) RETURNS text IMMUTABLE LANGUAGE sql AS $$
    SELECT '%Customer ' || n::text || '%'
$$;

-- The MIDs a read of sample invoice n asks directory for
-- (directory.AccountsByID): its one MID, its customer's (below), as an array.
CREATE FUNCTION bench_sample_mids(n int) RETURNS uuid[] IMMUTABLE LANGUAGE sql AS $$
    SELECT ARRAY[bench_customer_mid((40 * (n - 1) + 14) % 20000)]
$$;

-- The MIDs a read of customer n's invoice asks directory for
-- (directory.AccountsByID): its one MID, as an array.
CREATE FUNCTION bench_customer_mids(n int) RETURNS uuid[] IMMUTABLE LANGUAGE sql AS $$
    SELECT ARRAY[bench_customer_mid(n)]
$$;

CREATE TABLE bench_sample (n int PRIMARY KEY, invoice_id uuid NOT NULL, customer_email text NOT NULL);
INSERT INTO bench_sample (n, invoice_id, customer_email)
SELECT (i - 14) / 40 + 1, id, 'customer' || (i % 20000) || '@example.com' FROM bench_ids
WHERE org_n = 0 AND s IN (14, 15) AND (i % 20000) % 8 = 6;
DO $$
BEGIN
    IF (SELECT count(*) FROM bench_sample) <> (SELECT max(n) FROM bench_sample)
        OR EXISTS (SELECT 1 FROM bench_sample
                   WHERE invoice_id <> bench_sample_invoice(n) OR customer_email <> bench_sample_email(n))
        OR EXISTS (SELECT 1 FROM bench_sample b JOIN invoices i ON i.id = b.invoice_id
                   WHERE ARRAY[i.merchant_account_id] <> bench_sample_mids(b.n)) THEN
        RAISE 'bench_sample_invoice, bench_sample_email or bench_sample_mids disagrees with the invoices made above';
    END IF;
END $$;

CREATE TABLE bench_stamp (invoices int NOT NULL, others int NOT NULL, other_invoices int NOT NULL, script text NOT NULL);
INSERT INTO bench_stamp VALUES (:invoices, :others, :other_invoices, :'script_hash');

COMMIT;

VACUUM (ANALYZE);
