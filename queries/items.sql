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
-- Moves each item to its new version and refreshes the denormalised trigger.
-- trigger_words holds one comma-joined string per key (they cannot be a
-- ragged array); empty means none.
UPDATE items i
SET current_version = u.version, live = u.live, trigger_kind = u.trigger_kind,
    trigger_tool = nullif(u.trigger_tool, ''),
    trigger_words = CASE WHEN u.trigger_words = '' THEN '{}'::text[] ELSE string_to_array(u.trigger_words, ',') END,
    updated_at = now()
FROM (SELECT unnest(@keys::text[]) AS key, unnest(@versions::integer[]) AS version,
             unnest(@lives::boolean[]) AS live, unnest(@trigger_kinds::text[]) AS trigger_kind,
             unnest(@trigger_tools::text[]) AS trigger_tool, unnest(@trigger_words::text[]) AS trigger_words) u
WHERE i.project = @project AND i.key = u.key;
