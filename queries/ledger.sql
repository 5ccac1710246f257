-- name: LedgerLock :exec
-- Serialises the folds of one project until the transaction ends: a
-- ledger read that folds waits for the background fold in progress, so
-- that it then counts everything that fold took from the queue.
SELECT pg_advisory_xact_lock(hashtextextended('contextd.ledger/' || @project::text, 36));

-- name: LedgerTryLock :one
-- As LedgerLock, for the background fold: a project being folded is left
-- to the fold that holds it.
SELECT pg_try_advisory_xact_lock(hashtextextended('contextd.ledger/' || @project::text, 36)) AS locked;

-- name: LedgerFold :one
-- Folds the oldest @lim queued packets and outcomes of a project into the
-- item ledger and deletes them from the queue, in one statement (migration
-- 00034 says what counts). A packet counts once per item version it has a
-- record of; an outcome once per item version its packet included.
WITH q AS (
    DELETE FROM ledger_queue lq
    WHERE lq.project = @project
      AND lq.seq IN (SELECT s.seq FROM ledger_queue s WHERE s.project = @project ORDER BY s.seq LIMIT @lim)
    RETURNING lq.packet_id, lq.outcome_id
), seen AS (
    SELECT r.packet_id, r.subject_project, r.subject_key, r.subject_version,
           bool_or(r.decision = 'included') AS included,
           coalesce(sum(r.tokens) FILTER (WHERE r.decision = 'included'), 0)::bigint AS tokens,
           coalesce(nullif((array_agg(r.reason ORDER BY r.ord) FILTER (WHERE r.decision = 'excluded'))[1], ''), 'excluded') AS reason
    FROM q
    JOIN packet_records r ON r.project = @project AND r.packet_id = q.packet_id
    WHERE q.outcome_id IS NULL AND r.subject_kind = 'item'
    GROUP BY r.packet_id, r.subject_project, r.subject_key, r.subject_version
), judged AS (
    SELECT DISTINCT o.id, r.subject_project, r.subject_key, r.subject_version, o.status,
           o.answer IS NOT NULL AS answered,
           o.used @> jsonb_build_array(jsonb_build_object('subject', 'item', 'project', r.subject_project,
                                                          'key', r.subject_key, 'version', r.subject_version)) AS used
    FROM q
    JOIN packet_outcomes o ON o.project = @project AND o.id = q.outcome_id
    JOIN packet_records r ON r.project = @project AND r.packet_id = o.packet_id
                         AND r.decision = 'included' AND r.subject_kind = 'item'
), counts AS (
    SELECT subject_project, subject_key, subject_version,
           sum(offered)::bigint AS offered, sum(included)::bigint AS included, sum(excluded)::bigint AS excluded,
           sum(tokens)::bigint AS tokens, sum(successes)::bigint AS successes, sum(failures)::bigint AS failures,
           sum(partials)::bigint AS partials, sum(answered)::bigint AS answered, sum(used)::bigint AS used
    FROM (
        SELECT subject_project, subject_key, subject_version, 1 AS offered, included::int AS included,
               (NOT included)::int AS excluded, tokens, 0 AS successes, 0 AS failures, 0 AS partials, 0 AS answered, 0 AS used
        FROM seen
        UNION ALL
        SELECT subject_project, subject_key, subject_version, 0, 0, 0, 0, (status = 'success')::int,
               (status = 'failure')::int, (status = 'partial')::int, answered::int, used::int
        FROM judged
    ) d
    GROUP BY subject_project, subject_key, subject_version
), reasons AS (
    SELECT subject_project, subject_key, subject_version, jsonb_object_agg(reason, n) AS excluded_by
    FROM (SELECT subject_project, subject_key, subject_version, reason, count(*) AS n
          FROM seen WHERE NOT included GROUP BY subject_project, subject_key, subject_version, reason) r
    GROUP BY subject_project, subject_key, subject_version
), key_reasons AS (
    SELECT subject_project, subject_key, jsonb_object_agg(reason, n) AS excluded_by
    FROM (SELECT subject_project, subject_key, reason, count(*) AS n
          FROM seen WHERE NOT included GROUP BY subject_project, subject_key, reason) r
    GROUP BY subject_project, subject_key
), per_version AS (
    INSERT INTO item_ledger AS l (project, subject_project, key, version, offered, included, excluded, excluded_by,
                                  tokens, successes, failures, partials, answered, used)
    SELECT @project, c.subject_project, c.subject_key, c.subject_version, c.offered, c.included, c.excluded,
           coalesce(r.excluded_by, '{}'::jsonb), c.tokens, c.successes, c.failures, c.partials, c.answered, c.used
    FROM counts c
    LEFT JOIN reasons r USING (subject_project, subject_key, subject_version)
    ORDER BY c.subject_project, c.subject_key, c.subject_version
    ON CONFLICT (project, subject_project, key, version) DO UPDATE SET
        offered = l.offered + EXCLUDED.offered, included = l.included + EXCLUDED.included,
        excluded = l.excluded + EXCLUDED.excluded, excluded_by = contextd_count_sum(l.excluded_by, EXCLUDED.excluded_by),
        tokens = l.tokens + EXCLUDED.tokens, successes = l.successes + EXCLUDED.successes,
        failures = l.failures + EXCLUDED.failures, partials = l.partials + EXCLUDED.partials,
        answered = l.answered + EXCLUDED.answered, used = l.used + EXCLUDED.used
    RETURNING 1
), per_key AS (
    INSERT INTO item_ledger_keys AS l (project, subject_project, key, offered, included, excluded, excluded_by,
                                       tokens, successes, failures, partials, answered, used)
    SELECT @project, c.subject_project, c.subject_key, sum(c.offered), sum(c.included), sum(c.excluded),
           coalesce(min(r.excluded_by::text)::jsonb, '{}'::jsonb), sum(c.tokens), sum(c.successes), sum(c.failures),
           sum(c.partials), sum(c.answered), sum(c.used)
    FROM counts c
    LEFT JOIN key_reasons r USING (subject_project, subject_key)
    GROUP BY c.subject_project, c.subject_key
    ORDER BY c.subject_project, c.subject_key
    ON CONFLICT (project, subject_project, key) DO UPDATE SET
        offered = l.offered + EXCLUDED.offered, included = l.included + EXCLUDED.included,
        excluded = l.excluded + EXCLUDED.excluded, excluded_by = contextd_count_sum(l.excluded_by, EXCLUDED.excluded_by),
        tokens = l.tokens + EXCLUDED.tokens, successes = l.successes + EXCLUDED.successes,
        failures = l.failures + EXCLUDED.failures, partials = l.partials + EXCLUDED.partials,
        answered = l.answered + EXCLUDED.answered, used = l.used + EXCLUDED.used
    RETURNING 1
)
SELECT (SELECT count(*) FROM q)::int AS folded,
       (SELECT count(*) FROM per_version)::int AS versions,
       (SELECT count(*) FROM per_key)::int AS keys;

