-- name: ItemLockCurrentMany :many
-- The write path's one read: locks the item rows of the keys that exist, in
-- key order (two writers cannot deadlock on them), with what a write
-- compares with (the current version, whether it is live, its roles and its
-- fields hash). A key with no row is new. The rows alone, not a join: after
-- waiting for a lock, read committed gives the newest row, where a joined
-- table would still be read in the statement's older snapshot.
-- Driven by the keys (sorted by the caller, so rows are locked in key
-- order), one index probe each: the plan cannot become a scan of the
-- project, whatever the statistics say (see ItemSetCurrentMany).
SELECT i.key, i.current_version, i.live, i.visible_to, i.hidden_from, i.fields_sha256, i.trigger_kind, i.trigger_tool, i.open, i.rank_time
FROM unnest(@keys::text[]) AS k(key)
CROSS JOIN LATERAL (SELECT * FROM items AS it WHERE it.project = @project AND it.key = k.key FOR UPDATE) AS i;

-- name: ItemLock :one
SELECT * FROM items WHERE project = @project AND key = @key FOR UPDATE;

-- name: ItemSetCurrentMany :exec
-- Writes each item's row once, from its new version (already appended):
-- inserts the row of a new key, or moves an existing one to the version.
-- The row holds what assembly reads from it: the denormalised trigger, the
-- rank fields of the version (see migration 00005: ascending is the
-- packet's rank order), its state key and whether it is open (no roles,
-- no validity window), the fields hash a later write compares with, the
-- search vector of a live version (contextd_search_vector, computed here
-- once). The version's narrow columns (kind, source, block tokens, the
-- content hash, ...: a lane reads the item row alone) are copied by a
-- trigger as the row moves to the version (00037).
-- (ItemStatePage, the audit's check of these rows, derives the rank,
-- roles, window, keywords and match from the version as this does: change
-- them together.)
-- The counters of open items move with ProjectCountersAdd and
-- ToolCountersAdd, sent with COMMIT. trigger_words holds one comma-joined
-- string per key (they cannot be a ragged array); empty means none. They
-- are keyword.Term of each keyword: its first word, or for a stem-mode
-- item ("match": "stem", trigger_match) "~" and the first word's stem.
-- searches, when not empty, are the versions' search vectors already
-- computed (SearchVectors, in key order like the other arrays); when empty
-- unnest pads it with NULLs and each vector is computed here.
WITH u AS (
    SELECT unnest(@keys::text[]) AS key, unnest(@versions::integer[]) AS version,
           unnest(@lives::boolean[]) AS live, unnest(@trigger_kinds::text[]) AS trigger_kind,
           unnest(@trigger_tools::text[]) AS trigger_tool, unnest(@trigger_words::text[]) AS trigger_words,
           unnest(@searches::text[]) AS search
)
INSERT INTO items AS i (project, key, current_version, live, trigger_kind, trigger_tool, trigger_words, trigger_terms,
                        rank_authority, rank_priority, rank_confidence, rank_time, state_key, open,
                        visible_to, hidden_from, valid_from, valid_until, trigger_keywords, trigger_match, fields_sha256, search)
SELECT @project, u.key, u.version, u.live, u.trigger_kind, nullif(u.trigger_tool, ''),
    CASE WHEN u.trigger_words = '' THEN '{}'::text[] ELSE string_to_array(u.trigger_words, ',') END,
    CASE WHEN u.trigger_words = '' THEN '{}'::text[]
         ELSE ARRAY(SELECT @project || E'\x1f' || w FROM unnest(string_to_array(u.trigger_words, ',')) AS w) END,
    -(CASE v.authority WHEN 'policy' THEN 4 WHEN 'instruction' THEN 3 WHEN 'evidence' THEN 2 WHEN 'hypothesis' THEN 1 ELSE 0 END),
    -v.priority::bigint,
    -(CASE v.confidence WHEN 'verified' THEN 3 WHEN 'probable' THEN 2 WHEN 'uncertain' THEN 1 ELSE 0 END),
    -(extract(epoch FROM v.created_at) * 1000000)::bigint,
    v.state_key,
    (cardinality(v.visible_to) = 0 AND cardinality(v.hidden_from) = 0 AND v.valid_from IS NULL AND v.valid_until IS NULL),
    v.visible_to, v.hidden_from, v.valid_from, v.valid_until,
    coalesce(ARRAY(SELECT jsonb_array_elements_text(v.trigger -> 'keywords')), '{}'),
    CASE WHEN v.trigger ->> 'match' = 'stem' THEN 'stem' ELSE 'word' END,
    v.fields_sha256,
    CASE WHEN u.live THEN coalesce(u.search::tsvector, contextd_search_vector(v.title, v.summary, v.content)) END
