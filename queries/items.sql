-- name: ItemEnsure :exec
INSERT INTO items (project, key) VALUES (@project, @key)
ON CONFLICT (project, key) DO NOTHING;

-- name: ItemEnsureMany :exec
INSERT INTO items (project, key)
SELECT @project, unnest(@keys::text[])
ON CONFLICT (project, key) DO NOTHING;

-- name: ItemLockMany :many
SELECT * FROM items
WHERE project = @project AND key = ANY(@keys::text[])
ORDER BY key
FOR UPDATE;

-- name: ItemLock :one
SELECT * FROM items WHERE project = @project AND key = @key FOR UPDATE;

-- name: ItemSetCurrentMany :exec
-- Moves each item to its new version and refreshes what assembly reads
-- from the item row: the denormalised trigger, the rank fields of the
-- version (see migration 00005: ascending is the packet's rank order),
-- its state key and whether it is open (no roles, no validity window);
-- and keeps the project's count of open always-on items in step, in the
-- same statement. trigger_words holds one comma-joined string per key
-- (they cannot be a ragged array); empty means none.
WITH u AS (
    SELECT unnest(@keys::text[]) AS key, unnest(@versions::integer[]) AS version,
           unnest(@lives::boolean[]) AS live, unnest(@trigger_kinds::text[]) AS trigger_kind,
           unnest(@trigger_tools::text[]) AS trigger_tool, unnest(@trigger_words::text[]) AS trigger_words
), old AS (
    SELECT i.live AND i.trigger_kind = 'always' AND i.open AS was_open, CASE WHEN i.live AND i.open THEN i.trigger_tool END AS was_tool
    FROM items i JOIN u ON i.key = u.key
    WHERE i.project = @project
), upd AS (
    UPDATE items i
    SET current_version = u.version, live = u.live, trigger_kind = u.trigger_kind,
        trigger_tool = nullif(u.trigger_tool, ''),
        trigger_words = CASE WHEN u.trigger_words = '' THEN '{}'::text[] ELSE string_to_array(u.trigger_words, ',') END,
        trigger_terms = CASE WHEN u.trigger_words = '' THEN '{}'::text[]
                        ELSE ARRAY(SELECT @project || E'\x1f' || w FROM unnest(string_to_array(u.trigger_words, ',')) AS w) END,
        rank_authority  = -(CASE v.authority WHEN 'policy' THEN 4 WHEN 'instruction' THEN 3 WHEN 'evidence' THEN 2 WHEN 'hypothesis' THEN 1 ELSE 0 END),
        rank_priority   = -v.priority::bigint,
        rank_confidence = -(CASE v.confidence WHEN 'verified' THEN 3 WHEN 'probable' THEN 2 WHEN 'uncertain' THEN 1 ELSE 0 END),
        rank_time       = -(extract(epoch FROM v.created_at) * 1000000)::bigint,
        state_key       = v.state_key,
        open            = (cardinality(v.visible_to) = 0 AND cardinality(v.hidden_from) = 0 AND v.valid_from IS NULL AND v.valid_until IS NULL),
        visible_to = v.visible_to, hidden_from = v.hidden_from, valid_from = v.valid_from, valid_until = v.valid_until,
        trigger_keywords = coalesce(ARRAY(SELECT jsonb_array_elements_text(v.trigger -> 'keywords')), '{}'),
        updated_at = now()
    FROM u
    JOIN item_versions v ON v.project = @project AND v.key = u.key AND v.version = u.version
    WHERE i.project = @project AND i.key = u.key
    RETURNING (i.live AND i.trigger_kind = 'always' AND i.open) AS is_open, CASE WHEN i.live AND i.open THEN i.trigger_tool END AS is_tool
), tools AS (
    INSERT INTO tool_counters (project, tool, open)
    SELECT @project, d.tool, sum(d.n) FROM (
        SELECT was_tool AS tool, -1 AS n FROM old WHERE was_tool IS NOT NULL
        UNION ALL
        SELECT is_tool, 1 FROM upd WHERE is_tool IS NOT NULL
    ) d
    GROUP BY d.tool
    ORDER BY d.tool -- one lock order for every writer
    ON CONFLICT (project, tool) DO UPDATE SET open = tool_counters.open + EXCLUDED.open
)
INSERT INTO project_counters (project, always_open)
SELECT @project, (SELECT count(*) FILTER (WHERE is_open) FROM upd) - (SELECT count(*) FILTER (WHERE was_open) FROM old)
ON CONFLICT (project) DO UPDATE SET always_open = project_counters.always_open + EXCLUDED.always_open;
