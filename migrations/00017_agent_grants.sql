-- +goose Up

-- max_authority is the highest authority an agent's item writes may claim
-- (issue 11: authority is granted, not self-declared). NULL only for agents
-- made before this migration: their ceiling is their permission's default
-- (policy for admins, instruction for the others), and their audit entries,
-- written without the member, stay valid. Every agent made or changed from
-- now on stores its ceiling explicitly.
ALTER TABLE agents ADD COLUMN max_authority text
    CHECK (max_authority IN ('policy', 'instruction', 'evidence', 'hypothesis'));

-- PATCH /v1/agents/{id} changes these columns.
GRANT UPDATE (name, role, permission, projects, max_authority) ON agents TO contextd_app;

-- A change of the ceiling is a change of authority: every process forgets
-- the agent when it commits (see 00010).
DROP TRIGGER agents_notify ON agents;
CREATE TRIGGER agents_notify AFTER UPDATE ON agents
    FOR EACH ROW
    WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.permission IS DISTINCT FROM NEW.permission
          OR OLD.projects IS DISTINCT FROM NEW.projects OR OLD.role IS DISTINCT FROM NEW.role
          OR OLD.key_sha256 IS DISTINCT FROM NEW.key_sha256 OR OLD.max_authority IS DISTINCT FROM NEW.max_authority
          OR OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION contextd_agents_notify();

-- +goose Down
DROP TRIGGER agents_notify ON agents;
CREATE TRIGGER agents_notify AFTER UPDATE ON agents
    FOR EACH ROW
    WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.permission IS DISTINCT FROM NEW.permission
          OR OLD.projects IS DISTINCT FROM NEW.projects OR OLD.role IS DISTINCT FROM NEW.role
          OR OLD.key_sha256 IS DISTINCT FROM NEW.key_sha256)
    EXECUTE FUNCTION contextd_agents_notify();
REVOKE UPDATE (name, role, permission, projects, max_authority) ON agents FROM contextd_app;
ALTER TABLE agents DROP COLUMN max_authority;
