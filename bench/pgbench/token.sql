-- POST /oauth/token: count the address's request, then read the key.
-- :address is new for every transaction, as for the HTTP load (each request
-- comes from its own X-Forwarded-For address); :window is the run's minute.
\set address random(1, 2000000000)
INSERT INTO token_requests (address, window_start, requests) VALUES (:address, :window, 1)
		ON CONFLICT (address, window_start) DO UPDATE SET requests = token_requests.requests + 1
		WHERE token_requests.requests < 30
		RETURNING requests;
SELECT k.secret_fingerprint, k.organization_id, k.permissions, k.revoked_at IS NOT NULL AS revoked, o.status
		FROM api_keys k JOIN organizations o ON o.id = k.organization_id
		WHERE k.id = :key;
UPDATE api_keys SET last_used_at = now() WHERE id = :key;
