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

-- name: ItemVersionAuditPage :many
-- A project's item versions in the order they were written, for the
-- backfill of a chain older data has none of.
SELECT v.project, v.key, v.version, v.deleted, v.kind, v.source, v.title, v.summary, v.content,
       v.priority, v.authority, v.confidence, v.state_key, v.valid_from, v.valid_until, v.slot,
       v.trigger, v.visible_to, v.hidden_from, v.template, v.metadata, v.provenance,
       v.fields_sha256, v.content_sha256, v.tokens_o200k, v.tokens_cl100k,
       v.block_tokens_o200k, v.block_tokens_cl100k, v.created_by, v.created_at
FROM item_versions v
WHERE v.project = @project AND (v.created_at, v.key, v.version) > (@after_time::timestamptz, @after_key::text, @after_version::integer)
ORDER BY v.created_at, v.key, v.version
LIMIT @lim;

-- name: AuditUnchained :many
-- The projects whose chain has no entry yet.
SELECT p.project FROM projects p
WHERE NOT EXISTS (SELECT 1 FROM audit_heads h WHERE h.chain = p.project)
ORDER BY p.project;

-- name: AuditBackfillLock :exec
-- Serialises the backfill of one chain among processes starting at once.
SELECT pg_advisory_xact_lock(hashtext('contextd.audit.backfill'), hashtext(@chain::text));
