-- +goose Up

-- The append-only tables grow without bound and are read by index: by
-- default autovacuum visits an insert-only table after 20% new rows, so at
-- 100 million records it would wait for 20 million, and until then the
-- visibility map of the new pages is unset and index-only reads of the
-- reverse lookup fetch heap pages. 1% (or 100,000 rows) keeps it fresh;
-- analyze follows at the same pace so plans see the new data. The tables
-- with updates and deletes (items, item_terms, the counters) are vacuumed
-- at 5% dead rows instead of 20%: their rows are few and hot.
ALTER TABLE packet_records SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 100000,
                                autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 10000);
ALTER TABLE packets SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 10000,
                         autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE item_versions SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 10000,
                               autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE items SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE item_terms SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE project_counters SET (autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 1000);
ALTER TABLE tool_counters SET (autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 1000);

-- +goose Down
ALTER TABLE packet_records RESET (autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold,
                                  autovacuum_analyze_scale_factor, autovacuum_analyze_threshold);
ALTER TABLE packets RESET (autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold, autovacuum_analyze_scale_factor);
ALTER TABLE item_versions RESET (autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold, autovacuum_analyze_scale_factor);
ALTER TABLE items RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE item_terms RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE project_counters RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE tool_counters RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
