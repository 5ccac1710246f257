-- +goose Up

-- An always-on or tool item with roles as many and as long as validation
-- takes (1,000 roles of 64 characters in each list) could not be written:
-- its index rows carried the role arrays, and an index row holds at most
-- 2,704 bytes ("index row requires 68096 bytes", a 500 for a valid item).
-- Three indexes did: items_always_restricted_idx and
-- items_tool_restricted_idx (00005), and item_restricted's primary key
-- (00039).
--
-- The two on items go. The cutoff counts from item_restricted since 00039,
-- and the release before reads neither; nor does it read
-- items_trigger_terms_idx (00005), the keyword lane's GIN index before
-- item_keyword_terms (00038), which goes too: every keyword write paid
-- for it.
--
-- item_restricted keeps the roles in its primary key's INCLUDE, for the
-- count's index-only scans, when they are small enough; for an item whose
-- roles are not (contextd_restricted_inline), the row's visible_to and
-- hidden_from are NULL and the count reads them from the item row, which
-- the same trigger keeps in the same transaction
-- (BoundedCountRestricted). That is rare: the bound is 2,000 bytes of
-- project, lane, key and roles, ~25 roles of 64 characters.
--
-- During a rolling upgrade the release before reads a row with NULL roles
-- as hidden from every role: until it is gone, its cutoffs count fewer of
-- the rare items over the bound than there are, and its audit verify
-- reports their rows as state_mismatch. Their roles themselves are not
-- changed, and this release's counts and audit read them right.
--
-- A trigger's tool is at most 200 characters from now on (fixed, as a
-- state key's), so that the rest of the row fits too.
--
-- (DROP ... IF EXISTS, CREATE OR REPLACE: the migration can run again on
-- a schema that has it.)
LOCK TABLE items IN SHARE ROW EXCLUSIVE MODE;
DROP INDEX IF EXISTS items_always_restricted_idx;
DROP INDEX IF EXISTS items_tool_restricted_idx;
DROP INDEX IF EXISTS items_trigger_terms_idx;

ALTER TABLE item_restricted ALTER COLUMN visible_to DROP NOT NULL, ALTER COLUMN hidden_from DROP NOT NULL;

-- +goose StatementBegin
-- Whether an item's row of a lane carries its roles: an index row of
-- item_restricted's primary key holds the project, lane, key and roles
-- and at most 2,704 bytes. An array stores each text with a 4-byte header
-- and up to 3 bytes of padding, so this counts 8 bytes over each role's.
-- (STABLE, as array_to_string is: it depends on nothing but its
-- arguments for text, but PostgreSQL does not know that.)
CREATE OR REPLACE FUNCTION contextd_restricted_inline(i public.items, lane pg_catalog.text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT pg_catalog.octet_length(i.project) + pg_catalog.octet_length(lane) + pg_catalog.octet_length(i.key)
         + pg_catalog.octet_length(pg_catalog.array_to_string(i.visible_to, ''))
         + pg_catalog.octet_length(pg_catalog.array_to_string(i.hidden_from, ''))
         + 8 * (pg_catalog.cardinality(i.visible_to) + pg_catalog.cardinality(i.hidden_from)) <= 2000
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_item_restricted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    lanes pg_catalog.text[] := '{}';
    lane pg_catalog.text;
    inline pg_catalog.bool;
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
        inline := public.contextd_restricted_inline(NEW, lane);
        INSERT INTO public.item_restricted
            (project, lane, rank_authority, rank_priority, rank_confidence, rank_time, key, visible_to, hidden_from, valid_from, valid_until)
        VALUES (NEW.project, lane, NEW.rank_authority, NEW.rank_priority, NEW.rank_confidence, NEW.rank_time, NEW.key,
                CASE WHEN inline THEN NEW.visible_to END, CASE WHEN inline THEN NEW.hidden_from END,
                NEW.valid_from, NEW.valid_until)
        ON CONFLICT DO NOTHING;
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION contextd_item_restricted() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION contextd_item_restricted() TO contextd_app;

-- Rows written before whose roles are over the bound (between it and what
-- the index took).
UPDATE item_restricted r SET visible_to = NULL, hidden_from = NULL
FROM items i
WHERE i.project = r.project AND i.key = r.key AND r.visible_to IS NOT NULL
  AND NOT contextd_restricted_inline(i, r.lane);

-- +goose Down
-- The schema before held no item whose roles are over the bound in its
-- index entries: with one, the Down stops and says so.
LOCK TABLE items IN SHARE ROW EXCLUSIVE MODE;
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM item_restricted WHERE visible_to IS NULL) THEN
        RAISE EXCEPTION 'items with roles too many for the schema before 00041 exist (item_restricted rows with NULL roles): delete them or make their roles fewer first';
    END IF;
END
$$;
-- +goose StatementEnd
UPDATE item_restricted r SET visible_to = i.visible_to, hidden_from = i.hidden_from
FROM items i
WHERE i.project = r.project AND i.key = r.key AND r.visible_to IS NULL;
ALTER TABLE item_restricted ALTER COLUMN visible_to SET NOT NULL, ALTER COLUMN hidden_from SET NOT NULL;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_item_restricted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    lanes pg_catalog.text[] := '{}';
    lane pg_catalog.text;
BEGIN
    IF TG_OP = 'INSERT' THEN
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
DROP FUNCTION IF EXISTS contextd_restricted_inline(public.items, text);
CREATE INDEX IF NOT EXISTS items_trigger_terms_idx ON items USING gin (trigger_terms) WITH (fastupdate = off)
    WHERE live AND trigger_kind = 'keywords';
CREATE INDEX IF NOT EXISTS items_always_restricted_idx ON items (project, rank_authority, rank_priority, rank_confidence, rank_time, key COLLATE "C")
    INCLUDE (visible_to, hidden_from, valid_from, valid_until)
    WHERE live AND trigger_kind = 'always' AND NOT open;
CREATE INDEX IF NOT EXISTS items_tool_restricted_idx ON items (project, trigger_tool, rank_authority, rank_priority, rank_confidence, rank_time, key COLLATE "C")
    INCLUDE (visible_to, hidden_from, valid_from, valid_until)
    WHERE live AND trigger_tool IS NOT NULL AND NOT open;
