-- +goose Up

-- An operator who deletes an agent's row (to remove a leaked key at once)
-- changes its authority as a revocation does: every process forgets the
-- agent when the delete commits (see 00010). Before, only an UPDATE was
-- heard, and another process kept accepting the deleted key until its
-- cache entry expired, minutes later.
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
