-- name: OutcomeGetMany :many
SELECT * FROM packet_outcomes WHERE project = @project AND id = ANY(@ids::text[]);

-- name: OutcomeIDPage :many
SELECT id FROM packet_outcomes WHERE project = @project AND id > @after_id ORDER BY id LIMIT @lim;

-- name: OutcomeInsert :one
INSERT INTO packet_outcomes (
    project, id, packet_id, seq, created_by, status, source, score, label, note, answer, answer_sha256, used
) VALUES (
    @project, @id, @packet_id, @seq, @created_by, @status, @source, sqlc.narg('score'), @label, @note,
    sqlc.narg('answer'), sqlc.narg('answer_sha256'), @used
)
RETURNING *;

-- name: OutcomeLatestBySource :many
-- The newest outcome of each source of a packet.
SELECT DISTINCT ON (source) * FROM packet_outcomes
WHERE project = @project AND packet_id = @packet_id
ORDER BY source, seq DESC;

-- name: OutcomeListByPacket :many
-- A packet's outcomes, oldest first, after seq.
SELECT * FROM packet_outcomes
WHERE project = @project AND packet_id = @packet_id AND seq > @after_seq
ORDER BY seq
LIMIT @lim;

-- name: OutcomeLockPacket :exec
-- Serialises the outcome writes of one packet, so that each counts those
-- before it (OutcomeCount) and none goes past the limit.
SELECT pg_advisory_xact_lock(hashtextextended(@project::text || '/' || @packet_id::text, 36));

-- name: OutcomeCount :one
SELECT count(*)::integer FROM packet_outcomes WHERE project = @project AND packet_id = @packet_id;
