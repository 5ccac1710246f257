-- +goose Up

-- An item write appends its versions first (COPY for a batch, one INSERT
-- for a PUT) and then writes each item row once, with everything assembly
-- reads from it, by an upsert that reads the new versions. The item row of
-- a new key therefore comes after its first version in the transaction, so
-- the version's reference to it is checked at commit. (Before, an empty
-- row was inserted first and rewritten at once: two heap tuples and twice
-- the index entries for every new item.) Two writers creating the same key
-- meet on the versions' primary key: the second waits for the first and
-- then runs again (store.interpret), as it waited on the empty row before.
ALTER TABLE item_versions ALTER CONSTRAINT item_versions_project_key_fkey DEFERRABLE INITIALLY DEFERRED;

-- The item row carries its current version's fields hash, so the write
-- path's read is the locked item rows alone: a join to the versions would
-- be evaluated, after waiting for a concurrent writer's lock, against the
-- statement's older snapshot, and miss the version that writer made.
ALTER TABLE items ADD COLUMN fields_sha256 bytea NOT NULL DEFAULT ''::bytea;
UPDATE items i SET fields_sha256 = v.fields_sha256
FROM item_versions v
WHERE v.project = i.project AND v.key = i.key AND v.version = i.current_version;

-- item_terms rows are derived from the item rows by the same transaction
-- that writes them; the per-row check of their reference to items was more
-- than half the cost of writing them (a relevance item has ~50).
ALTER TABLE item_terms DROP CONSTRAINT item_terms_project_key_fkey;

-- No query reads items by (project, trigger_kind) since the bounded
-- pipeline's indexes (migration 00005): one index less for every write.
DROP INDEX items_trigger_kind_idx;

-- +goose Down
ALTER TABLE item_terms ADD FOREIGN KEY (project, key) REFERENCES items (project, key);
ALTER TABLE items DROP COLUMN fields_sha256;
CREATE INDEX items_trigger_kind_idx ON items (project, trigger_kind) WHERE live;
ALTER TABLE item_versions ALTER CONSTRAINT item_versions_project_key_fkey NOT DEFERRABLE;
