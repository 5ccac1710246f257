-- name: CandidateAlways :many
-- Candidate selection for packet assembly is one query per layer, each
-- bounded by an index, so its work grows with the plausible candidates and
-- not with the size of the project.
SELECT v.* FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
WHERE i.project = @project AND i.live AND i.trigger_kind = 'always';

-- name: CandidateByKeys :many
-- Pins, and project items that may override _shared candidates.
SELECT v.* FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
WHERE i.project = @project AND i.key = ANY(@keys::text[]) AND i.live;

-- name: CandidateKeywords :many
-- Keyword items whose keywords start with a word a person said; the match
-- itself is confirmed in Go.
SELECT v.* FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
WHERE i.project = @project AND i.live AND i.trigger_kind = 'keywords' AND i.trigger_words && @words::text[];

-- name: CandidateRelevance :many
-- The top matches of the query among relevance items of both layers: the
-- query's english lexemes OR-ed, ranked by ts_rank_cd. Every match must be
-- ranked before the top can be taken, so the ranking reads only the search
-- vector and the full rows are fetched for the top ones alone.
WITH q AS (
    SELECT coalesce(to_tsquery('simple', (
        SELECT string_agg(quote_literal(lexeme), ' | ') FROM unnest(to_tsvector('english', @query::text)))), ''::tsquery) AS query
), top AS (
    SELECT s.project, s.key, s.version, ts_rank_cd(s.search, q.query)::float8 AS rank
    FROM item_versions s
    JOIN items i ON i.project = s.project AND i.key = s.key AND i.current_version = s.version, q
    WHERE s.project = ANY(@projects::text[]) AND s.trigger @> '{"relevance": true}' AND s.search @@ q.query
      AND i.live AND i.trigger_kind = 'relevance'
      AND (s.valid_from IS NULL OR s.valid_from <= @at::timestamptz)
      AND (s.valid_until IS NULL OR s.valid_until > @at::timestamptz)
    ORDER BY rank DESC, s.key, s.project
    LIMIT @max
)
SELECT sqlc.embed(v), top.rank
FROM top JOIN item_version_rows v ON v.project = top.project AND v.key = top.key AND v.version = top.version
ORDER BY top.rank DESC, v.key, v.project;

-- name: CandidateTools :many
SELECT v.* FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
WHERE i.project = @project AND i.live AND i.trigger_tool = ANY(@tools::text[]);

-- name: SnapshotVersions :many
-- The current version of every item as a snapshot saw it (replay, and why
-- for items a packet did not record).
SELECT DISTINCT ON (v.project, v.key) v.*
FROM item_version_rows v
WHERE v.project = ANY(@projects::text[])
  AND (sqlc.narg('key')::text IS NULL OR v.key = sqlc.narg('key'))
  AND pg_visible_in_snapshot(v.xact_id::text::xid8, (@snapshot::text)::pg_snapshot)
ORDER BY v.project, v.key, v.version DESC;

-- name: SnapshotRelevance :many
-- CandidateRelevance as a snapshot saw it.
WITH cur AS (
    SELECT DISTINCT ON (project, key) project, key, version, deleted
    FROM item_versions
    WHERE project = ANY(@projects::text[])
      AND pg_visible_in_snapshot(xact_id::text::xid8, (@snapshot::text)::pg_snapshot)
    ORDER BY project, key, version DESC
)
SELECT s.project, s.key, ts_rank_cd(s.search, q.query)::float8 AS rank
FROM cur
JOIN item_versions s ON s.project = cur.project AND s.key = cur.key AND s.version = cur.version,
     (SELECT coalesce(to_tsquery('simple', (
          SELECT string_agg(quote_literal(lexeme), ' | ') FROM unnest(to_tsvector('english', @query::text)))), ''::tsquery)) AS q(query)
WHERE NOT cur.deleted AND s.trigger @> '{"relevance": true}'
  AND s.search @@ q.query
  AND (s.valid_from IS NULL OR s.valid_from <= @at::timestamptz)
  AND (s.valid_until IS NULL OR s.valid_until > @at::timestamptz)
ORDER BY rank DESC, s.key, s.project
LIMIT @max;

-- name: ItemVersionMatches :one
-- Whether one version matches a query the way the relevance layer matches.
SELECT coalesce(s.search @@ coalesce(to_tsquery('simple', (
           SELECT string_agg(quote_literal(lexeme), ' | ') FROM unnest(to_tsvector('english', @query::text)))), ''::tsquery), false)::boolean AS matched
FROM item_versions s
WHERE s.project = @project AND s.key = @key AND s.version = @version;
