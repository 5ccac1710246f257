-- name: IdempotencyKeyDeleteExpired :execrows
DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours';

-- name: IdempotencyKeyGet :one
SELECT * FROM idempotency_keys
WHERE agent_id = @agent_id AND key = @key AND created_at >= now() - interval '24 hours';

-- name: IdempotencyKeyUpsert :exec
-- An expired row for the same key is replaced: keys are kept 24 hours.
INSERT INTO idempotency_keys (agent_id, key, request_sha256, status, content_type, headers, body, mac)
VALUES (@agent_id, @key, @request_sha256, @status, @content_type, @headers, @body, @mac)
ON CONFLICT (agent_id, key) DO UPDATE
    SET request_sha256 = EXCLUDED.request_sha256, status = EXCLUDED.status,
        content_type = EXCLUDED.content_type, headers = EXCLUDED.headers,
        body = EXCLUDED.body, mac = EXCLUDED.mac, created_at = now();

-- name: IdempotencyKeyTryLock :one
-- Claims (agent, key) for this transaction; false while another attempt runs.
SELECT pg_try_advisory_xact_lock(hashtextextended(@agent_key::text, 0)) AS locked;

-- name: IdempotencyKeyPage :many
-- A page of the stored answers by (agent, key), for the audit's check of
-- their HMACs.
SELECT * FROM idempotency_keys
WHERE (agent_id, key) > (@after_agent::text, @after_key::text)
ORDER BY agent_id, key
LIMIT @lim;
