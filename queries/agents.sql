-- name: AgentCount :one
SELECT count(*) FROM agents;

-- name: AgentGetByKeyHash :one
SELECT * FROM agents WHERE key_sha256 = @key_sha256;

-- name: AgentGet :one
SELECT * FROM agents WHERE id = @id;

-- name: AgentInsert :one
INSERT INTO agents (id, name, role, permission, projects, key_sha256, created_by, max_authority)
VALUES (@id, @name, @role, @permission, @projects, @key_sha256, @created_by, @max_authority)
RETURNING *;

-- name: AgentGetForUpdate :one
SELECT * FROM agents WHERE id = @id FOR UPDATE;

-- name: AgentUpdate :one
UPDATE agents SET name = @name, role = @role, permission = @permission, projects = @projects,
    max_authority = @max_authority
WHERE id = @id
RETURNING *;

-- name: AgentList :many
SELECT * FROM agents
WHERE id > @after
ORDER BY id
LIMIT @max;

-- name: AgentRevoke :one
UPDATE agents SET revoked_at = coalesce(revoked_at, now())
WHERE id = @id
RETURNING *;

-- name: AgentBootstrapLock :exec
-- Serialises the first start of several servers, so one admin is made.
SELECT pg_advisory_xact_lock(hashtext('contextd.bootstrap'));

-- name: AgentRoleHeld :one
-- Whether an agent of a role may work in a project (its key not revoked,
-- the project in its scope): a handoff to a role nobody holds is allowed,
-- and its answer says so.
SELECT EXISTS (
    SELECT 1 FROM agents
    WHERE role = @role AND revoked_at IS NULL AND (@project::text = ANY(projects) OR '*' = ANY(projects))
);

-- name: AgentNames :many
-- The names of agents by id, for a page that shows who did what.
SELECT id, name FROM agents WHERE id = ANY(@ids::text[]) ORDER BY id;
