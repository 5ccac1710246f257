-- name: PacketGet :one
SELECT * FROM packets WHERE project = @project AND id = @id;

-- name: PacketInsert :exec
INSERT INTO packets (
    project, id, created_at, created_by, target_role, task_id, request, predecessors, format, tokenizer,
    rendered, rendered_sha256, token_budget, tokens_used, gaps, provenance_summary, snapshot,
    pipeline, budget_cutoff, gaps_more, render_version, ablation_of
) VALUES (
    @project, @id, @created_at, @created_by, @target_role, @task_id, @request, @predecessors, @format, @tokenizer,
    @rendered, @rendered_sha256, @token_budget, @tokens_used, @gaps, @provenance_summary, @snapshot,
    @pipeline, @budget_cutoff, @gaps_more, @render_version, sqlc.narg('ablation_of')
);

-- name: PacketAblationIDs :many
-- The ablations made of a packet, oldest first, at most @max.
SELECT id FROM packets
WHERE project = @project AND ablation_of = @packet_id
ORDER BY created_at, id
LIMIT @max;

-- name: PacketList :many
-- Newest first; the cursor is (created_at, id) of the last row seen.
SELECT * FROM packets
WHERE project = @project
  AND (sqlc.narg('task_id')::text IS NULL OR task_id = sqlc.narg('task_id'))
  AND (sqlc.narg('target_role')::text IS NULL OR target_role = sqlc.narg('target_role'))
  AND (sqlc.narg('agent')::text IS NULL OR created_by = sqlc.narg('agent'))
  AND (sqlc.narg('since')::timestamptz IS NULL OR created_at >= sqlc.narg('since'))
  AND (NOT @has_cursor::boolean OR (created_at, id) < (@cursor_time::timestamptz, @cursor_id::text))
ORDER BY created_at DESC, id DESC
LIMIT @max;

-- name: PacketReadPoint :one
-- The time and snapshot of an assembly's read transaction, and its
-- isolation, which must be repeatable read for the snapshot to hold.
SELECT now()::timestamptz AS now, pg_current_snapshot()::text AS snapshot,
       current_setting('transaction_isolation')::text AS isolation;

-- name: PacketListTask :many
-- Every packet of a task, oldest first, for the task's timeline.
SELECT id, created_at, created_by, target_role, request FROM packets
WHERE project = @project AND task_id = @task_id
ORDER BY created_at, id;
