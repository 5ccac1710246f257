-- name: ItemVersionCurrent :one
SELECT v.* FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
WHERE i.project = @project AND i.key = @key;

-- name: ItemVersionCurrentMany :many
-- One probe of items and one of item_versions per key, by construction
-- (see ItemSetCurrentMany).
SELECT v.* FROM unnest(@keys::text[]) AS k(key)
CROSS JOIN LATERAL (SELECT it.current_version FROM items AS it WHERE it.project = @project AND it.key = k.key OFFSET 0) AS i
CROSS JOIN LATERAL (
    SELECT * FROM item_version_rows AS r WHERE r.project = @project AND r.key = k.key AND r.version = i.current_version OFFSET 0
) AS v;

-- name: ItemVersionGet :one
SELECT * FROM item_version_rows
WHERE project = @project AND key = @key AND version = @version;

-- name: ItemVersionAsOf :one
SELECT * FROM item_version_rows
WHERE project = @project AND key = @key AND created_at <= @as_of
ORDER BY version DESC
LIMIT 1;

-- name: ItemVersionList :many
-- The versions of an item the caller's role may see: a version whose roles
-- exclude the role does not exist for it, even when a later one is public.
SELECT * FROM item_version_rows
WHERE project = @project AND key = @key AND version > @after
  AND (@see_all::boolean OR ((cardinality(visible_to) = 0 OR @role::text = ANY(visible_to)) AND NOT (@role::text = ANY(hidden_from))))
ORDER BY version
LIMIT @max;

-- name: ItemVersionListLatest :many
-- Latest live versions, by key, for one page of a listing. Role filtering
-- happens here so that a page is never short because of hidden items.
SELECT v.* FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
WHERE i.project = @project
  AND i.key > @after_key
  AND NOT v.deleted
  AND (sqlc.narg('kind')::text IS NULL OR v.kind = sqlc.narg('kind'))
  AND (sqlc.narg('source')::text IS NULL OR v.source = sqlc.narg('source'))
  AND (@see_all::boolean OR ((cardinality(v.visible_to) = 0 OR @role::text = ANY(v.visible_to)) AND NOT (@role::text = ANY(v.hidden_from))))
ORDER BY i.key
LIMIT @max;

-- name: ItemVersionSearchLatest :many
-- Latest live versions matching a full-text query, by rank then key. The
-- cursor is (rank, key) of the last row of the previous page.
SELECT sqlc.embed(v), ts_rank_cd(i.search, q.query)::float8 AS rank
FROM items i
JOIN item_version_rows v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version,
     websearch_to_tsquery('english', @q::text) AS q(query)
WHERE i.project = @project
  AND i.live
  AND i.search @@ q.query
  AND (sqlc.narg('kind')::text IS NULL OR v.kind = sqlc.narg('kind'))
  AND (sqlc.narg('source')::text IS NULL OR v.source = sqlc.narg('source'))
  AND (@see_all::boolean OR ((cardinality(v.visible_to) = 0 OR @role::text = ANY(v.visible_to)) AND NOT (@role::text = ANY(v.hidden_from))))
  AND (NOT @has_cursor::boolean
       OR ts_rank_cd(i.search, q.query)::float8 < @after_rank::float8
       OR (ts_rank_cd(i.search, q.query)::float8 = @after_rank::float8 AND i.key > @after_key))
ORDER BY rank DESC, i.key
LIMIT @max;

-- name: ItemVersionInsert :exec
-- One version, as ItemVersionInsertMany writes many: a single write sends
-- it in its pipeline, where a COPY would take two round trips of its own.
INSERT INTO item_versions (
    project, key, version, deleted, kind, source, title, summary, content,
    priority, authority, confidence, state_key, valid_from, valid_until, slot,
    trigger, visible_to, hidden_from, template, metadata, provenance,
    fields_sha256, content_sha256, tokens_o200k, tokens_cl100k,
    block_tokens_o200k, block_tokens_cl100k, created_by, created_at
) VALUES (
    @project, @key, @version, @deleted, @kind, @source, @title, @summary, @content,
    @priority, @authority, @confidence, @state_key, @valid_from, @valid_until, @slot,
    @trigger, @visible_to, @hidden_from, @template, @metadata, @provenance,
    @fields_sha256, @content_sha256, @tokens_o200k, @tokens_cl100k,
    @block_tokens_o200k, @block_tokens_cl100k, @created_by, @created_at
);

-- name: ItemVersionInsertMany :copyfrom
INSERT INTO item_versions (
    project, key, version, deleted, kind, source, title, summary, content,
    priority, authority, confidence, state_key, valid_from, valid_until, slot,
    trigger, visible_to, hidden_from, template, metadata, provenance,
    fields_sha256, content_sha256, tokens_o200k, tokens_cl100k,
    block_tokens_o200k, block_tokens_cl100k, created_by, created_at
) VALUES (
    @project, @key, @version, @deleted, @kind, @source, @title, @summary, @content,
    @priority, @authority, @confidence, @state_key, @valid_from, @valid_until, @slot,
    @trigger, @visible_to, @hidden_from, @template, @metadata, @provenance,
    @fields_sha256, @content_sha256, @tokens_o200k, @tokens_cl100k,
    @block_tokens_o200k, @block_tokens_cl100k, @created_by, @created_at
);

-- name: ItemVersionAuditRows :many
-- The item versions audit entries cover, as stored, by (key, version).
SELECT v.project, v.key, v.version, v.deleted, v.kind, v.source, v.title, v.summary, v.content,
       v.priority, v.authority, v.confidence, v.state_key, v.valid_from, v.valid_until, v.slot,
       v.trigger, v.visible_to, v.hidden_from, v.template, v.metadata, v.provenance,
       v.fields_sha256, v.content_sha256, v.tokens_o200k, v.tokens_cl100k,
       v.block_tokens_o200k, v.block_tokens_cl100k, v.created_by, v.created_at
FROM item_versions v
JOIN (SELECT unnest(@keys::text[]) AS key, unnest(@versions::integer[]) AS version) s
  ON v.key = s.key AND v.version = s.version
WHERE v.project = @project;

-- name: ItemVersionKeysPage :many
-- A page of a project's item versions by (key, version), for the audit's
-- check that every version has an entry.
SELECT key, version FROM item_versions
WHERE project = @project AND (key, version) > (@after_key::text, @after_version::integer)
ORDER BY key, version
LIMIT @lim;

-- name: ItemVersionKindSources :many
-- The kind and source of versions by (key, version): what a packet's
-- provenance counts were made of.
SELECT v.key, v.version, v.kind, v.source
FROM item_versions v
JOIN (SELECT unnest(@keys::text[]) AS key, unnest(@versions::integer[]) AS version) s
  ON v.key = s.key AND v.version = s.version
WHERE v.project = @project;
