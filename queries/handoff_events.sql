-- name: HandoffEventInsert :one
INSERT INTO handoff_events (project, seq, handoff_id, event, from_status, to_status, actor, actor_role, reason)
VALUES (@project, @seq, @handoff_id, @event, @from_status, @to_status, @actor, @actor_role, @reason)
RETURNING *;

-- name: HandoffEventList :many
SELECT * FROM handoff_events WHERE project = @project AND handoff_id = @handoff_id ORDER BY seq;

-- name: HandoffEventListTask :many
-- Every event of every handoff of a task, oldest first.
SELECT e.*, h.source_role, h.target_role, h.task_id
FROM handoff_events e
JOIN handoffs h ON h.project = e.project AND h.id = e.handoff_id
WHERE e.project = @project AND h.task_id = @task_id
ORDER BY e.seq;

-- name: HandoffEventMaxSeq :one
SELECT coalesce(max(seq), 0)::bigint FROM handoff_events WHERE project = @project;

-- name: HandoffEventStream :many
-- Events after a sequence number for handoffs to one target role and from
-- one source role (any when null), with what an inbox needs of their
-- handoff.
SELECT e.*, h.task_id, h.source_role, h.source_agent_id, h.target_role, h.target_permission, h.intent
FROM handoff_events e
JOIN handoffs h ON h.project = e.project AND h.id = e.handoff_id
WHERE e.project = @project AND e.seq > @after
  AND (sqlc.narg('target_role')::text IS NULL OR h.target_role = sqlc.narg('target_role'))
  AND (sqlc.narg('source_role')::text IS NULL OR h.source_role = sqlc.narg('source_role'))
ORDER BY e.seq
LIMIT @max;

-- name: HandoffLastEvents :many
-- The last event of each of several handoffs: for a terminal handoff, the
-- one that set its status (who accepted, rejected or withdrew it).
SELECT DISTINCT ON (handoff_id) * FROM handoff_events
WHERE project = @project AND handoff_id = ANY(@handoff_ids::text[])
ORDER BY handoff_id, seq DESC;
