-- +goose Up

-- The item ledger (issue 36): per item version, and per item, how often it
-- was offered to a packet (a record of it: a candidate met), included,
-- excluded and why, the tokens it spent, the outcomes of the packets that
-- included it and how often their answers used it.
--
-- The figures are counters, so a ledger page reads a page. They are not
-- added to in the packet's transaction: every packet of a project includes
-- its always-on items, so counters kept there would be rows every
-- assembly of the project updates, and its writers would queue on them
-- (assembly is the hot path; issue 34). Instead the packet's and the
-- outcome's inserts each add one row to ledger_queue (triggers below, so
-- that no write path can forget it), an insert that conflicts with
-- nothing, and the ledger folds the queue into the counters: the server
-- in the background every second, and every ledger read first for its
-- project, under the project's lock, so a read counts every packet and
-- outcome committed before it. The fold reads the records and outcomes the
-- queue names (append-only, so a fold is exact whenever it runs) and
-- deletes the rows it folded in the same transaction.
--
-- project is the packets' project; subject_project is the item's (the
-- project itself, or _shared). A packet counts once per item version it has
-- a record of: offered; included when a record of it is included (tokens
-- sums those records), excluded otherwise, by the reason of its first
-- record (excluded_by: reason → packets). An outcome counts for each item
-- version its packet included (a packet with two outcomes counts twice, as
-- the suspects' counters do); used when its answer used the version.
-- (IF NOT EXISTS and OR REPLACE: the migration can run again on a schema
-- that has it, as a restore of goose's table to an older version makes.)
CREATE TABLE IF NOT EXISTS ledger_queue (
    project    text   NOT NULL REFERENCES projects (project),
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    packet_id  text   NOT NULL,
    outcome_id text,
    PRIMARY KEY (project, seq)
);

CREATE TABLE IF NOT EXISTS item_ledger (
    project         text    NOT NULL REFERENCES projects (project),
    subject_project text    NOT NULL,
    key             text    NOT NULL,
    version         integer NOT NULL,
    offered         bigint  NOT NULL DEFAULT 0 CHECK (offered >= 0),
    included        bigint  NOT NULL DEFAULT 0 CHECK (included >= 0),
    excluded        bigint  NOT NULL DEFAULT 0 CHECK (excluded >= 0),
    excluded_by     jsonb   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(excluded_by) = 'object'),
    tokens          bigint  NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    successes       bigint  NOT NULL DEFAULT 0 CHECK (successes >= 0),
    failures        bigint  NOT NULL DEFAULT 0 CHECK (failures >= 0),
    partials        bigint  NOT NULL DEFAULT 0 CHECK (partials >= 0),
    answered        bigint  NOT NULL DEFAULT 0 CHECK (answered >= 0),
    used            bigint  NOT NULL DEFAULT 0 CHECK (used >= 0),
    PRIMARY KEY (project, subject_project, key, version)
);

-- item_ledger_keys: the same figures per item (every version), with the
-- project ledger's three orders as stored columns and indexes, so that a
-- page in any of them reads a page of an index. Each order ends with the
-- item (subject_project, key), ascending, for a stable cursor.
CREATE TABLE IF NOT EXISTS item_ledger_keys (
    project         text    NOT NULL REFERENCES projects (project),
    subject_project text    NOT NULL,
    key             text    NOT NULL,
    offered         bigint  NOT NULL DEFAULT 0 CHECK (offered >= 0),
    included        bigint  NOT NULL DEFAULT 0 CHECK (included >= 0),
    excluded        bigint  NOT NULL DEFAULT 0 CHECK (excluded >= 0),
    excluded_by     jsonb   NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(excluded_by) = 'object'),
    tokens          bigint  NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    successes       bigint  NOT NULL DEFAULT 0 CHECK (successes >= 0),
    failures        bigint  NOT NULL DEFAULT 0 CHECK (failures >= 0),
    partials        bigint  NOT NULL DEFAULT 0 CHECK (partials >= 0),
    answered        bigint  NOT NULL DEFAULT 0 CHECK (answered >= 0),
    used            bigint  NOT NULL DEFAULT 0 CHECK (used >= 0),
    -- failure_order: minus the failure rate (-1 to 0), 1 with no outcomes,
    -- so ascending is the highest rate first and the unjudged last.
    failure_order   double precision GENERATED ALWAYS AS (
        CASE WHEN successes + failures + partials = 0 THEN 1
             ELSE -(failures::double precision / (successes + failures + partials)) END) STORED,
    PRIMARY KEY (project, subject_project, key)
);

CREATE INDEX IF NOT EXISTS item_ledger_keys_failure_idx ON item_ledger_keys (project, failure_order, (-failures), subject_project, key);
CREATE INDEX IF NOT EXISTS item_ledger_keys_tokens_idx ON item_ledger_keys (project, (-tokens), subject_project, key);
CREATE INDEX IF NOT EXISTS item_ledger_keys_unused_idx ON item_ledger_keys (project, used, (-tokens), subject_project, key);

-- contextd_count_sum adds two objects of counts key by key.
CREATE OR REPLACE FUNCTION contextd_count_sum(a jsonb, b jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT coalesce(jsonb_object_agg(k, n), '{}'::jsonb)
    FROM (SELECT k, sum(v::bigint) AS n
          FROM (SELECT * FROM jsonb_each_text(a) UNION ALL SELECT * FROM jsonb_each_text(b)) e (k, v)
          GROUP BY k) s
$$;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_ledger_enqueue() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    IF TG_TABLE_NAME = 'packets' THEN
        INSERT INTO ledger_queue (project, packet_id) VALUES (NEW.project, NEW.id);
    ELSE
        INSERT INTO ledger_queue (project, packet_id, outcome_id) VALUES (NEW.project, NEW.packet_id, NEW.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS packets_ledger ON packets;
CREATE TRIGGER packets_ledger AFTER INSERT ON packets
    FOR EACH ROW EXECUTE FUNCTION contextd_ledger_enqueue();
DROP TRIGGER IF EXISTS packet_outcomes_ledger ON packet_outcomes;
CREATE TRIGGER packet_outcomes_ledger AFTER INSERT ON packet_outcomes
    FOR EACH ROW EXECUTE FUNCTION contextd_ledger_enqueue();

GRANT SELECT, INSERT, DELETE ON ledger_queue TO contextd_app;
GRANT SELECT, INSERT, UPDATE ON item_ledger, item_ledger_keys TO contextd_app;

-- The packets and outcomes written before the ledger are queued once,
-- here, and folded by the first fold; a run again finds the ledger or the
-- queue filled and queues nothing.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM item_ledger_keys) OR EXISTS (SELECT 1 FROM ledger_queue) THEN
        RETURN;
    END IF;
    INSERT INTO ledger_queue (project, packet_id, outcome_id)
    SELECT project, packet_id, outcome_id FROM (
        SELECT project, id AS packet_id, NULL::text AS outcome_id, created_at, 0 AS k FROM packets
        UNION ALL
        SELECT project, packet_id, id, created_at, 1 FROM packet_outcomes
    ) w
    ORDER BY created_at, k, packet_id, outcome_id;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS packet_outcomes_ledger ON packet_outcomes;
DROP TRIGGER IF EXISTS packets_ledger ON packets;
DROP FUNCTION IF EXISTS contextd_ledger_enqueue();
DROP FUNCTION IF EXISTS contextd_count_sum(jsonb, jsonb);
DROP TABLE IF EXISTS item_ledger_keys;
DROP TABLE IF EXISTS item_ledger;
DROP TABLE IF EXISTS ledger_queue;
