-- POST /oauth/token: count the address's request, then read the key and its
-- organization's status (directory's).
-- :address is new for every transaction, as for the HTTP load (each request
-- comes from its own X-Forwarded-For address); :window is the run's minute.
\set address random(1, 2000000000)
INSERT INTO token_requests (address, window_start, requests) VALUES (:address, :window, 1)
		ON CONFLICT (address, window_start) DO UPDATE SET requests = token_requests.requests + 1
		WHERE token_requests.requests < 30
		RETURNING requests;
SELECT secret_fingerprint, organization_id, permissions, revoked_at IS NOT NULL AS revoked
		FROM api_keys WHERE id = :key;
SELECT id, name, kind, status, logo_url, slug, created_at FROM organizations WHERE id = :org;
UPDATE api_keys SET last_used_at = now() WHERE id = :key;
