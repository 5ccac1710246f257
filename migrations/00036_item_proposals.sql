-- +goose Up

-- Proposals (issue 37): an item write that is stored but not current until
-- another principal, whose grant covers the authority it asks for,
-- promotes it. A write becomes one when it asks ("proposal": true), when a
-- KXM import says status proposed, or when it claims more authority than
-- its writer's grant or its source's ceiling allow in a project whose
-- on_excess_authority is 'propose' (the default, 'refuse', answers 403 as
-- before).
--
-- item_proposals is append-only, like item_versions: a proposal is the
-- write's fields as a version would hold them (fields, its canonical JSON,
-- and fields_sha256, the hash a write compares with), numbered per item
-- from 1 (proposal), against the item's current version when it was made
-- (base_version, 0 when the key had none), with its author's id, name and
-- role as they were. promoter_roles are the roles whose agents could
-- promote it when it was made (their grant covers its authority, they may
-- edit the project and see the item, and they are not its author): its
-- event goes to their inboxes. seq numbers its event among the project's
-- handoff events (project_counters.handoff_seq), so that one stream, one
-- Last-Event-ID, carries both.
--
-- item_proposal_decisions is append-only too: at most one decision per
-- proposal (its primary key), promoted (the version it became, and the
-- live version it superseded) or rejected (with a reason). A proposal
-- without a decision is pending. No packet reads either table: a proposal
-- is never current. Each row of both is an entry of the project's audit
-- chain (kinds proposal and proposal_decision), checked against the row.
-- (IF NOT EXISTS and OR REPLACE: the migration can run again on a schema
-- that has it, as a restore of goose's table to an older version makes.)
ALTER TABLE projects ADD COLUMN IF NOT EXISTS on_excess_authority text NOT NULL DEFAULT 'refuse';
ALTER TABLE projects DROP CONSTRAINT IF EXISTS projects_on_excess_authority;
ALTER TABLE projects ADD CONSTRAINT projects_on_excess_authority CHECK (on_excess_authority IN ('refuse', 'propose'));
GRANT UPDATE (on_excess_authority) ON projects TO contextd_app;

CREATE TABLE IF NOT EXISTS item_proposals (
    project         text        NOT NULL REFERENCES projects (project),
    key             text        NOT NULL CHECK (key ~ '^[A-Za-z0-9._:-]{1,200}$'),
    proposal        integer     NOT NULL CHECK (proposal >= 1),
    seq             bigint      NOT NULL CHECK (seq >= 1),
    base_version    integer     NOT NULL CHECK (base_version >= 0),
    cause           text        NOT NULL CHECK (cause IN ('asked', 'excess_authority', 'import')),
    cause_detail    text        NOT NULL DEFAULT '',
    fields          jsonb       NOT NULL CHECK (jsonb_typeof(fields) = 'object' AND fields ->> 'content' <> ''),
    fields_sha256   bytea       NOT NULL CHECK (length(fields_sha256) = 32),
    promoter_roles  text[]      NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_by      text        NOT NULL,
    created_by_name text        NOT NULL,
    created_by_role text        NOT NULL,
    PRIMARY KEY (project, key, proposal),
    CHECK (fields ->> 'authority' IN ('policy', 'instruction', 'evidence', 'hypothesis'))
);

CREATE UNIQUE INDEX IF NOT EXISTS item_proposals_seq_idx ON item_proposals (project, seq);

CREATE TABLE IF NOT EXISTS item_proposal_decisions (
    project            text        NOT NULL,
    key                text        NOT NULL,
    proposal           integer     NOT NULL,
    seq                bigint      NOT NULL CHECK (seq >= 1),
    decision           text        NOT NULL CHECK (decision IN ('promoted', 'rejected')),
    reason             text        NOT NULL DEFAULT '',
    version            integer,
    superseded_version integer,
    rebased            boolean     NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_by         text        NOT NULL,
    created_by_role    text        NOT NULL,
    PRIMARY KEY (project, key, proposal),
    FOREIGN KEY (project, key, proposal) REFERENCES item_proposals (project, key, proposal),
    FOREIGN KEY (project, key, version) REFERENCES item_versions (project, key, version),
    CHECK ((decision = 'promoted') = (version IS NOT NULL)),
    CHECK (decision = 'promoted' OR (superseded_version IS NULL AND NOT rebased)),
    CHECK (decision = 'promoted' OR reason <> '')
);

CREATE UNIQUE INDEX IF NOT EXISTS item_proposal_decisions_seq_idx ON item_proposal_decisions (project, seq);

DROP TRIGGER IF EXISTS item_proposals_append_only ON item_proposals;
CREATE TRIGGER item_proposals_append_only BEFORE UPDATE OR DELETE ON item_proposals
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
DROP TRIGGER IF EXISTS item_proposals_no_truncate ON item_proposals;
CREATE TRIGGER item_proposals_no_truncate BEFORE TRUNCATE ON item_proposals
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();
DROP TRIGGER IF EXISTS item_proposal_decisions_append_only ON item_proposal_decisions;
CREATE TRIGGER item_proposal_decisions_append_only BEFORE UPDATE OR DELETE ON item_proposal_decisions
    FOR EACH ROW EXECUTE FUNCTION contextd_refuse_change();
DROP TRIGGER IF EXISTS item_proposal_decisions_no_truncate ON item_proposal_decisions;
CREATE TRIGGER item_proposal_decisions_no_truncate BEFORE TRUNCATE ON item_proposal_decisions
    FOR EACH STATEMENT EXECUTE FUNCTION contextd_refuse_change();

GRANT SELECT, INSERT ON item_proposals, item_proposal_decisions TO contextd_app;

-- +goose Down
DROP TABLE IF EXISTS item_proposal_decisions;
DROP TABLE IF EXISTS item_proposals;
REVOKE UPDATE (on_excess_authority) ON projects FROM contextd_app;
ALTER TABLE projects DROP CONSTRAINT IF EXISTS projects_on_excess_authority;
ALTER TABLE projects DROP COLUMN IF EXISTS on_excess_authority;
