-- +goose Up
-- A project can be archived (DELETE /v1/projects/{project}) and restored:
-- nothing of it is deleted, it only stops taking writes and packets. The
-- columns say who did each last; the project's audit entries are its row
-- after each change, so the chain keeps every archive and restore in turn.
-- _shared, which every packet reads, is never archived.
-- (IF NOT EXISTS and IF EXISTS: the migration can run again on a schema
-- that has it, as a restore of goose's table to an older version makes.)
ALTER TABLE projects
    ADD COLUMN IF NOT EXISTS archived_at timestamptz,
    ADD COLUMN IF NOT EXISTS archived_by text,
    ADD COLUMN IF NOT EXISTS restored_at timestamptz,
    ADD COLUMN IF NOT EXISTS restored_by text,
    DROP CONSTRAINT IF EXISTS projects_archived_by,
    DROP CONSTRAINT IF EXISTS projects_restored_by,
    DROP CONSTRAINT IF EXISTS projects_shared_not_archived,
    ADD CONSTRAINT projects_archived_by CHECK ((archived_at IS NULL) = (archived_by IS NULL)),
    ADD CONSTRAINT projects_restored_by CHECK ((restored_at IS NULL) = (restored_by IS NULL)),
    ADD CONSTRAINT projects_shared_not_archived CHECK (project <> '_shared' OR archived_at IS NULL);
GRANT UPDATE (archived_at, archived_by, restored_at, restored_by) ON projects TO contextd_app;

-- contextd_project_writable is how a write transaction makes sure its
-- project takes writes, and keeps taking them until it commits: it holds
-- the project's row FOR SHARE (archiving updates the row, so it waits for
-- every write in flight, and a write that comes after waits for the
-- archive and then sees it) and raises CD410 when the project is
-- archived. It sends nothing back, so a write queues it with its next
-- statement and pays no round trip for it. A missing project is left to
-- the write's own checks. It runs as the caller (no SECURITY DEFINER).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_project_writable(p_project text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    archived timestamptz;
BEGIN
    SELECT p.archived_at INTO archived FROM public.projects p WHERE p.project = p_project FOR SHARE;
    IF archived IS NOT NULL THEN
        RAISE EXCEPTION 'project % is archived', p_project USING ERRCODE = 'CD410';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION contextd_project_writable(text);
REVOKE UPDATE (archived_at, archived_by, restored_at, restored_by) ON projects FROM contextd_app;
ALTER TABLE projects
    DROP CONSTRAINT projects_shared_not_archived,
    DROP CONSTRAINT projects_restored_by,
    DROP CONSTRAINT projects_archived_by,
    DROP COLUMN restored_by,
    DROP COLUMN restored_at,
    DROP COLUMN archived_by,
    DROP COLUMN archived_at;
