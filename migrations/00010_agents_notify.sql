-- +goose Up

-- Every change of an agent's authority (revocation, permission, projects)
-- notifies contextd_agents as its transaction commits, whoever makes it: a
-- process of another version, or an operator's UPDATE. The processes that
-- watch the channel forget the agent then (auth.Service.Watch); they keep
-- agents for minutes only because every such change is heard.
-- +goose StatementBegin
CREATE FUNCTION contextd_agents_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('contextd_agents', NEW.id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER agents_notify AFTER UPDATE ON agents
    FOR EACH ROW
    WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.permission IS DISTINCT FROM NEW.permission
          OR OLD.projects IS DISTINCT FROM NEW.projects OR OLD.role IS DISTINCT FROM NEW.role
          OR OLD.key_sha256 IS DISTINCT FROM NEW.key_sha256)
    EXECUTE FUNCTION contextd_agents_notify();

-- +goose Down
DROP TRIGGER agents_notify ON agents;
DROP FUNCTION contextd_agents_notify();
