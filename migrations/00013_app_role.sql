-- +goose Up
-- contextd_app is what the server may do, and nothing more: it owns
-- nothing (so it cannot disable a trigger, replace a function or drop a
-- table), may read everything, may only INSERT into the append-only
-- tables, and may UPDATE only the columns the service changes. `serve`
-- connects with a login that is a member of contextd_app and nothing else;
-- migrations run as the owner. Roles belong to the cluster, so the role is
-- made once and granted per database. A later migration that adds a table
-- grants on it here too.
-- +goose StatementBegin
DO $$
BEGIN
    CREATE ROLE contextd_app NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- made by another database of this cluster
END
$$;
-- +goose StatementEnd
GRANT USAGE ON SCHEMA public TO contextd_app;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO contextd_app;
GRANT INSERT ON agents, audit_entries, audit_heads, handoff_events, handoffs, idempotency_keys, item_terms,
    item_versions, items, packet_records, packets, project_counters, projects, tool_counters TO contextd_app;
GRANT UPDATE (revoked_at) ON agents TO contextd_app;
GRANT UPDATE (seq, hash) ON audit_heads TO contextd_app;
GRANT UPDATE (status, status_reason, superseded_by, updated_at) ON handoffs TO contextd_app;
GRANT UPDATE (request_sha256, status, content_type, headers, body, mac, created_at) ON idempotency_keys TO contextd_app;
GRANT UPDATE (current_version, live, trigger_kind, trigger_tool, trigger_words, trigger_terms, rank_authority,
    rank_priority, rank_confidence, rank_time, state_key, open, visible_to, hidden_from, valid_from, valid_until,
    trigger_keywords, fields_sha256, search, updated_at) ON items TO contextd_app;
GRANT UPDATE (handoff_seq, always_open) ON project_counters TO contextd_app;
GRANT UPDATE (description, updated_at) ON projects TO contextd_app;
GRANT UPDATE (open) ON tool_counters TO contextd_app;
GRANT DELETE ON item_terms, idempotency_keys TO contextd_app;

-- +goose Down
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM contextd_app;
REVOKE USAGE ON SCHEMA public FROM contextd_app;
