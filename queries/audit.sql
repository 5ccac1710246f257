-- name: AuditAppend :exec
-- Appends entries to a chain under its head's lock (migration 00011);
-- item writes send it with COMMIT, so the lock is held for the commit.
SELECT contextd_audit_append(@chain::text, @kinds::text[], @subjects::text[], @bodies::bytea[]);

-- name: AuditHeadLock :one
-- Locks a chain's head for a bulk append (store.Tx.appendSealed), making it
-- (0, 32 zero bytes) when the chain has none: the first statement of
-- contextd_audit_append, for a writer that hashes its entries itself.
INSERT INTO audit_heads AS a (chain, seq, hash)
VALUES (@chain, 0, '\x0000000000000000000000000000000000000000000000000000000000000000')
ON CONFLICT (chain) DO UPDATE SET seq = a.seq
RETURNING a.seq, a.hash;

-- name: AuditEntriesInsertMany :copyfrom
INSERT INTO audit_entries (chain, seq, kind, subject, body, entry_hash, chain_hash)
VALUES (@chain, @seq, @kind, @subject, @body, @entry_hash, @chain_hash);

-- name: AuditHeadSet :exec
-- Moves a chain's head past a bulk append, with COMMIT.
UPDATE audit_heads SET seq = @seq, hash = @hash WHERE chain = @chain;

-- name: AuditEntriesPage :many
-- A page of a chain, each entry with the seal that ends at it, if any.
SELECT e.seq, e.kind, e.subject, e.body, e.entry_hash, e.chain_hash,
       s.first_seq AS seal_first, s.kind AS seal_kind, s.signature AS seal_signature
FROM audit_entries e
LEFT JOIN audit_seals s ON s.chain = e.chain AND s.seq = e.seq
WHERE e.chain = @chain AND e.seq > @after
ORDER BY e.seq
LIMIT @lim;

-- name: AuditHead :one
SELECT seq, hash FROM audit_heads WHERE chain = @chain;

-- name: ItemStatePage :many
-- A page of a project's item rows by key, for the audit's state check,
-- with whether the row's copies of its current version's columns, the
-- ones packets are assembled from (00005, 00007, 00019, 00037), are the
-- version's: the version is checked against its chain entry, the copies
-- against the version, each as the write path derives it (a live row's
-- trigger kind and tool too; a tombstone's are the write path's own);
-- and the keyword lane's rows of the item (00038) are those its trigger
-- derives from the row: each term once, with the row's rank and plain
-- flag (and, when it is not plain, the row's roles, window, keywords and
-- match: 00040), and none for an item that is not a live keyword item; and so are
-- its rows of item_restricted (00039): one per lane of a live restricted
-- always-on or tool item, with the row's rank, roles and window (its
-- roles NULL when they are over what the row's index entry holds: 00041).
SELECT i.key, i.current_version, i.live,
       coalesce((i.kind, i.source, i.priority, i.authority, i.confidence, i.slot, i.template, i.content_sha256,
                 i.block_tokens_o200k, i.block_tokens_cl100k, i.version_created_at, i.state_key, i.visible_to,
                 i.hidden_from, i.valid_from, i.valid_until, i.fields_sha256, i.rank_authority, i.rank_priority,
                 i.rank_confidence, i.rank_time, i.open, i.trigger_keywords, i.trigger_match)
                IS NOT DISTINCT FROM
                (v.kind, v.source, v.priority, v.authority, v.confidence, v.slot, v.template, v.content_sha256,
                 v.block_tokens_o200k, v.block_tokens_cl100k, v.created_at, v.state_key, v.visible_to,
                 v.hidden_from, v.valid_from, v.valid_until, v.fields_sha256,
                 -(CASE v.authority WHEN 'policy' THEN 4 WHEN 'instruction' THEN 3 WHEN 'evidence' THEN 2 WHEN 'hypothesis' THEN 1 ELSE 0 END)::smallint,
                 -v.priority::bigint,
                 -(CASE v.confidence WHEN 'verified' THEN 3 WHEN 'probable' THEN 2 WHEN 'uncertain' THEN 1 ELSE 0 END)::smallint,
                 -(extract(epoch FROM v.created_at) * 1000000)::bigint,
                 (cardinality(v.visible_to) = 0 AND cardinality(v.hidden_from) = 0 AND v.valid_from IS NULL AND v.valid_until IS NULL),
                 coalesce(ARRAY(SELECT jsonb_array_elements_text(v.trigger -> 'keywords')), '{}'),
                 CASE WHEN v.trigger ->> 'match' = 'stem' THEN 'stem' ELSE 'word' END)
                AND (NOT i.live OR (i.trigger_kind, i.trigger_tool) IS NOT DISTINCT FROM
                     (CASE WHEN v.trigger ? 'always' THEN 'always' WHEN v.trigger ? 'keywords' THEN 'keywords'
                           WHEN v.trigger ? 'tool' THEN 'tool' WHEN v.trigger ? 'pinned_only' THEN 'pinned_only'
                           WHEN v.trigger ? 'relevance' THEN 'relevance' ELSE '' END,
                      v.trigger ->> 'tool'))
                AND (SELECT coalesce(array_agg((t.term, t.rank_authority, t.rank_priority, t.rank_confidence, t.rank_time, t.plain,
                                                t.visible_to, t.hidden_from, t.valid_from, t.valid_until, t.trigger_keywords,
                                                t.trigger_match)::text ORDER BY t.term), '{}')
                     FROM item_keyword_terms t WHERE t.project = i.project AND t.key = i.key)
                    = (CASE WHEN i.live AND i.trigger_kind = 'keywords' THEN
                           (SELECT coalesce(array_agg((d.term, i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, p.plain,
                                                       CASE WHEN NOT p.plain THEN i.visible_to END, CASE WHEN NOT p.plain THEN i.hidden_from END,
                                                       CASE WHEN NOT p.plain THEN i.valid_from END, CASE WHEN NOT p.plain THEN i.valid_until END,
                                                       CASE WHEN NOT p.plain THEN i.trigger_keywords END,
                                                       CASE WHEN NOT p.plain THEN i.trigger_match END)::text ORDER BY d.term), '{}')
                            FROM (SELECT DISTINCT u.term FROM unnest(i.trigger_terms) AS u(term)) d
                            CROSS JOIN (SELECT contextd_keywords_plain(i) AS plain) p)
                       ELSE '{}'::text[] END)
                AND (SELECT coalesce(array_agg((r.lane, r.rank_authority, r.rank_priority, r.rank_confidence, r.rank_time,
                                                r.visible_to, r.hidden_from, r.valid_from, r.valid_until)::text ORDER BY r.lane), '{}')
                     FROM item_restricted r WHERE r.project = i.project AND r.key = i.key)
                    = (SELECT coalesce(array_agg((l.lane, i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time,
                                                  CASE WHEN contextd_restricted_inline(i, l.lane) THEN i.visible_to END,
                                                  CASE WHEN contextd_restricted_inline(i, l.lane) THEN i.hidden_from END,
                                                  i.valid_from, i.valid_until)::text ORDER BY l.lane), '{}')
                       FROM (SELECT '' WHERE i.trigger_kind = 'always' UNION ALL SELECT i.trigger_tool WHERE i.trigger_tool <> '') AS l(lane)
                       WHERE i.live AND NOT i.open), false)::boolean AS mirrors
