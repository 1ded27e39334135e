-- +goose Up

-- Every attempt to deliver an event to an endpoint, not only the last
-- (webhook_deliveries keeps that one): an integrator debugging a receiver
-- sees each try with its status code and error. The worker writes the row
-- in the statement that records the attempt on its delivery, so the two
-- never disagree. attempt is the delivery's count at that try (a
-- redelivery starts again from 1); status is the delivery's after it
-- (pending: tried again later). Attempts go with their delivery (an event
-- past its 30 days, a deleted endpoint).
CREATE TABLE webhook_attempts (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id     uuid NOT NULL,
    endpoint_id  uuid NOT NULL,
    attempt      integer NOT NULL,
    status       text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    status_code  integer,
    error        text,
    attempted_at timestamptz NOT NULL,
    FOREIGN KEY (event_id, endpoint_id) REFERENCES webhook_deliveries (event_id, endpoint_id) ON DELETE CASCADE
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (event_id, endpoint_id, attempted_at);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, attempted_at DESC, id DESC);

-- The last attempt of each delivery made before: the one that was kept.
INSERT INTO webhook_attempts (event_id, endpoint_id, attempt, status, status_code, error, attempted_at)
SELECT event_id, endpoint_id, attempts, status, last_status_code, last_error, last_attempt_at
FROM webhook_deliveries WHERE last_attempt_at IS NOT NULL;

-- +goose Down
DROP TABLE webhook_attempts;
