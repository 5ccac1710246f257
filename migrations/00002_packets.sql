-- +goose Up

-- packets are assembled contexts, one per prompt, immutable. A packet keeps
-- its normalised request, what it rendered, and the snapshot it read by
-- (pg_current_snapshot() of its read transaction), so that a replay sees
-- exactly the item versions it saw, whatever was committing at the time.
CREATE TABLE packets (
    project            text        NOT NULL REFERENCES projects (project),
    id                 text        NOT NULL CHECK (id LIKE 'ctxpkt\_%'),
    created_at         timestamptz NOT NULL, -- the packet's own time: the read snapshot's now()
    created_by         text        NOT NULL,
    target_role        text        NOT NULL,
    task_id            text        NOT NULL DEFAULT '',
    request            jsonb       NOT NULL,
    -- predecessors are the request's handoffs as they were when the packet
    -- was made (their status changes later); a replay renders these.
    predecessors       jsonb       NOT NULL DEFAULT '[]',
    format             text        NOT NULL,
    tokenizer          text        NOT NULL,
    rendered           text        NOT NULL,
    rendered_sha256    bytea       NOT NULL CHECK (length(rendered_sha256) = 32),
    token_budget       integer     NOT NULL,
    tokens_used        integer     NOT NULL,
    gaps               jsonb       NOT NULL,
    provenance_summary jsonb       NOT NULL,
    snapshot           text        NOT NULL,
    PRIMARY KEY (project, id)
);

CREATE INDEX packets_created_idx ON packets (project, created_at DESC, id DESC);
CREATE INDEX packets_task_idx ON packets (project, task_id, created_at) WHERE task_id <> '';

-- packet_records: one decision of one assembly about one subject (an item
-- version, a part of the request, later a handoff). The largest table by
-- far, so rows stay narrow; it is read by packet, and by item for the
-- reverse lookup "which prompts used this version".
CREATE TABLE packet_records (
    project         text        NOT NULL,
    packet_id       text        NOT NULL,
    ord             integer     NOT NULL,
    subject_kind    text        NOT NULL CHECK (subject_kind IN ('item', 'request', 'handoff')),
    subject_project text        NOT NULL DEFAULT '',
    subject_key     text        NOT NULL,
    subject_version integer     NOT NULL DEFAULT 0,
    decision        text        NOT NULL CHECK (decision IN ('included', 'excluded')),
    section         text        NOT NULL DEFAULT '',
    position        integer     NOT NULL DEFAULT 0,
    span_start      integer,
    span_end        integer,
    tokens          integer     NOT NULL DEFAULT 0,
    rank            integer     NOT NULL DEFAULT 0,
    rule            text        NOT NULL DEFAULT '',
    reason          text        NOT NULL DEFAULT '',
    detail          text        NOT NULL DEFAULT '',
    layer           text        NOT NULL DEFAULT '',
    -- admin_only marks a record that would reveal an item hidden from the
    -- packet's role: only admins ever see it, or count it.
    admin_only      boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL, -- the packet's time, for lookups by item and time
    PRIMARY KEY (project, packet_id, ord),
    FOREIGN KEY (project, packet_id) REFERENCES packets (project, id),
    CHECK ((span_start IS NULL) = (span_end IS NULL) AND (span_start IS NULL OR span_start < span_end))
);

CREATE INDEX packet_records_injections_idx ON packet_records (project, subject_project, subject_key, created_at DESC, packet_id)
    WHERE decision = 'included' AND subject_kind = 'item';

CREATE TRIGGER packets_append_only BEFORE UPDATE OR DELETE ON packets
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
CREATE TRIGGER packets_no_truncate BEFORE TRUNCATE ON packets
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();
CREATE TRIGGER packet_records_append_only BEFORE UPDATE OR DELETE ON packet_records
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
CREATE TRIGGER packet_records_no_truncate BEFORE TRUNCATE ON packet_records
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();

-- +goose Down
DROP TABLE packet_records;
DROP TABLE packets;
