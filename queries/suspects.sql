-- name: OutcomeTotalsAdd :exec
-- Adds one outcome to the totals of its scopes (the role-wide one, and
-- its task's when the packet has a task), in key order: every outcome
-- write takes these row locks first, then its counts', in one order.
INSERT INTO outcome_totals (project, target_role, task_id, step_id, successes, failures, partials)
SELECT @project::text, @target_role::text, t.task_id, t.step_id, @successes::bigint, @failures::bigint, @partials::bigint
FROM (SELECT unnest(@task_ids::text[]) AS task_id, unnest(@step_ids::text[]) AS step_id) t
ORDER BY t.task_id, t.step_id
ON CONFLICT (project, target_role, task_id, step_id) DO UPDATE SET
    successes = outcome_totals.successes + EXCLUDED.successes,
    failures  = outcome_totals.failures + EXCLUDED.failures,
    partials  = outcome_totals.partials + EXCLUDED.partials;

-- name: OutcomeCountsAdd :exec
-- Adds one outcome to the counts of every entry its packet included, in
-- each of its scopes, in one statement whose rows come sorted by key, so
-- that concurrent writers sharing always-on entries lock the shared rows
-- in the same order.
INSERT INTO outcome_counts (project, target_role, task_id, step_id, subject_kind, subject_project, subject_key,
                            subject_version, successes, failures, partials)
SELECT @project::text, @target_role::text, t.task_id, t.step_id, r.subject_kind, r.subject_project, r.subject_key,
       r.subject_version, @successes::bigint, @failures::bigint, @partials::bigint
FROM (SELECT unnest(@task_ids::text[]) AS task_id, unnest(@step_ids::text[]) AS step_id) t
CROSS JOIN (
    SELECT DISTINCT pr.subject_kind, pr.subject_project, pr.subject_key, pr.subject_version
    FROM packet_records pr
    WHERE pr.project = @project AND pr.packet_id = @packet_id AND pr.decision = 'included'
) r
ORDER BY t.task_id, t.step_id, r.subject_kind, r.subject_project, r.subject_key, r.subject_version
ON CONFLICT (project, target_role, task_id, step_id, subject_kind, subject_project, subject_key, subject_version) DO UPDATE SET
    successes = outcome_counts.successes + EXCLUDED.successes,
    failures  = outcome_counts.failures + EXCLUDED.failures,
    partials  = outcome_counts.partials + EXCLUDED.partials;

-- name: OutcomeTotalsGet :many
-- A scope's totals: no row when it has no outcomes yet.
SELECT successes, failures, partials FROM outcome_totals
WHERE project = @project AND target_role = @target_role AND task_id = @task_id AND step_id = @step_id;

-- name: OutcomeCountsGet :many
-- The counts of some entries in a scope, one row per entry that has any.
SELECT c.subject_kind, c.subject_project, c.subject_key, c.subject_version, c.successes, c.failures, c.partials
FROM outcome_counts c
JOIN (SELECT unnest(@kinds::text[]) AS kind, unnest(@subject_projects::text[]) AS proj, unnest(@subject_keys::text[]) AS key,
             unnest(@versions::integer[]) AS version) e
    ON c.subject_kind = e.kind AND c.subject_project = e.proj AND c.subject_key = e.key AND c.subject_version = e.version
WHERE c.project = @project AND c.target_role = @target_role AND c.task_id = @task_id AND c.step_id = @step_id;

-- name: PacketLastSuccessOfTask :many
-- The newest packet of a task and role before a time, among its last 100,
-- with a success outcome; counterfactual packets aside.
SELECT p.id FROM (
    SELECT pk.project, pk.id, pk.created_at FROM packets pk
    WHERE pk.project = @project AND pk.task_id = @task_id AND pk.target_role = @target_role
      AND pk.created_at < @before AND pk.ablation_of IS NULL
    ORDER BY pk.created_at DESC, pk.id DESC
    LIMIT 100
) p
WHERE EXISTS (SELECT 1 FROM packet_outcomes o WHERE o.project = p.project AND o.packet_id = p.id AND o.status = 'success')
ORDER BY p.created_at DESC, p.id DESC
LIMIT 1;

-- name: PacketAblationsJudged :many
-- The ablations of a packet (the oldest max) that have an outcome, with
-- what each left out and whether one of its outcomes is a success and one
-- a failure or partial.
SELECT p.id, (p.request -> 'ablation' -> 'without')::jsonb AS without,
       bool_or(o.status = 'success')::boolean AS succeeded, bool_or(o.status <> 'success')::boolean AS failed
FROM packets p
JOIN packet_outcomes o ON o.project = p.project AND o.packet_id = p.id
WHERE p.project = @project AND p.ablation_of = @packet_id::text
GROUP BY p.project, p.id
ORDER BY min(p.created_at), p.id
LIMIT @max;
