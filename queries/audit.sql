-- name: AuditAppend :exec
-- Appends entries to a chain under its head's lock (migration 00011);
-- item writes send it with COMMIT, so the lock is held for the commit.
SELECT contextd_audit_append(@chain::text, @kinds::text[], @subjects::text[], @bodies::bytea[]);

-- name: AuditEntriesPage :many
SELECT seq, kind, subject, body, entry_hash, chain_hash FROM audit_entries
WHERE chain = @chain AND seq > @after
ORDER BY seq
LIMIT @lim;

-- name: AuditHead :one
SELECT seq, hash FROM audit_heads WHERE chain = @chain;

-- name: ItemStatePage :many
-- A page of a project's item rows by key, for the audit's state check.
SELECT key, current_version, live FROM items
WHERE project = @project AND key > @after_key
ORDER BY key
LIMIT @lim;

-- name: PacketAuditRows :many
SELECT * FROM packets WHERE project = @project AND id = ANY(@ids::text[]);

-- name: PacketRecordAuditRows :many
SELECT * FROM packet_records WHERE project = @project AND packet_id = ANY(@ids::text[]) ORDER BY packet_id, ord;

-- name: HandoffEventAuditRows :many
SELECT * FROM handoff_events WHERE project = @project AND seq = ANY(@seqs::bigint[]);

-- name: HandoffAuditPage :many
SELECT * FROM handoffs WHERE project = @project AND id > @after_id ORDER BY id LIMIT @lim;

-- name: PacketIDPage :many
SELECT id FROM packets WHERE project = @project AND id > @after_id ORDER BY id LIMIT @lim;

-- name: HandoffEventSeqPage :many
SELECT seq FROM handoff_events WHERE project = @project AND seq > @after ORDER BY seq LIMIT @lim;