FROM items i
LEFT JOIN LATERAL (
    SELECT * FROM item_versions iv WHERE iv.project = i.project AND iv.key = i.key AND iv.version = i.current_version OFFSET 0
) v ON true
WHERE i.project = @project AND i.key > @after_key
ORDER BY i.key
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

-- name: RedactionInsert :one
INSERT INTO redactions (project, id, key, version, reason, created_by, created_at, packets_total)
VALUES (@project, @id, @key, @version, @reason, @created_by, @created_at, @packets_total)
RETURNING *;

-- name: RedactionGet :one
SELECT * FROM redactions WHERE project = @project AND id = @id;

-- name: RedactionGetMany :many
SELECT * FROM redactions WHERE project = @project AND id = ANY(@ids::text[]);

-- name: RedactionsRunning :many
SELECT * FROM redactions WHERE status = 'running' ORDER BY created_at;

-- name: RedactionProgress :exec
UPDATE redactions SET packets_done = @packets_done, status = @status, error = @error
WHERE project = @project AND id = @id;

-- name: RedactVersion :exec
SELECT contextd_redact_version(@project::text, @redaction::text);

-- name: RedactPacket :one
SELECT contextd_redact_packet(@project::text, @id::text, @redaction_project::text, @redaction::text)::bytea AS rendered_sha256;

-- name: RedactionIDPage :many
SELECT id FROM redactions WHERE project = @project AND id > @after_id ORDER BY id LIMIT @lim;

-- name: PacketRenderedHashes :many
-- The packets' texts as they are now, for the audit's check of packet_redaction entries.
SELECT id, sha256(convert_to(rendered, 'UTF8'))::bytea AS rendered_now, rendered_sha256 FROM packets
WHERE project = @project AND id = ANY(@ids::text[]);

-- name: RedactionUses :many
-- A page of the records of packets of @project that included the version,
-- newest first, by the reverse lookup's index.
SELECT r.packet_id, r.created_at FROM packet_records r
WHERE r.project = @project AND r.subject_project = @subject_project AND r.subject_key = @key
  AND r.decision = 'included' AND r.subject_kind = 'item' AND r.subject_version = @version
  AND r.span_start IS NOT NULL
  AND (r.created_at, r.packet_id) < (@before_time::timestamptz, @before_id::text)
ORDER BY r.created_at DESC, r.packet_id DESC
LIMIT @lim;

