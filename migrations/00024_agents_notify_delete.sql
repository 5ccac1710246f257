-- +goose Up

-- A DELETE of an agent's row by hand changes its authority as a revocation
-- does, so every process forgets the agent when the delete commits (see
-- 00010); before, only an UPDATE was heard, and another process kept
-- accepting the deleted key until its cache entry expired, minutes later.
-- Revocation (DELETE /v1/agents/{id}, or UPDATE agents SET revoked_at) is
-- the way to remove a leaked key: the agent's row stays, as the audit
-- chain of agents needs it (verify reports a chained agent without a row)
-- and its stored idempotent answers refer to it.
-- +goose StatementBegin
CREATE FUNCTION contextd_agents_notify_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('contextd_agents', OLD.id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER agents_notify_deleted AFTER DELETE ON agents
    FOR EACH ROW EXECUTE FUNCTION contextd_agents_notify_deleted();

-- +goose Down
DROP TRIGGER agents_notify_deleted ON agents;
DROP FUNCTION contextd_agents_notify_deleted();
