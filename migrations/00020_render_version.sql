-- +goose Up

-- A packet remembers the version of the text layout it was rendered with,
-- beside the pipeline that chose its entries, so a replay writes the same
-- bytes after the layout changes. Version 1 (every packet before this
-- migration) names only the keys in a contradiction line; version 2 names
-- the facts, as KXM prints the losing fact.
ALTER TABLE packets ADD COLUMN render_version smallint NOT NULL DEFAULT 1
    CONSTRAINT packets_render_version_check CHECK (render_version >= 1);

-- +goose Down
ALTER TABLE packets DROP COLUMN render_version;
