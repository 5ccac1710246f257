-- +goose Up
-- write_seq is the per-project head every write advances in its own
-- transaction: today a counter, the next issue's hash chain head. Writers
-- of one project queue on this row (read committed), they never fail on it.
ALTER TABLE project_counters ADD COLUMN write_seq bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE project_counters DROP COLUMN write_seq;
