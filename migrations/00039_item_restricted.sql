-- +goose Up

-- The restricted items of the always-on and tool lanes (roles or a
-- validity window: items.open false), one narrow row each, for the counts
-- of a cutoff (issue 34: a 100,000-item project ≤ 1.5 × a 10,000-item one
-- per packet, in the first minute after an import too).
--
-- A cutoff counts the candidates its budget never tried: the lane's open
-- ones from its counter, the restricted ones the role sees at the packet's
-- time by reading them after the cursor (BoundedCountRestricted, one
-- statement for every lane here; BoundedCountTool for tools before). They
-- were read from the partial indexes
-- items_always_restricted_idx and items_tool_restricted_idx, which carry
-- the roles and window: index-only scans, but right after an import the
-- visibility map is empty (the server's login may not VACUUM), so each
-- entry was a visit to its item row, rows of ~2.5 KB with their search
-- vector, each on a page of its own and most of them outside shared
-- buffers at 100,000 items: 1.4 ms a packet against 0.4 once vacuumed.
-- Here the same entries are rows of ~120 bytes in a table that stays in
-- shared buffers, in the order the count reads them.
--
-- lane is '' for an always-on item and the tool for a tool item (an item
-- with both would have a row for each, as it had an entry in each index;
-- an empty tool, which the write path never stores, makes no row).
--
-- A trigger keeps the table, as 00038's keeps item_keyword_terms: a
-- server of the release before writes items without knowing of it, and
-- the server's login may only read it (a login that could write it could
-- make a cutoff's count say anything). The function is the owner's
-- (SECURITY DEFINER, its search_path pinned). audit verify derives each
-- item's rows again from its item row.
--
-- The partial indexes on items stay for the release before, which counts
-- from them during a rolling upgrade; a later release drops them with
-- items_trigger_terms_idx.
--
-- (IF NOT EXISTS, CREATE OR REPLACE, DROP ... IF EXISTS: the migration can
-- run again on a schema that has it. The backfill replaces what the table
-- holds.)
CREATE TABLE IF NOT EXISTS item_restricted (
    project         text     NOT NULL,
    lane            text     NOT NULL,  -- '' the always-on lane, else the tool's
    rank_authority  smallint NOT NULL,
    rank_priority   bigint   NOT NULL,
    rank_confidence smallint NOT NULL,
    rank_time       bigint   NOT NULL,
    key             text     COLLATE "C" NOT NULL,
    visible_to      text[]   NOT NULL,
    hidden_from     text[]   NOT NULL,
    valid_from      timestamptz,
    valid_until     timestamptz,
    PRIMARY KEY (project, lane, rank_authority, rank_priority, rank_confidence, rank_time, key)
        INCLUDE (visible_to, hidden_from, valid_from, valid_until)
);
CREATE INDEX IF NOT EXISTS item_restricted_key_idx ON item_restricted (project, key);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_item_restricted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    lanes pg_catalog.text[] := '{}';
    lane pg_catalog.text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- Rows left by an item written with triggers off (a data-only
        -- restore) must not count twice.
        DELETE FROM public.item_restricted WHERE project = NEW.project AND key = NEW.key;
    ELSE
        DELETE FROM public.item_restricted WHERE project = OLD.project AND key = OLD.key;
    END IF;
    IF TG_OP = 'DELETE' OR NOT NEW.live OR NEW.open THEN
        RETURN NULL;
    END IF;
    IF NEW.trigger_kind = 'always' THEN
        lanes := lanes || ''::pg_catalog.text;
    END IF;
    IF NEW.trigger_tool <> '' THEN
        lanes := lanes || NEW.trigger_tool;
    END IF;
    FOREACH lane IN ARRAY lanes LOOP
        INSERT INTO public.item_restricted
            (project, lane, rank_authority, rank_priority, rank_confidence, rank_time, key, visible_to, hidden_from, valid_from, valid_until)
        VALUES (NEW.project, lane, NEW.rank_authority, NEW.rank_priority, NEW.rank_confidence, NEW.rank_time, NEW.key,
                NEW.visible_to, NEW.hidden_from, NEW.valid_from, NEW.valid_until)
        ON CONFLICT DO NOTHING;
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
-- As every definer function: the server's role alone may execute it
-- (a trigger function runs only as a trigger, in any case).
REVOKE ALL ON FUNCTION contextd_item_restricted() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION contextd_item_restricted() TO contextd_app;
DROP TRIGGER IF EXISTS items_restricted_insert ON items;
CREATE TRIGGER items_restricted_insert
    AFTER INSERT ON items
    FOR EACH ROW WHEN (NEW.live AND NOT NEW.open AND (NEW.trigger_kind = 'always' OR NEW.trigger_tool IS NOT NULL))
    EXECUTE FUNCTION contextd_item_restricted();
DROP TRIGGER IF EXISTS items_restricted_delete ON items;
CREATE TRIGGER items_restricted_delete
    AFTER DELETE ON items
    FOR EACH ROW WHEN (OLD.live AND NOT OLD.open AND (OLD.trigger_kind = 'always' OR OLD.trigger_tool IS NOT NULL))
    EXECUTE FUNCTION contextd_item_restricted();
DROP TRIGGER IF EXISTS items_restricted_update ON items;
CREATE TRIGGER items_restricted_update
    AFTER UPDATE ON items
    FOR EACH ROW
    WHEN ((OLD.live AND NOT OLD.open AND (OLD.trigger_kind = 'always' OR OLD.trigger_tool IS NOT NULL)
           OR NEW.live AND NOT NEW.open AND (NEW.trigger_kind = 'always' OR NEW.trigger_tool IS NOT NULL))
          AND (OLD.project, OLD.key, OLD.live, OLD.open, OLD.trigger_kind, OLD.trigger_tool,
               OLD.rank_authority, OLD.rank_priority, OLD.rank_confidence, OLD.rank_time,
               OLD.visible_to, OLD.hidden_from, OLD.valid_from, OLD.valid_until)
              IS DISTINCT FROM
              (NEW.project, NEW.key, NEW.live, NEW.open, NEW.trigger_kind, NEW.trigger_tool,
               NEW.rank_authority, NEW.rank_priority, NEW.rank_confidence, NEW.rank_time,
               NEW.visible_to, NEW.hidden_from, NEW.valid_from, NEW.valid_until))
    EXECUTE FUNCTION contextd_item_restricted();

DELETE FROM item_restricted;
-- Run again after 00041, a row keeps its roles only when they fit its
-- index entry (contextd_restricted_inline): an item 00041 let be written
-- may have roles the copy would not fit.
-- +goose StatementBegin
DO $$
BEGIN
    IF to_regprocedure('contextd_restricted_inline(items, text)') IS NULL THEN
        INSERT INTO item_restricted (project, lane, rank_authority, rank_priority, rank_confidence, rank_time, key,
                                     visible_to, hidden_from, valid_from, valid_until)
        SELECT i.project, l.lane, i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, i.key,
               i.visible_to, i.hidden_from, i.valid_from, i.valid_until
        FROM items i
        CROSS JOIN LATERAL (SELECT '' WHERE i.trigger_kind = 'always'
                            UNION ALL SELECT i.trigger_tool WHERE i.trigger_tool <> '') AS l(lane)
        WHERE i.live AND NOT i.open;
    ELSE
        INSERT INTO item_restricted (project, lane, rank_authority, rank_priority, rank_confidence, rank_time, key,
                                     visible_to, hidden_from, valid_from, valid_until)
        SELECT i.project, l.lane, i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, i.key,
               CASE WHEN contextd_restricted_inline(i, l.lane) THEN i.visible_to END,
               CASE WHEN contextd_restricted_inline(i, l.lane) THEN i.hidden_from END,
               i.valid_from, i.valid_until
        FROM items i
        CROSS JOIN LATERAL (SELECT '' WHERE i.trigger_kind = 'always'
                            UNION ALL SELECT i.trigger_tool WHERE i.trigger_tool <> '') AS l(lane)
        WHERE i.live AND NOT i.open;
    END IF;
END
$$;
-- +goose StatementEnd

-- Read by index-only scans, which need the visibility map: vacuumed as
-- often as items (00008).
ALTER TABLE item_restricted SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05,
                                 autovacuum_vacuum_insert_scale_factor = 0.05);

REVOKE ALL ON item_restricted FROM contextd_app;
GRANT SELECT ON item_restricted TO contextd_app;

-- +goose Down
DROP TRIGGER IF EXISTS items_restricted_update ON items;
DROP TRIGGER IF EXISTS items_restricted_delete ON items;
DROP TRIGGER IF EXISTS items_restricted_insert ON items;
DROP FUNCTION IF EXISTS contextd_item_restricted();
DROP TABLE IF EXISTS item_restricted;
