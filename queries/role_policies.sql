-- name: RolePolicyUpsert :one
-- Sets a role's policy in a project, every member at once (NULL: not
-- set); the row counts its changes in version.
INSERT INTO role_policies (project, role, token_budget, budget_max, kinds, max_per_section, format, tokenizer, created_by, updated_by)
VALUES (@project, @role, sqlc.narg('token_budget'), @budget_max, sqlc.narg('kinds')::text[], sqlc.narg('max_per_section'),
        sqlc.narg('format'), sqlc.narg('tokenizer'), @agent, @agent)
ON CONFLICT (project, role) DO UPDATE
    SET token_budget = EXCLUDED.token_budget, budget_max = EXCLUDED.budget_max, kinds = EXCLUDED.kinds,
        max_per_section = EXCLUDED.max_per_section, format = EXCLUDED.format, tokenizer = EXCLUDED.tokenizer,
        updated_at = now(), updated_by = EXCLUDED.updated_by, version = role_policies.version + 1
RETURNING *;

-- name: RolePoliciesOf :many
-- A role's policy in each of the projects (a project and _shared): one
-- probe of the primary key each.
SELECT * FROM role_policies WHERE project = ANY(@projects::text[]) AND role = @role;

-- name: RolePolicyList :many
-- The roles after @after that have a policy (a row with a member) in one
-- of the projects, at most @max of them, with their rows in the projects.
WITH roles AS (
    SELECT DISTINCT rp.role FROM role_policies rp
    WHERE rp.project = ANY(@projects::text[]) AND rp.role > @after
      AND (rp.token_budget IS NOT NULL OR rp.kinds IS NOT NULL OR rp.max_per_section IS NOT NULL
           OR rp.format IS NOT NULL OR rp.tokenizer IS NOT NULL)
    ORDER BY rp.role
    LIMIT @max
)
SELECT p.* FROM role_policies p JOIN roles r ON r.role = p.role
WHERE p.project = ANY(@projects::text[])
ORDER BY p.role, p.project;

-- name: RolePolicyAuditPage :many
-- A page of a project's policy rows by role, for verification.
SELECT * FROM role_policies WHERE project = @project AND role > @after ORDER BY role LIMIT @lim;
