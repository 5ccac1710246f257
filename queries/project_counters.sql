-- name: ProjectCounterNextHandoffSeq :one
-- The next handoff event number of a project. The row stays locked until
-- the transaction ends, so numbers are handed out in commit order.
INSERT INTO project_counters (project, handoff_seq) VALUES (@project, 1)
ON CONFLICT (project) DO UPDATE SET handoff_seq = project_counters.handoff_seq + 1
RETURNING handoff_seq;

-- name: ProjectCounterAdvanceHead :one
-- Advances the project's head: every write of a project calls it in its
-- transaction, so writes of one project are ordered by this row's lock.
INSERT INTO project_counters (project, write_seq) VALUES (@project, 1)
ON CONFLICT (project) DO UPDATE SET write_seq = project_counters.write_seq + 1
RETURNING write_seq;

-- name: ProjectCounterHead :one
SELECT coalesce((SELECT write_seq FROM project_counters WHERE project = @project), 0)::bigint AS write_seq;