-- name: LedgerQueuedProjects :many
-- The projects with packets or outcomes waiting to be folded, at most @lim.
SELECT DISTINCT project FROM ledger_queue ORDER BY project LIMIT @lim;

-- name: LedgerPending :one
-- How many packets and outcomes of a project wait to be folded.
SELECT count(*)::bigint FROM ledger_queue WHERE project = @project;

-- name: LedgerItem :many
-- An item's figures over every version, in one project's packets: no row
-- when no packet of the project has had a record of it.
SELECT offered, included, excluded, excluded_by, tokens, successes, failures, partials, answered, used
FROM item_ledger_keys
WHERE project = @project AND subject_project = @subject_project AND key = @key;

-- name: LedgerItemVersions :many
-- A page of an item's figures per version, oldest version first.
SELECT version, offered, included, excluded, excluded_by, tokens, successes, failures, partials, answered, used
FROM item_ledger
WHERE project = @project AND subject_project = @subject_project AND key = @key AND version > @after_version
ORDER BY version
LIMIT @lim;

-- name: LedgerByFailure :many
-- A page of a project's items in the packets, highest failure rate first
-- (then most failures), the items without outcomes last; only the items
-- the caller's role may see (@sees_all: every one).
SELECT l.subject_project, l.key, l.offered, l.included, l.excluded, l.excluded_by, l.tokens, l.successes, l.failures,
       l.partials, l.answered, l.used, l.failure_order