-- name: RedactionUseCount :one
SELECT count(DISTINCT r.packet_id) FROM packet_records r
WHERE r.project = @project AND r.subject_project = @subject_project AND r.subject_key = @key
  AND r.decision = 'included' AND r.subject_kind = 'item' AND r.subject_version = @version
  AND r.span_start IS NOT NULL;

-- name: IdempotencyKeysHolding :many
-- The stored answers that hold a redacted text (@escaped is the text as an
-- answer's JSON writes it), locked: the redaction rewrites them.
SELECT * FROM idempotency_keys
WHERE position(convert_to(@raw::text, 'UTF8') IN body) > 0 OR position(convert_to(@escaped::text, 'UTF8') IN body) > 0
ORDER BY agent_id, key
FOR UPDATE;

-- name: IdempotencyKeyRewrite :exec
UPDATE idempotency_keys SET body = @body, mac = @mac WHERE agent_id = @agent_id AND key = @key;

-- name: ItemSearchRefresh :execrows
-- After a redaction of the current version, its search vector holds the
-- redacted words: computed again from the version as it now is.
UPDATE items i SET search = CASE WHEN i.live THEN contextd_search_vector(v.title, v.summary, v.content) END
FROM item_versions v
WHERE i.project = @project AND i.key = @key AND i.current_version = @version
  AND v.project = i.project AND v.key = i.key AND v.version = i.current_version;

-- name: RedactionsOfVersions :many
SELECT d.* FROM redactions d
JOIN (SELECT unnest(@keys::text[]) AS key, unnest(@versions::integer[]) AS version) s ON d.key = s.key AND d.version = s.version
WHERE d.project = @project
ORDER BY d.created_at, d.id;

-- name: TransactionsBegunBefore :one
-- The transactions of this database, other than the caller's, that began
-- before @before: a redaction waits for them, since a packet assembled in
-- one of them may have read the version's text before the redaction
-- committed and be stored after its pass over the packets.
SELECT count(*)::bigint AS n
FROM pg_catalog.pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
  AND xact_start < @before::timestamptz;

-- name: ClockNow :one
-- The database's clock, which pg_stat_activity's times are on.
SELECT clock_timestamp()::timestamptz AS now;

-- name: AuditEntriesInsert :exec
-- A sealed transaction's entries, hashed by the service under its head's
-- lock (store.Tx.appendSealed), sent with COMMIT.
INSERT INTO audit_entries (chain, seq, kind, subject, body, entry_hash, chain_hash)
SELECT @chain::text, unnest(@seqs::bigint[]), unnest(@kinds::text[]), unnest(@subjects::text[]),
       unnest(@bodies::bytea[]), unnest(@entry_hashes::bytea[]), unnest(@chain_hashes::bytea[]);

-- name: AuditSealInsert :exec
INSERT INTO audit_seals (chain, seq, first_seq, kind, signature)
VALUES (@chain, @seq, @first_seq, @kind, @signature);

-- name: AuditUnsealedHeads :many
-- The heads of chains that have entries and no seal at all: what a start
-- seal adopts (store.AdoptChains).
SELECT h.chain, h.seq, h.hash FROM audit_heads h
WHERE h.seq > 0 AND NOT EXISTS (SELECT 1 FROM audit_seals s WHERE s.chain = h.chain)
ORDER BY h.chain
FOR UPDATE OF h;

-- name: AuditEntryOf :many
-- The entries of one subject of a kind in a chain up to its head, in seq
-- order (a redaction's, for the proof of a packet it overwrote).
SELECT e.seq, e.kind, e.subject, e.body, e.entry_hash, e.chain_hash FROM audit_entries e
WHERE e.chain = @chain::text AND e.kind = @kind AND e.subject = @subject
  AND e.seq <= (SELECT h.seq FROM audit_heads h WHERE h.chain = @chain::text)
ORDER BY e.seq
LIMIT 2;

-- name: AuditLatestOf :many
-- The last entry of one subject of a kind in a chain up to its head (a
-- packet's last packet_redaction, for a replay's proof of its text).
SELECT e.seq, e.kind, e.subject, e.body, e.entry_hash, e.chain_hash FROM audit_entries e
WHERE e.chain = @chain::text AND e.kind = @kind AND e.subject = @subject
  AND e.seq <= (SELECT h.seq FROM audit_heads h WHERE h.chain = @chain::text)
ORDER BY e.seq DESC
LIMIT 1;

-- name: AuditSealCovering :many
-- The seal that covers seq: the first at or after it, up to the head.
SELECT s.seq, s.first_seq, s.kind, s.signature FROM audit_seals s
WHERE s.chain = @chain::text AND s.seq >= @seq::bigint
  AND s.seq <= (SELECT h.seq FROM audit_heads h WHERE h.chain = @chain::text)
ORDER BY s.seq
LIMIT 1;
