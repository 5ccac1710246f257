-- name: ProjectGet :one
SELECT * FROM projects WHERE project = @project;

-- name: ProjectList :many
-- Live projects, or with @archived the archived ones only.
SELECT * FROM projects
WHERE project > @after
  AND (@all_projects::boolean OR project = ANY(@projects::text[]))
  AND (archived_at IS NOT NULL) = @archived::boolean
ORDER BY project
LIMIT @max;

-- name: ProjectUpsert :one
-- An archived project is not changed: no row comes back. A NULL
-- on_excess_authority keeps the project's (refuse for a new one).
INSERT INTO projects (project, description, on_excess_authority)
VALUES (@project, @description, coalesce(sqlc.narg('on_excess_authority')::text, 'refuse'))
ON CONFLICT (project) DO UPDATE
    SET description = EXCLUDED.description,
        on_excess_authority = coalesce(sqlc.narg('on_excess_authority')::text, projects.on_excess_authority),
        updated_at = CASE
            WHEN projects.description = EXCLUDED.description
             AND projects.on_excess_authority = coalesce(sqlc.narg('on_excess_authority')::text, projects.on_excess_authority)
            THEN projects.updated_at ELSE now() END
    WHERE projects.archived_at IS NULL
RETURNING *, (xmax = 0)::boolean AS inserted;

-- name: ProjectArchive :one
-- No row: the project is missing or archived already.
UPDATE projects SET archived_at = now(), archived_by = @agent
WHERE project = @project AND archived_at IS NULL
RETURNING *;

-- name: ProjectRestore :one
-- No row: the project is missing or not archived.
UPDATE projects SET archived_at = NULL, archived_by = NULL, restored_at = now(), restored_by = @agent
WHERE project = @project AND archived_at IS NOT NULL
RETURNING *;

-- name: ProjectWritable :exec
SELECT contextd_project_writable(@project);
