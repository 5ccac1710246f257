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
-- query's english lexemes OR-ed, ranked by ts_rank_cd.
SELECT sqlc.embed(v), ts_rank_cd(s.search, q.query)::float8 AS rank
FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
JOIN item_versions s ON s.project = v.project AND s.key = v.key AND s.version = v.version,
     (SELECT coalesce(to_tsquery('simple', (
          SELECT string_agg(quote_literal(lexeme), ' | ') FROM unnest(to_tsvector('english', @query::text)))), ''::tsquery)) AS q(query)
WHERE i.project = ANY(@projects::text[]) AND i.live AND i.trigger_kind = 'relevance'
  AND s.trigger @> '{"relevance": true}' AND s.search @@ q.query
  AND (v.valid_from IS NULL OR v.valid_from <= @at::timestamptz)
  AND (v.valid_until IS NULL OR v.valid_until > @at::timestamptz)
ORDER BY rank DESC, v.key, v.project
LIMIT @max;

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
