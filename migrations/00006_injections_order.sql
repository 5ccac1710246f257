-- +goose Up

-- The reverse lookup (which packets included this item?) reads one
-- project's records of one item newest first: an index in exactly that
-- order, with a single-project equality, makes its first page cost the
-- same for an item used fifty times or two hundred thousand times. The
-- version is carried so that a version filter reads no heap row.
DROP INDEX packet_records_injections_idx;
CREATE INDEX packet_records_injections_idx ON packet_records (project, subject_project, subject_key, created_at DESC, packet_id DESC)
    INCLUDE (subject_version)
    WHERE decision = 'included' AND subject_kind = 'item';

-- +goose Down
DROP INDEX packet_records_injections_idx;
CREATE INDEX packet_records_injections_idx ON packet_records (project, subject_project, subject_key, created_at DESC, packet_id)
    WHERE decision = 'included' AND subject_kind = 'item';
