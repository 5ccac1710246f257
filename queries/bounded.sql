-- Bounded assembly (pipeline 2) reads narrow rows: what ranking, the
-- stages and the budget need (the rank fields, roles, validity, the stored
-- block token counts, the content hash), never the text. Since 00037 the
-- item row holds its current version's narrow columns, so a narrow row is
-- the item row alone, one index probe (a lane's page: one index range);
-- the version is read only for the text of the few entries that can go
-- in, last, by primary key (BoundedTexts).
-- Keys are compared in the C collation, so the database's order is the
-- byte order the pipeline sorts by.
--
-- Every statement here has one plan whatever the planner's statistics
-- (right after a bulk import there are none; TestAssemblyPlansNeedNoStatistics
-- checks it): what is read by key is read one index probe per key, a
-- LATERAL subquery with OFFSET 0 (which the planner cannot flatten into a
-- join it would then be free to hash) per key, and a lane's page is the
-- rank index's first rows. Without statistics PostgreSQL chose these plans
-- too; after ANALYZE of a small project it hashed item_versions whole
-- instead (when the narrow rows were still read from the versions).

-- name: BoundedAlways :many
-- One page of a layer's always-on items in rank order, after a cursor
-- (the rank tuple of the last row read; the smallest tuple to start).
SELECT i.project, i.key, i.current_version AS version, i.kind, i.source, i.priority, i.authority, i.confidence, i.state_key,
       i.valid_from, i.valid_until, i.slot, i.visible_to, i.hidden_from, i.template, i.content_sha256,
       i.block_tokens_o200k, i.block_tokens_cl100k, i.version_created_at AS created_at
FROM items i
WHERE i.project = @project AND i.live AND i.trigger_kind = 'always'
  AND (i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, i.key COLLATE "C")
      > (sqlc.arg(after_authority)::smallint, sqlc.arg(after_priority)::bigint, sqlc.arg(after_confidence)::smallint,
         sqlc.arg(after_time)::bigint, sqlc.arg(after_key)::text COLLATE "C")
ORDER BY i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, i.key COLLATE "C"
LIMIT @max;

-- name: BoundedTool :many
-- One page of a layer's items of one tool in rank order, after a cursor.
SELECT i.project, i.key, i.current_version AS version, i.kind, i.source, i.priority, i.authority, i.confidence, i.state_key,
       i.valid_from, i.valid_until, i.slot, i.visible_to, i.hidden_from, i.template, i.content_sha256,
       i.block_tokens_o200k, i.block_tokens_cl100k, i.version_created_at AS created_at
FROM items i
WHERE i.project = @project AND i.live AND i.trigger_tool = @tool
  AND (i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, i.key COLLATE "C")
      > (sqlc.arg(after_authority)::smallint, sqlc.arg(after_priority)::bigint, sqlc.arg(after_confidence)::smallint,
         sqlc.arg(after_time)::bigint, sqlc.arg(after_key)::text COLLATE "C")
ORDER BY i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, i.key COLLATE "C"
LIMIT @max;

-- name: BoundedToolOpenCounts :many
-- The open items of tools in a layer (kept by the item write path).
SELECT tool, open FROM tool_counters WHERE project = @project AND tool = ANY(@tools::text[]);

-- name: BoundedSmall :many
-- The pinned items of both layers (any trigger): one probe of each layer
-- for each pin.
SELECT i.project, i.key, i.current_version AS version, i.kind, i.source, i.priority, i.authority, i.confidence, i.state_key,
       i.valid_from, i.valid_until, i.slot, i.visible_to, i.hidden_from, i.template, i.content_sha256,
       i.block_tokens_o200k, i.block_tokens_cl100k, i.version_created_at AS created_at,
       i.trigger_kind, i.trigger_tool, i.trigger_keywords, i.trigger_match
FROM unnest(@projects::text[]) AS p(project)
CROSS JOIN unnest(@pins::text[]) AS k(key)
CROSS JOIN LATERAL (
    SELECT * FROM items it WHERE it.project = p.project AND it.key = k.key AND it.live OFFSET 0
) i;

-- name: BoundedKeywordRefs :many
-- The keyword items of a layer with a keyword that starts with a word a
-- person said, from item_keyword_terms (00038, 00040) alone: an
-- index-only scan of its primary key per term gives each match's rank
-- position and whether it is plain (fires on the term for every role at
-- every time); only for the rest is the row itself read, for the roles,
-- window, keywords and how they match that the lane needs to tell
-- whether they fire (00040; not in the index, whose rows are bounded).
-- Each term is a probe of its own (a join by its shape: with statistics
-- of a small table the planner would rather read it whole). An item
-- found by two of its terms comes twice; the store keeps one. @terms are
-- project, U+001F, word (the table's terms); a stem-mode item's are
-- project, U+001F, "~" and a stem. @terms are the words' terms and then
-- their stems'; @word_terms the words' alone, which are all it probes
-- when the layer has no stem-mode keyword item (most layers): one probe
-- of items_stem_keywords_idx (00037).
SELECT t.key, t.rank_authority, t.rank_priority, t.rank_confidence, t.rank_time, t.plain,
       j.visible_to, j.hidden_from, j.valid_from, j.valid_until, j.trigger_keywords, COALESCE(j.trigger_match, '')::text AS trigger_match
FROM unnest(CASE WHEN EXISTS (SELECT 1 FROM items s
                               WHERE s.project = @project AND s.live AND s.trigger_kind = 'keywords'
                                 AND s.trigger_match = 'stem')
                  THEN @terms::text[] ELSE @word_terms::text[] END) AS w(term)
CROSS JOIN LATERAL (
    SELECT it.project, it.term, it.key, it.rank_authority, it.rank_priority, it.rank_confidence, it.rank_time, it.plain
    FROM item_keyword_terms it WHERE it.project = @project AND it.term = w.term OFFSET 0
) t
LEFT JOIN LATERAL (
    SELECT x.visible_to, x.hidden_from, x.valid_from, x.valid_until, x.trigger_keywords, x.trigger_match
    FROM item_keyword_terms x WHERE x.project = t.project AND x.term = t.term AND x.key = t.key AND NOT t.plain OFFSET 0
) j ON true;

-- name: BoundedByKeys :many
-- Live items of one layer by key: the project items that may override a
-- _shared candidate, and the relevance winners. One probe per key.
SELECT i.project, i.key, i.current_version AS version, i.kind, i.source, i.priority, i.authority, i.confidence, i.state_key,
       i.valid_from, i.valid_until, i.slot, i.visible_to, i.hidden_from, i.template, i.content_sha256,
       i.block_tokens_o200k, i.block_tokens_cl100k, i.version_created_at AS created_at,
       i.trigger_kind, i.trigger_tool, i.trigger_keywords, i.trigger_match
FROM unnest(@keys::text[]) AS k(key)
CROSS JOIN LATERAL (
    SELECT * FROM items it WHERE it.project = @project AND it.key = k.key AND it.live OFFSET 0
) i;

-- name: BoundedStateGroups :many
-- Every live item of both layers that claims one of the state keys: the
-- contenders of a contradiction, whatever their trigger. One probe of the
-- state key index per layer and state key.
SELECT i.project, i.key, i.current_version AS version, i.kind, i.source, i.priority, i.authority, i.confidence, i.state_key,
       i.valid_from, i.valid_until, i.slot, i.visible_to, i.hidden_from, i.template, i.content_sha256,
       i.block_tokens_o200k, i.block_tokens_cl100k, i.version_created_at AS created_at,
       i.trigger_kind, i.trigger_tool, i.trigger_keywords, i.trigger_match
FROM unnest(@projects::text[]) AS p(project)
CROSS JOIN unnest(@state_keys::text[]) AS s(state_key)
CROSS JOIN LATERAL (
    SELECT * FROM items it
    WHERE it.project = p.project AND it.live AND it.state_key = s.state_key AND it.state_key <> '' OFFSET 0
) i;

-- name: BoundedTexts :many
-- The title and content of the versions that go into the text, with their
-- metadata and provenance, which the kxm and navi formats show.
SELECT v.project, v.key, v.version, v.title, v.content, v.metadata, v.provenance
FROM (SELECT unnest(@projects::text[]) AS project, unnest(@keys::text[]) AS key, unnest(@versions::integer[]) AS version) r
JOIN item_versions v ON v.project = r.project AND v.key = r.key AND v.version = r.version;

-- name: BoundedCountRestricted :one
-- The restricted items (with roles or a validity window) of a layer's
-- lane after a cursor that the role sees at a time, from item_restricted
-- (00039) alone: @lane is '' for the always-on lane, else a tool. With the
-- lane's counter of open items, the number of candidates a budget never
-- tried. A row whose roles are too many for its index entry has them
-- NULL (00041), and the item row has them: read for those rows alone,
-- which keeps the scan index-only. (One probe of items_pkey each: the
-- key in the index's collation, or the probe is by project alone.)
SELECT count(*)::bigint AS n
FROM item_restricted r
WHERE r.project = @project AND r.lane = @lane
  AND (r.rank_authority, r.rank_priority, r.rank_confidence, r.rank_time, r.key)
      > (sqlc.arg(after_authority)::smallint, sqlc.arg(after_priority)::bigint, sqlc.arg(after_confidence)::smallint,
         sqlc.arg(after_time)::bigint, sqlc.arg(after_key)::text COLLATE "C")
  AND (r.valid_from IS NULL OR r.valid_from <= @at::timestamptz)
  AND (r.valid_until IS NULL OR r.valid_until > @at::timestamptz)
  AND CASE WHEN r.visible_to IS NULL THEN
           (SELECT (cardinality(i.visible_to) = 0 OR @role::text = ANY(i.visible_to)) AND NOT (@role::text = ANY(i.hidden_from))
            FROM items i WHERE i.project = r.project AND i.key = r.key COLLATE "default")
      ELSE (cardinality(r.visible_to) = 0 OR @role::text = ANY(r.visible_to)) AND NOT (@role::text = ANY(r.hidden_from)) END;

-- name: BoundedOpenCounts :many
-- The open always-on items of each layer (kept by the item write path).
SELECT project, always_open FROM project_counters WHERE project = ANY(@projects::text[]);

-- name: QueryLexemes :many
-- The lexemes of a relevance query, as the relevance index stores them
-- (english stemming, stop words out), in byte order, at most @max.
SELECT x.lexeme::text AS lexeme
FROM unnest(tsvector_to_array(to_tsvector('english', @query::text))) AS x(lexeme)
ORDER BY x.lexeme COLLATE "C"
LIMIT @max;

-- name: BoundedRelevanceLists :many
-- For each layer and each of the query's lexemes (english stemming, stop
-- words out, at most @max_lexemes in byte order), the @per_lexeme
-- relevance items of highest weight that are valid at @at and visible to
-- @role: hidden and expired items are filtered before the limit, so they
-- never take a place. Every row carries the number of the query's lexemes.
WITH x AS (
    SELECT l.lexeme::text AS lexeme
    FROM unnest(tsvector_to_array(to_tsvector('english', @query::text))) AS l(lexeme)
    ORDER BY l.lexeme COLLATE "C"
    LIMIT @max_lexemes
)
SELECT p.project::text AS project, x.lexeme, t.key, t.weight, (SELECT count(*) FROM x)::integer AS lexemes
FROM unnest(@projects::text[]) AS p(project)
CROSS JOIN x
CROSS JOIN LATERAL (
    SELECT t.key, t.weight
    FROM item_terms t
    WHERE t.project = p.project AND t.lexeme COLLATE "C" = x.lexeme
      AND (t.open OR EXISTS (
          SELECT 1 FROM item_versions v
          WHERE v.project = t.project AND v.key = t.key AND v.version = t.version
            AND (v.valid_from IS NULL OR v.valid_from <= @at::timestamptz)
            AND (v.valid_until IS NULL OR v.valid_until > @at::timestamptz)
            AND (cardinality(v.visible_to) = 0 OR @role::text = ANY(v.visible_to)) AND NOT (@role::text = ANY(v.hidden_from))))
    ORDER BY t.weight DESC, t.key COLLATE "C"
    LIMIT @per_lexeme
) t;

-- name: SnapshotTerms :many
-- The relevance weights of the relevance items current in a snapshot,
-- as the item write path computes them, for the query's @lexemes alone
-- (the weights rank the postings of those only): replay and why rank
-- from these. A version still current has them in item_terms, which the
-- write path (and a redaction, with the item row's vector) keeps: one
-- probe of its primary key per item. An older one's are computed from
-- its text by the same functions, the vector once: contextd_term_weights
-- is inlined, and its argument appears in it twice for every lexeme
-- (unnest and length), so the vector is a column of its own first
-- (OFFSET 0 keeps it one). Given the expression, an old version's vector
-- was computed again for each of its lexemes: 18 ms instead of 0.2 for
-- an item of ~1 KB. The two branches give a version the same weights
-- (TestSnapshotTermsAreTheVectorsWeights), so which one a version takes,
-- by the items row as this transaction sees it (on the read replica a
-- later state than the snapshot's), does not change the answer.
WITH cur AS (
    SELECT DISTINCT ON (project, key) project, key, version, deleted
    FROM item_versions
    WHERE project = ANY(@projects::text[])
      AND pg_visible_in_snapshot(xact_id::text::xid8, (@snapshot::text)::pg_snapshot)
    ORDER BY project, key, version DESC
), rel AS (
    SELECT s.project, s.key, s.version, (i.current_version = s.version AND i.search IS NOT NULL) AS current
    FROM cur
    JOIN item_versions s ON s.project = cur.project AND s.key = cur.key AND s.version = cur.version
    JOIN items i ON i.project = s.project AND i.key = s.key
    WHERE NOT cur.deleted AND s.trigger @> '{"relevance": true}'
)
SELECT r.project, r.key, t.lexeme::text AS lexeme, t.weight::integer AS weight
FROM rel r
JOIN item_terms t ON t.project = r.project AND t.key = r.key AND t.lexeme = ANY(@lexemes::text[]) AND t.version = r.version
WHERE r.current
UNION ALL
SELECT r.project, r.key, w.lexeme::text AS lexeme, w.weight::integer AS weight
FROM rel r
JOIN item_versions s ON s.project = r.project AND s.key = r.key AND s.version = r.version
CROSS JOIN LATERAL (SELECT contextd_search_vector(s.title, s.summary, s.content) AS vec OFFSET 0) sv
CROSS JOIN LATERAL contextd_term_weights(sv.vec) w
WHERE NOT r.current AND w.lexeme = ANY(@lexemes::text[]);

-- name: ItemTermsDelete :exec
-- The item write path rewrites the relevance index of every key it writes.
-- (contextd_item_terms_delete, migration 00022: one delete by key each.)
SELECT contextd_item_terms_delete(@project, @keys::text[]);

-- name: ItemTermsInsert :exec
-- The relevance index rows of the keys' current versions that are live
-- relevance items (weights by contextd_term_weights, migration 00005).
INSERT INTO item_terms (project, lexeme, weight, key, version, open)
-- One probe of items per key, by construction (see ItemSetCurrentMany).
SELECT i.project, t.lexeme, t.weight, i.key, i.current_version, i.open
FROM unnest(@keys::text[]) AS k(key)
CROSS JOIN LATERAL (SELECT * FROM items AS it WHERE it.project = @project AND it.key = k.key OFFSET 0) AS i
CROSS JOIN LATERAL contextd_term_weights(i.search) t
WHERE i.live AND i.trigger_kind = 'relevance';
