-- GET /payment-requests?limit=25&cursor=…: internal/invoice Store.List, page 1,000 (keyset after the harness's cursor).
SELECT i.id, i.organization_id, i.merchant_account_id, i.invoice_number, i.po_number,
		i.amount::text, i.amount_paid::text, i.amount_refunded::text, i.customer_name, i.customer_company, i.customer_email,
		i.customer_phone, i.delivery, i.sent_via, i.sent_at, i.send_problem, i.memo, i.due_date, i.line_count, i.tax_amount::text,
		i.status, i.failed_attempts, i.problem, i.paid_at, i.level3_sent, i.created_at, i.created_by_name,
		i.cancelled_at, i.cancelled_by_name, i.customer_id, i.scheduled_send_at, i.reminders, i.reminders_sent, i.last_reminded_at,
		i.version
	FROM invoices i
	WHERE i.organization_id = :org
		AND (i.created_at, i.id) < (:after_at::timestamptz, :after_id::uuid)
	ORDER BY i.created_at DESC, i.id DESC
	LIMIT 26;
SELECT ma.id, ma.organization_id, ma.location_id, ma.mid, l.name AS location, l.time_zone, l.status AS location_status
	FROM merchant_accounts ma JOIN locations l ON l.id = ma.location_id WHERE ma.id = ANY(:mids::uuid[]);
SELECT id, prefers FROM customers WHERE id = ANY(:page_customers::uuid[]) AND prefers IS NOT NULL;
