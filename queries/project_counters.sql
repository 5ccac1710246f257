-- name: ProjectCounterNextHandoffSeq :one
-- The next handoff event number of a project. The row stays locked until
-- the transaction ends, so numbers are handed out in commit order.
INSERT INTO project_counters (project, handoff_seq) VALUES (@project, 1)
ON CONFLICT (project) DO UPDATE SET handoff_seq = project_counters.handoff_seq + 1
RETURNING handoff_seq;