FROM u
-- One probe of the version's primary key per row, by construction (the
-- lateral subquery with OFFSET 0 is not flattened into a join): statistics
-- taken while the tables were small (autovacuum off, or not yet run) once
-- made the cached plan scan all of the project's versions for each write.
CROSS JOIN LATERAL (
    SELECT * FROM item_versions AS iv WHERE iv.project = @project AND iv.key = u.key AND iv.version = u.version OFFSET 0
) AS v
ORDER BY u.key -- one lock order for every writer
ON CONFLICT (project, key) DO UPDATE
SET current_version = EXCLUDED.current_version, live = EXCLUDED.live, trigger_kind = EXCLUDED.trigger_kind,
    trigger_tool = EXCLUDED.trigger_tool, trigger_words = EXCLUDED.trigger_words, trigger_terms = EXCLUDED.trigger_terms,
    rank_authority = EXCLUDED.rank_authority, rank_priority = EXCLUDED.rank_priority,
    rank_confidence = EXCLUDED.rank_confidence, rank_time = EXCLUDED.rank_time,
    state_key = EXCLUDED.state_key, open = EXCLUDED.open,
    visible_to = EXCLUDED.visible_to, hidden_from = EXCLUDED.hidden_from,
    valid_from = EXCLUDED.valid_from, valid_until = EXCLUDED.valid_until,
    trigger_keywords = EXCLUDED.trigger_keywords, trigger_match = EXCLUDED.trigger_match, fields_sha256 = EXCLUDED.fields_sha256,
    search = EXCLUDED.search, updated_at = now();

-- name: ProjectCountersAdd :exec
-- Moves the project's count of open always-on items by @always_open. Item
-- writes send it with COMMIT, and only when the count moves.
INSERT INTO project_counters (project, always_open) VALUES (@project, @always_open)
ON CONFLICT (project) DO UPDATE SET always_open = project_counters.always_open + EXCLUDED.always_open;

-- name: ToolCountersAdd :exec
-- Moves the counts of open items of tools, in tool order (one lock order
-- for every writer); sent with COMMIT like ProjectCountersAdd.
INSERT INTO tool_counters (project, tool, open)
SELECT @project, t.tool, t.n
FROM (SELECT unnest(@tools::text[]) AS tool, unnest(@deltas::bigint[]) AS n) t
ORDER BY t.tool
ON CONFLICT (project, tool) DO UPDATE SET open = tool_counters.open + EXCLUDED.open;

-- name: ItemRetiredMany :many
-- For the keys whose current version is a tombstone, the fields hash of
-- the version before it: an import of a KXM item that is superseded or
-- rejected writes it and then tombstones it, and a second import of the
-- same item compares with that version (the same fields: unchanged). Read
-- after the write path has locked the rows.
SELECT i.key, i.current_version, i.visible_to, i.hidden_from, v.fields_sha256
FROM items i
JOIN item_versions v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version - 1
WHERE i.project = @project AND i.key = ANY(@keys::text[]) AND NOT i.live AND NOT v.deleted;

-- name: SearchVectors :many
-- contextd_search_vector of each (title, summary, content), in the arrays'
-- order, as text: computed ahead of a batch's write on a connection of its
-- own (Store.SearchVectors).
-- (A select list's set-returning functions run in step and keep their
-- order; the rows come out as the arrays go.)
SELECT contextd_search_vector(t.title, t.summary, t.content)::text AS search
FROM (SELECT unnest(@titles::text[]) AS title, unnest(@summaries::text[]) AS summary,
             unnest(@contents::text[]) AS content) AS t;
