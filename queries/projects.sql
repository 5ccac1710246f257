-- name: ProjectGet :one
SELECT * FROM projects WHERE project = @project;

-- name: ProjectList :many
SELECT * FROM projects
WHERE project > @after
  AND (@all_projects::boolean OR project = ANY(@projects::text[]))
ORDER BY project
LIMIT @max;

-- name: ProjectUpsert :one
INSERT INTO projects (project, description)
VALUES (@project, @description)
ON CONFLICT (project) DO UPDATE
    SET description = EXCLUDED.description,
        updated_at = CASE WHEN projects.description = EXCLUDED.description THEN projects.updated_at ELSE now() END
RETURNING *, (xmax = 0)::boolean AS inserted;
