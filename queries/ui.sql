-- name: UISessionInsert :exec
INSERT INTO ui_sessions (token_sha256, agent_id, created_at, last_seen_at)
VALUES (@token_sha256, @agent_id, @now, @now);

-- name: UISessionGet :one
SELECT * FROM ui_sessions WHERE token_sha256 = @token_sha256;

-- name: UISessionTouch :exec
-- Moves the idle clock on; never back.
UPDATE ui_sessions SET last_seen_at = @now
WHERE token_sha256 = @token_sha256 AND last_seen_at < @now;

-- name: UISessionDelete :exec
DELETE FROM ui_sessions WHERE token_sha256 = @token_sha256;

-- name: UISessionDeleteAgent :execrows
DELETE FROM ui_sessions WHERE agent_id = @agent_id;

-- name: UISessionDeleteExpired :execrows
DELETE FROM ui_sessions WHERE last_seen_at < @idle_before OR created_at < @created_before;
