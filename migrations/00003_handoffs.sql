-- +goose Up

-- handoffs: one role hands work to another (KXM's HandoffManifestV1). The
-- row holds the manifest and the one thing that changes, the status; every
-- change is also appended to handoff_events. The database itself refuses a
-- transition out of a terminal status and any change to the manifest.
CREATE TABLE handoffs (
    project           text        NOT NULL REFERENCES projects (project),
    id                text        NOT NULL CHECK (id LIKE 'hnd\_%'),
    task_id           text        NOT NULL CHECK (task_id <> ''),
    workflow_run_id   text        NOT NULL DEFAULT '',
    rework_of         text,
    source_role       text        NOT NULL CHECK (source_role <> ''),
    source_agent_id   text        NOT NULL DEFAULT '',
    target_role       text        NOT NULL CHECK (target_role <> ''),
    target_permission text        NOT NULL DEFAULT '',
    intent            text        NOT NULL CHECK (intent IN ('request_review', 'dispatch_fix', 'request_approval', 'complete_workflow')),
    packet_id         text,
    manifest          jsonb       NOT NULL,
    created_by        text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    status            text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'rejected', 'superseded')),
    status_reason     text        NOT NULL DEFAULT '',
    superseded_by     text,
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (project, id),
    FOREIGN KEY (project, rework_of) REFERENCES handoffs (project, id),
    -- The superseding handoff is written after the one it supersedes is
    -- updated, in the same transaction: checked at commit.
    FOREIGN KEY (project, superseded_by) REFERENCES handoffs (project, id) DEFERRABLE INITIALLY DEFERRED,
    FOREIGN KEY (project, packet_id) REFERENCES packets (project, id)
);

-- At most one pending handoff per task and target role: a new one
-- supersedes the old in the same transaction.
CREATE UNIQUE INDEX handoffs_one_pending_idx ON handoffs (project, task_id, target_role) WHERE status = 'pending';
CREATE INDEX handoffs_task_idx ON handoffs (project, task_id, created_at);
CREATE INDEX handoffs_created_idx ON handoffs (project, created_at DESC, id DESC);
CREATE INDEX handoffs_rework_idx ON handoffs (project, rework_of) WHERE rework_of IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION contextd_handoff_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'handoff % is %: a terminal status does not change', OLD.id, OLD.status
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF (NEW.project, NEW.id, NEW.task_id, NEW.workflow_run_id, NEW.rework_of, NEW.source_role, NEW.source_agent_id,
        NEW.target_role, NEW.target_permission, NEW.intent, NEW.packet_id, NEW.manifest, NEW.created_by, NEW.created_at)
       IS DISTINCT FROM
       (OLD.project, OLD.id, OLD.task_id, OLD.workflow_run_id, OLD.rework_of, OLD.source_role, OLD.source_agent_id,
        OLD.target_role, OLD.target_permission, OLD.intent, OLD.packet_id, OLD.manifest, OLD.created_by, OLD.created_at) THEN
        RAISE EXCEPTION 'handoff %: the manifest is immutable', OLD.id USING ERRCODE = 'restrict_violation';
    END IF;
    IF NEW.status = 'superseded' AND NEW.superseded_by IS NULL AND NEW.status_reason = '' THEN
        RAISE EXCEPTION 'handoff %: superseded needs superseded_by or a reason', OLD.id USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER handoffs_transition BEFORE UPDATE ON handoffs
    FOR EACH ROW EXECUTE FUNCTION contextd_handoff_transition();
CREATE TRIGGER handoffs_no_delete BEFORE DELETE ON handoffs
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
CREATE TRIGGER handoffs_no_truncate BEFORE TRUNCATE ON handoffs
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();

-- project_counters hands out per-project sequence numbers. Incrementing the
-- row locks it until commit, so numbers are handed out in commit order: a
-- reader that has seen n has seen everything below n.
CREATE TABLE project_counters (
    project     text   PRIMARY KEY REFERENCES projects (project),
    handoff_seq bigint NOT NULL DEFAULT 0
);

-- handoff_events: the append-only history of every handoff, creation
-- included; seq is the SSE event id.
CREATE TABLE handoff_events (
    project     text        NOT NULL,
    seq         bigint      NOT NULL,
    handoff_id  text        NOT NULL,
    event       text        NOT NULL CHECK (event IN ('created', 'accepted', 'rejected', 'superseded')),
    from_status text,
    to_status   text        NOT NULL,
    actor       text        NOT NULL,
    actor_role  text        NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (project, seq),
    FOREIGN KEY (project, handoff_id) REFERENCES handoffs (project, id),
    -- Only the lifecycle's own steps: none → pending, pending → terminal.
    CHECK ((event = 'created' AND from_status IS NULL AND to_status = 'pending')
        OR (from_status = 'pending' AND event = to_status AND to_status IN ('accepted', 'rejected', 'superseded')))
);

CREATE INDEX handoff_events_handoff_idx ON handoff_events (project, handoff_id, seq);

-- Every change of a handoff is an event: checked at commit, whatever the
-- client does, that a new handoff (pending) has its created event and a
-- changed status has the event of that very step.
-- +goose StatementBegin
CREATE FUNCTION contextd_handoff_has_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'pending' OR NOT EXISTS (
            SELECT 1 FROM handoff_events e
            WHERE e.project = NEW.project AND e.handoff_id = NEW.id AND e.event = 'created') THEN
            RAISE EXCEPTION 'handoff %: a new handoff is pending and has its created event', NEW.id
                USING ERRCODE = 'restrict_violation';
        END IF;
    ELSIF NEW.status IS DISTINCT FROM OLD.status AND NOT EXISTS (
            SELECT 1 FROM handoff_events e
            WHERE e.project = NEW.project AND e.handoff_id = NEW.id
              AND e.from_status = OLD.status AND e.to_status = NEW.status) THEN
        RAISE EXCEPTION 'handoff %: % → % without its event', NEW.id, OLD.status, NEW.status
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER handoffs_have_events AFTER INSERT OR UPDATE ON handoffs
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION contextd_handoff_has_event();

CREATE TRIGGER handoff_events_append_only BEFORE UPDATE OR DELETE ON handoff_events
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
CREATE TRIGGER handoff_events_no_truncate BEFORE TRUNCATE ON handoff_events
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();

-- Packets that used a handoff as a predecessor are found by their records.
CREATE INDEX packet_records_handoff_idx ON packet_records (project, subject_key) WHERE subject_kind = 'handoff';

-- +goose Down
DROP INDEX packet_records_handoff_idx;
DROP TABLE handoff_events;
DROP TABLE project_counters;
DROP TABLE handoffs;
DROP FUNCTION contextd_handoff_has_event();
DROP FUNCTION contextd_handoff_transition();
