-- name: PacketRecordInjections :many
-- Packets of one project that included an item of subject_project, newest
-- first, in the order of packet_records_injections_idx: a page reads a
-- page of the index.
SELECT r.packet_id, r.project, r.subject_version, r.section, r.rule, r.created_at,
       p.target_role, p.created_by
FROM packet_records r
JOIN packets p ON p.project = r.project AND p.id = r.packet_id
WHERE r.project = @project
  AND r.subject_project = @subject_project
  AND r.subject_key = @subject_key
  AND r.decision = 'included' AND r.subject_kind = 'item'
  AND (sqlc.narg('version')::integer IS NULL OR r.subject_version = sqlc.narg('version'))
  AND (sqlc.narg('since')::timestamptz IS NULL OR r.created_at >= sqlc.narg('since'))
  AND (sqlc.narg('until')::timestamptz IS NULL OR r.created_at < sqlc.narg('until'))
  AND (sqlc.narg('role')::text IS NULL OR p.target_role = sqlc.narg('role'))
  AND (NOT @has_cursor::boolean OR (r.created_at, r.packet_id) < (@cursor_time::timestamptz, @cursor_id::text))
ORDER BY r.created_at DESC, r.packet_id DESC
LIMIT @max;

-- name: PacketRecordInsertMany :copyfrom
INSERT INTO packet_records (
    project, packet_id, ord, subject_kind, subject_project, subject_key, subject_version,
    decision, section, position, span_start, span_end, tokens, rank, rule, reason, detail,
    layer, admin_only, created_at
) VALUES (
    @project, @packet_id, @ord, @subject_kind, @subject_project, @subject_key, @subject_version,
    @decision, @section, @position, @span_start, @span_end, @tokens, @rank, @rule, @reason, @detail,
    @layer, @admin_only, @created_at
);

-- name: PacketRecordList :many
SELECT * FROM packet_records
WHERE project = @project AND packet_id = @packet_id
ORDER BY ord;

-- name: PacketRecordHandoffUses :many
-- Packets that used a handoff as a predecessor.
SELECT r.packet_id, r.created_at, p.target_role, p.created_by
FROM packet_records r
JOIN packets p ON p.project = r.project AND p.id = r.packet_id
WHERE r.project = @project AND r.subject_kind = 'handoff' AND r.subject_key = @handoff_id
ORDER BY r.created_at, r.packet_id;

-- name: PacketRecordListMany :many
-- The records of several packets of a project, by packet and order: a
-- page of packet summaries reads its records in one trip.
SELECT * FROM packet_records
WHERE project = @project AND packet_id = ANY(@packet_ids::text[])
ORDER BY packet_id, ord;
