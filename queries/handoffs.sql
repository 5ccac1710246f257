-- name: HandoffGet :one
SELECT * FROM handoffs WHERE project = @project AND id = @id;

-- name: HandoffGetMany :many
SELECT * FROM handoffs WHERE project = @project AND id = ANY(@ids::text[]);

-- name: HandoffInsert :one
INSERT INTO handoffs (
    project, id, task_id, workflow_run_id, rework_of, source_role, source_agent_id,
    target_role, target_permission, intent, packet_id, manifest, created_by
) VALUES (
    @project, @id, @task_id, @workflow_run_id, @rework_of, @source_role, @source_agent_id,
    @target_role, @target_permission, @intent, @packet_id, @manifest, @created_by
)
RETURNING *;

-- name: HandoffList :many
SELECT * FROM handoffs
WHERE project = @project
  AND (sqlc.narg('task_id')::text IS NULL OR task_id = sqlc.narg('task_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (sqlc.narg('target_role')::text IS NULL OR target_role = sqlc.narg('target_role'))
  AND (sqlc.narg('workflow_run_id')::text IS NULL OR workflow_run_id = sqlc.narg('workflow_run_id'))
  AND (NOT @has_cursor::boolean OR (created_at, id) < (@cursor_time::timestamptz, @cursor_id::text))
ORDER BY created_at DESC, id DESC
LIMIT @max;

-- name: HandoffLockTaskTarget :exec
-- Serialises the creates of one task's handoffs to one target role, so that
-- each new one sees (and supersedes) the one before.
SELECT pg_advisory_xact_lock(hashtextextended(@project::text || '/' || @task_id::text || '/' || @target_role::text, 42));

-- name: HandoffReworkAncestors :many
WITH RECURSIVE chain AS (
    SELECT h.*, 1 AS depth FROM handoffs h
    WHERE h.project = @project AND h.id = (SELECT rework_of FROM handoffs x WHERE x.project = @project AND x.id = @id)
    UNION ALL
    SELECT h.*, c.depth + 1 FROM handoffs h JOIN chain c ON h.project = c.project AND h.id = c.rework_of
    WHERE c.depth < 1000
)
SELECT project, id, status, source_role, target_role, created_at, depth FROM chain ORDER BY depth;

-- name: HandoffReworkDescendants :many
WITH RECURSIVE chain AS (
    SELECT h.*, 1 AS depth FROM handoffs h WHERE h.project = @project AND h.rework_of = @id
    UNION ALL
    SELECT h.*, c.depth + 1 FROM handoffs h JOIN chain c ON h.project = c.project AND h.rework_of = c.id
    WHERE c.depth < 1000
)
SELECT project, id, status, source_role, target_role, created_at, depth FROM chain ORDER BY depth, created_at, id;

-- name: HandoffSupersedePending :many
-- Every other pending handoff of the task to the target role.
UPDATE handoffs
SET status = 'superseded', superseded_by = @new_id::text, status_reason = 'superseded by ' || @new_id::text, updated_at = clock_timestamp()
WHERE project = @project AND task_id = @task_id AND target_role = @target_role AND status = 'pending' AND id <> @new_id::text
RETURNING *;

-- name: HandoffTransition :one
-- The conditional update that makes exactly one of racing transitions win.
UPDATE handoffs
SET status = @to_status, status_reason = @reason, updated_at = clock_timestamp()
WHERE project = @project AND id = @id AND status = 'pending'
RETURNING *;

-- name: HandoffNotify :exec
-- Wakes the live inboxes of every contextd process when the transaction commits.
SELECT pg_notify(@channel::text, @project::text);
