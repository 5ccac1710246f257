-- +goose Up

-- Search vectors only where a query reaches them: the current version of
-- each live item. They were a generated column of every version, so an
-- item updated at every step of an agent kept a vector and full-text index
-- entries for each of its versions, and a search read them all to keep the
-- current ones. The item row now holds its current version's vector,
-- computed once by the write that makes the version current; a replay of a
-- past snapshot computes the vectors of versions no longer current with
-- the same function.
-- +goose StatementBegin
CREATE FUNCTION contextd_search_vector(title text, summary text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT to_tsvector('english'::regconfig, title || ' ' || summary || ' ' || content) $$;
-- +goose StatementEnd

ALTER TABLE items ADD COLUMN search tsvector;
UPDATE items i SET search = v.search
FROM item_versions v
WHERE v.project = i.project AND v.key = i.key AND v.version = i.current_version AND i.live;
CREATE INDEX items_search_idx ON items USING gin (project, search) WHERE live;

DROP INDEX item_versions_search_idx;
ALTER TABLE item_versions DROP COLUMN search;

-- +goose Down
ALTER TABLE item_versions ADD COLUMN search tsvector GENERATED ALWAYS AS (
    to_tsvector('english', title || ' ' || summary || ' ' || content)
) STORED;
CREATE INDEX item_versions_search_idx ON item_versions USING gin (project, search);
DROP INDEX items_search_idx;
ALTER TABLE items DROP COLUMN search;
DROP FUNCTION contextd_search_vector(text, text, text);