FROM item_ledger_keys l
JOIN items i ON i.project = l.subject_project AND i.key = l.key
WHERE l.project = @project
  AND (@sees_all::boolean OR (NOT (@role::text = ANY (i.hidden_from)) AND (cardinality(i.visible_to) = 0 OR @role::text = ANY (i.visible_to))))
  AND (NOT @has_cursor::boolean
       OR (l.failure_order, -l.failures, l.subject_project, l.key) > (@cursor_order::double precision, @cursor_n::bigint, @cursor_project::text, @cursor_key::text))
ORDER BY l.failure_order, -l.failures, l.subject_project, l.key
LIMIT @lim;

-- name: LedgerByTokens :many
-- As LedgerByFailure, most tokens spent first.
SELECT l.subject_project, l.key, l.offered, l.included, l.excluded, l.excluded_by, l.tokens, l.successes, l.failures,
       l.partials, l.answered, l.used, l.failure_order
FROM item_ledger_keys l
JOIN items i ON i.project = l.subject_project AND i.key = l.key
WHERE l.project = @project
  AND (@sees_all::boolean OR (NOT (@role::text = ANY (i.hidden_from)) AND (cardinality(i.visible_to) = 0 OR @role::text = ANY (i.visible_to))))
  AND (NOT @has_cursor::boolean
       OR (-l.tokens, l.subject_project, l.key) > (@cursor_n::bigint, @cursor_project::text, @cursor_key::text))
ORDER BY -l.tokens, l.subject_project, l.key
LIMIT @lim;

-- name: LedgerByUnused :many
-- As LedgerByFailure, the items answers used least first (never, for
-- most), most tokens spent first among equals.
SELECT l.subject_project, l.key, l.offered, l.included, l.excluded, l.excluded_by, l.tokens, l.successes, l.failures,
       l.partials, l.answered, l.used, l.failure_order
FROM item_ledger_keys l
JOIN items i ON i.project = l.subject_project AND i.key = l.key
WHERE l.project = @project
  AND (@sees_all::boolean OR (NOT (@role::text = ANY (i.hidden_from)) AND (cardinality(i.visible_to) = 0 OR @role::text = ANY (i.visible_to))))
  AND (NOT @has_cursor::boolean
       OR (l.used, -l.tokens, l.subject_project, l.key) > (@cursor_used::bigint, @cursor_n::bigint, @cursor_project::text, @cursor_key::text))
ORDER BY l.used, -l.tokens, l.subject_project, l.key
LIMIT @lim;

-- name: LedgerFoldWithoutFlush :exec
-- A fold's commit need not wait for its WAL to reach the disk: the queue
-- rows it deletes are in the same transaction, so a crash that loses the
-- fold loses their deletion too, and the next fold counts them again. It
-- keeps the project's fold lock from being held across an fsync.
SELECT set_config('synchronous_commit', 'off', true);

-- name: LedgerQueued :one
-- Whether a project has packets or outcomes waiting to be folded: a probe
-- of the queue's primary key, so that a read with nothing to fold takes
-- no lock and writes nothing.
SELECT EXISTS (SELECT 1 FROM ledger_queue WHERE project = @project)::boolean AS queued;
