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

-- name: PacketRecordInsertRows :exec
-- A packet's records, one array per column, in one statement that waits
-- to go with the transaction's COMMIT (Tx.PacketInsert): COPY cost two
-- round trips of its own. A span of -1 is none (spans start at 0).
INSERT INTO packet_records (
    project, packet_id, ord, subject_kind, subject_project, subject_key, subject_version,
    decision, section, position, span_start, span_end, tokens, rank, rule, reason, detail,
    layer, admin_only, created_at
)
SELECT @project::text, @packet_id::text, r.ord, r.subject_kind, r.subject_project, r.subject_key, r.subject_version,
       r.decision, r.section, r.position, NULLIF(r.span_start, -1), NULLIF(r.span_end, -1), r.tokens, r.rank, r.rule,
       r.reason, r.detail, r.layer, r.admin_only, @created_at::timestamptz
FROM (SELECT unnest(@ords::integer[]) AS ord, unnest(@subject_kinds::text[]) AS subject_kind,
             unnest(@subject_projects::text[]) AS subject_project, unnest(@subject_keys::text[]) AS subject_key,
             unnest(@subject_versions::integer[]) AS subject_version, unnest(@decisions::text[]) AS decision,
             unnest(@sections::text[]) AS section, unnest(@positions::integer[]) AS position,
             unnest(@span_starts::integer[]) AS span_start, unnest(@span_ends::integer[]) AS span_end,
             unnest(@tokens::integer[]) AS tokens, unnest(@ranks::integer[]) AS rank, unnest(@rules::text[]) AS rule,
             unnest(@reasons::text[]) AS reason, unnest(@details::text[]) AS detail, unnest(@layers::text[]) AS layer,
             unnest(@admin_onlys::boolean[]) AS admin_only) r;

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
