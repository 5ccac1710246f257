-- +goose Up

-- The keyword lane, from a table of its terms in term order (issue 34: a
-- 100,000-item project ≤ 1.5 × a 10,000-item one per packet).
--
-- Until now the lane was the GIN index items_trigger_terms_idx and then
-- the item row of every match: ~1,000 matches for a person's ~55 words in
-- the bench's 100,000-item project, each on its own heap page of items
-- (rows of ~2.5 KB with their search vector), 1.6 ms warm and 2.7 ms a
-- packet in the statement log, against 0.4 at 10,000 items. Here every
-- term of a live keyword item is one row, and the primary key carries all
-- the lane orders and counts by: one index-only scan reads a term's items
-- from adjacent leaf pages (0.3 ms for the same ~1,000, pgbench-warm).
--
-- plain marks an item that fires on any of its terms for every role at
-- every time: no roles, no validity window, whole-word matching, and
-- every keyword one word of ASCII letters, digits or underscores (what
-- keyword.Words keeps as one word, lower-cased as its term is). The lane
-- reads the item row (roles, window, keywords) only for the rest, which
-- keyword.Index must judge; a keyword of other characters is judged so,
-- whatever it is, so no rule of Go's is repeated here beyond ASCII's.
--
-- A trigger keeps the table, not the write path: a server of the release
-- before, during a rolling upgrade, writes items without knowing of it.
-- The function is the owner's (SECURITY DEFINER, its search_path pinned)
-- and the server's login may only read the table: the lane takes its
-- members and their order from it, and a login that could write it could
-- hide a keyword item from every packet, move one up the lane, have every
-- packet that hears a word fail on a row of no item, or count a hidden
-- item as plain (TestKeywordTermsAreTheTriggers).
--
-- items_trigger_terms_idx stays: the release before reads the lane from
-- it, with no condition on the project that another index could answer,
-- and during a rolling upgrade its servers would read every item row per
-- packet without it. A later release drops it.
--
-- (IF NOT EXISTS, CREATE OR REPLACE, DROP ... IF EXISTS: the migration can
-- run again on a schema that has it. The backfill replaces what the table
-- holds.)
CREATE TABLE IF NOT EXISTS item_keyword_terms (
    project         text     NOT NULL,
    term            text     NOT NULL,  -- as items.trigger_terms holds it: project, U+001F, word (or "~" and a stem)
    key             text     NOT NULL,
    rank_authority  smallint NOT NULL,
    rank_priority   bigint   NOT NULL,
    rank_confidence smallint NOT NULL,
    rank_time       bigint   NOT NULL,
    plain           boolean  NOT NULL,
    PRIMARY KEY (project, term, key) INCLUDE (rank_authority, rank_priority, rank_confidence, rank_time, plain)
);
CREATE INDEX IF NOT EXISTS item_keyword_terms_key_idx ON item_keyword_terms (project, key);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_keywords_plain(i public.items) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT i.trigger_match = 'word'
       AND pg_catalog.cardinality(i.visible_to) = 0 AND pg_catalog.cardinality(i.hidden_from) = 0
       AND i.valid_from IS NULL AND i.valid_until IS NULL
       AND pg_catalog.cardinality(i.trigger_keywords) > 0
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(i.trigger_keywords) AS k(w)
                       WHERE k.w = '' OR pg_catalog.translate(k.w, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_', '') <> '')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_item_keyword_terms() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    term pg_catalog.text;
    plain pg_catalog.bool;
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- Rows left by an item written with triggers off (a data-only
        -- restore) must not fail its next write.
        DELETE FROM public.item_keyword_terms WHERE project = NEW.project AND key = NEW.key;
    ELSE
        DELETE FROM public.item_keyword_terms WHERE project = OLD.project AND key = OLD.key;
    END IF;
    IF TG_OP = 'DELETE' OR NOT NEW.live OR NEW.trigger_kind <> 'keywords' THEN
        RETURN NULL;
    END IF;
    plain := public.contextd_keywords_plain(NEW);
    -- A loop rather than a set-returning function, which no definer
    -- function calls (TestDefinerFunctionsCannotBeHijacked shadows every
    -- function one calls); a term twice is one row.
    FOREACH term IN ARRAY NEW.trigger_terms LOOP
        INSERT INTO public.item_keyword_terms
            (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain)
        VALUES (NEW.project, term, NEW.key, NEW.rank_authority, NEW.rank_priority, NEW.rank_confidence, NEW.rank_time, plain)
        ON CONFLICT DO NOTHING;
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
-- As every definer function: the server's role alone may execute it
-- (a trigger function runs only as a trigger, in any case).
REVOKE ALL ON FUNCTION contextd_item_keyword_terms() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION contextd_item_keyword_terms() TO contextd_app;
DROP TRIGGER IF EXISTS items_keyword_terms_insert ON items;
CREATE TRIGGER items_keyword_terms_insert
    AFTER INSERT ON items
    FOR EACH ROW WHEN (NEW.live AND NEW.trigger_kind = 'keywords')
    EXECUTE FUNCTION contextd_item_keyword_terms();
DROP TRIGGER IF EXISTS items_keyword_terms_delete ON items;
CREATE TRIGGER items_keyword_terms_delete
    AFTER DELETE ON items
    FOR EACH ROW WHEN (OLD.live AND OLD.trigger_kind = 'keywords')
    EXECUTE FUNCTION contextd_item_keyword_terms();
DROP TRIGGER IF EXISTS items_keyword_terms_update ON items;
CREATE TRIGGER items_keyword_terms_update
    AFTER UPDATE ON items
    FOR EACH ROW
    WHEN ((OLD.live AND OLD.trigger_kind = 'keywords' OR NEW.live AND NEW.trigger_kind = 'keywords')
          AND (OLD.project, OLD.key, OLD.live, OLD.trigger_kind, OLD.trigger_terms, OLD.trigger_keywords, OLD.trigger_match,
               OLD.rank_authority, OLD.rank_priority, OLD.rank_confidence, OLD.rank_time,
               OLD.visible_to, OLD.hidden_from, OLD.valid_from, OLD.valid_until)
              IS DISTINCT FROM
              (NEW.project, NEW.key, NEW.live, NEW.trigger_kind, NEW.trigger_terms, NEW.trigger_keywords, NEW.trigger_match,
               NEW.rank_authority, NEW.rank_priority, NEW.rank_confidence, NEW.rank_time,
               NEW.visible_to, NEW.hidden_from, NEW.valid_from, NEW.valid_until))
    EXECUTE FUNCTION contextd_item_keyword_terms();

DELETE FROM item_keyword_terms;
INSERT INTO item_keyword_terms (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain)
SELECT DISTINCT i.project, t.term, i.key, i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, contextd_keywords_plain(i)
FROM items i CROSS JOIN LATERAL unnest(i.trigger_terms) AS t(term)
WHERE i.live AND i.trigger_kind = 'keywords';

-- Every keyword write deletes and writes its rows again, and the lane
-- reads them by index-only scans, which need the visibility map: vacuumed
-- as often as items (00008).
ALTER TABLE item_keyword_terms SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05,
                                    autovacuum_vacuum_insert_scale_factor = 0.05);

REVOKE ALL ON item_keyword_terms FROM contextd_app;
GRANT SELECT ON item_keyword_terms TO contextd_app;

-- +goose Down
DROP TRIGGER IF EXISTS items_keyword_terms_update ON items;
DROP TRIGGER IF EXISTS items_keyword_terms_delete ON items;
DROP TRIGGER IF EXISTS items_keyword_terms_insert ON items;
DROP FUNCTION IF EXISTS contextd_item_keyword_terms();
DROP FUNCTION IF EXISTS contextd_keywords_plain(items);
DROP TABLE IF EXISTS item_keyword_terms;
