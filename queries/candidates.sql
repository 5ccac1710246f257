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
-- Pipeline 1's relevance ranking (ts_rank_cd over every match) as a
-- snapshot saw it: pipeline 1 packets replay with it.
WITH cur AS (
    SELECT DISTINCT ON (project, key) project, key, version, deleted
    FROM item_versions
    WHERE project = ANY(@projects::text[])
      AND pg_visible_in_snapshot(xact_id::text::xid8, (@snapshot::text)::pg_snapshot)
    ORDER BY project, key, version DESC
)
SELECT s.project, s.key, ts_rank_cd(contextd_search_vector(s.title, s.summary, s.content), q.query)::float8 AS rank
FROM cur
JOIN item_versions s ON s.project = cur.project AND s.key = cur.key AND s.version = cur.version,
     (SELECT coalesce(to_tsquery('simple', (
          SELECT string_agg(quote_literal(lexeme), ' | ') FROM unnest(to_tsvector('english', @query::text)))), ''::tsquery)) AS q(query)
WHERE NOT cur.deleted AND s.trigger @> '{"relevance": true}'
  AND contextd_search_vector(s.title, s.summary, s.content) @@ q.query
  AND (s.valid_from IS NULL OR s.valid_from <= @at::timestamptz)
  AND (s.valid_until IS NULL OR s.valid_until > @at::timestamptz)
ORDER BY rank DESC, s.key, s.project
LIMIT @max;

-- name: ItemVersionMatches :one
-- Whether one version matches a query the way the relevance layer matches.
SELECT coalesce(contextd_search_vector(s.title, s.summary, s.content) @@ coalesce(to_tsquery('simple', (
           SELECT string_agg(quote_literal(lexeme), ' | ') FROM unnest(to_tsvector('english', @query::text)))), ''::tsquery), false)::boolean AS matched
FROM item_versions s
WHERE s.project = @project AND s.key = @key AND s.version = @version;
