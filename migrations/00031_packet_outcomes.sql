-- +goose Up

-- packet_outcomes: how a packet's answer went (issue 36). Append-only: a
-- later outcome of the same packet does not erase an earlier one, and each
-- is an entry of its project's audit chain (kind outcome), checked against
-- its row. seq numbers a packet's outcomes from 1; the writer counts them
-- under a lock of the packet (outcome.MaxPerPacket), and the unique index
-- keeps two writers from ever taking the same number.
--
-- used is what the answer quoted or paraphrased of the packet, found once
-- at write time with the attribute endpoint's matching: an array, in the
-- packet's record order, of {"subject", "project", "key", "version",
-- "similarity", "match"} (one per included entry whose span the answer
-- matched; project and version for items only). It holds every entry,
-- hidden ones included: readers filter it for their viewer, as they filter
-- a packet's records. The GIN index answers "which outcomes used this item
-- version" (used @> '[{"project":…,"key":…,"version":…}]') for the ledger
-- and suspects. (IF NOT EXISTS: the migration can run again on a schema
-- that has it, as a restore of goose's table to an older version makes.)
CREATE TABLE IF NOT EXISTS packet_outcomes (
    project       text             NOT NULL REFERENCES projects (project),
    id            text             NOT NULL CHECK (id LIKE 'out\_%'),
    packet_id     text             NOT NULL,
    seq           integer          NOT NULL CHECK (seq >= 1),
    created_at    timestamptz      NOT NULL DEFAULT clock_timestamp(),
    created_by    text             NOT NULL,
    status        text             NOT NULL CHECK (status IN ('success', 'failure', 'partial')),
    source        text             NOT NULL CHECK (source IN ('human', 'evaluator', 'agent', 'test')),
    score         double precision CHECK (score IS NULL OR (score >= 0 AND score <= 1)),
    label         text             NOT NULL DEFAULT '',
    note          text             NOT NULL DEFAULT '',
    answer        text,
    answer_sha256 bytea            CHECK (answer_sha256 IS NULL OR length(answer_sha256) = 32),
    used          jsonb            NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(used) = 'array'),
    PRIMARY KEY (project, id),
    FOREIGN KEY (project, packet_id) REFERENCES packets (project, id),
    CHECK ((answer IS NULL) = (answer_sha256 IS NULL)),
    CHECK (answer IS NOT NULL OR used = '[]')
);

CREATE UNIQUE INDEX IF NOT EXISTS packet_outcomes_packet_idx ON packet_outcomes (project, packet_id, seq);
CREATE INDEX IF NOT EXISTS packet_outcomes_created_idx ON packet_outcomes (project, created_at, id);
CREATE INDEX IF NOT EXISTS packet_outcomes_used_idx ON packet_outcomes USING gin (used jsonb_path_ops);

DROP TRIGGER IF EXISTS packet_outcomes_append_only ON packet_outcomes;
CREATE TRIGGER packet_outcomes_append_only BEFORE UPDATE OR DELETE ON packet_outcomes
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
DROP TRIGGER IF EXISTS packet_outcomes_no_truncate ON packet_outcomes;
CREATE TRIGGER packet_outcomes_no_truncate BEFORE TRUNCATE ON packet_outcomes
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();
GRANT SELECT, INSERT ON packet_outcomes TO contextd_app;

-- +goose Down
DROP TABLE packet_outcomes;
