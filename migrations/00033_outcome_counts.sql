-- +goose Up

-- Counters of outcomes (issue 36, suspects): how often each included entry
-- of a packet was in a packet whose outcome was a success, a failure or a
-- partial, so that GET …/packets/{id}/suspects reads one page of counts
-- per packet instead of scanning the history of outcomes and records.
--
-- A scope is a project and target role, and optionally a task and step:
-- task_id = '' AND step_id = '' is the role-wide scope every outcome
-- counts in; an outcome of a packet with a task counts in its task's scope
-- (task_id, step_id: the request's task.step_id, '' when it has none) as
-- well. The subject columns are a packet record's (an item version, a
-- request part with version 0, a predecessor handoff with version 0).
-- Counters count outcomes, not packets: a packet with two outcomes counts
-- twice, as the list of its outcomes does.
--
-- The outcome write adds to its scopes' totals and to the counts of every
-- entry its packet included, in its transaction (outcome.Service.RecordTx):
-- totals first, then the counts in one INSERT … ON CONFLICT DO UPDATE
-- whose rows come sorted by key, so that concurrent writers sharing
-- always-on entries take the same row locks in the same order and never
-- deadlock. The primary keys lead with project, as Citus requires.
CREATE TABLE IF NOT EXISTS outcome_totals (
    project     text   NOT NULL REFERENCES projects (project),
    target_role text   NOT NULL,
    task_id     text   NOT NULL DEFAULT '',
    step_id     text   NOT NULL DEFAULT '',
    successes   bigint NOT NULL DEFAULT 0 CHECK (successes >= 0),
    failures    bigint NOT NULL DEFAULT 0 CHECK (failures >= 0),
    partials    bigint NOT NULL DEFAULT 0 CHECK (partials >= 0),
    PRIMARY KEY (project, target_role, task_id, step_id)
);

CREATE TABLE IF NOT EXISTS outcome_counts (
    project         text    NOT NULL REFERENCES projects (project),
    target_role     text    NOT NULL,
    task_id         text    NOT NULL DEFAULT '',
    step_id         text    NOT NULL DEFAULT '',
    subject_kind    text    NOT NULL,
    subject_project text    NOT NULL DEFAULT '',
    subject_key     text    NOT NULL,
    subject_version integer NOT NULL DEFAULT 0,
    successes       bigint  NOT NULL DEFAULT 0 CHECK (successes >= 0),
    failures        bigint  NOT NULL DEFAULT 0 CHECK (failures >= 0),
    partials        bigint  NOT NULL DEFAULT 0 CHECK (partials >= 0),
    PRIMARY KEY (project, target_role, task_id, step_id, subject_kind, subject_project, subject_key, subject_version)
);

GRANT SELECT, INSERT, UPDATE ON outcome_totals, outcome_counts TO contextd_app;

-- The outcomes written before the counters (tests, development databases)
-- are counted once, here; a run again of the migration finds the tables
-- filled and adds nothing.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM outcome_totals) THEN
        RETURN;
    END IF;
    WITH scoped AS (
        SELECT o.project, p.id AS packet_id, p.target_role, s.task_id, s.step_id, o.status
        FROM packet_outcomes o
        JOIN packets p ON p.project = o.project AND p.id = o.packet_id
        CROSS JOIN LATERAL (
            SELECT '' AS task_id, '' AS step_id
            UNION ALL
            SELECT p.task_id, coalesce(p.request -> 'task' ->> 'step_id', '') WHERE p.task_id <> ''
        ) s
    ), totals AS (
        INSERT INTO outcome_totals (project, target_role, task_id, step_id, successes, failures, partials)
        SELECT project, target_role, task_id, step_id,
               count(*) FILTER (WHERE status = 'success'), count(*) FILTER (WHERE status = 'failure'),
               count(*) FILTER (WHERE status = 'partial')
        FROM scoped GROUP BY project, target_role, task_id, step_id
    )
    INSERT INTO outcome_counts (project, target_role, task_id, step_id, subject_kind, subject_project, subject_key,
                                subject_version, successes, failures, partials)
    SELECT s.project, s.target_role, s.task_id, s.step_id, r.subject_kind, r.subject_project, r.subject_key, r.subject_version,
           count(*) FILTER (WHERE s.status = 'success'), count(*) FILTER (WHERE s.status = 'failure'),
           count(*) FILTER (WHERE s.status = 'partial')
    FROM scoped s
    JOIN LATERAL (
        SELECT DISTINCT subject_kind, subject_project, subject_key, subject_version
        FROM packet_records
        WHERE project = s.project AND packet_id = s.packet_id AND decision = 'included'
    ) r ON true
    GROUP BY s.project, s.target_role, s.task_id, s.step_id, r.subject_kind, r.subject_project, r.subject_key, r.subject_version;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE IF EXISTS outcome_counts;
DROP TABLE IF EXISTS outcome_totals;
