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
UPDATE items i
SET current_version = u.version, updated_at = now()
FROM (SELECT unnest(@keys::text[]) AS key, unnest(@versions::integer[]) AS version) u
WHERE i.project = @project AND i.key = u.key;
