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
-- The server's login may write the table as the trigger does (it runs as
-- the login): the table only restates item columns that login writes
-- anyway (trigger_terms, trigger_keywords, roles, window, rank), as
-- item_terms restates the relevance lexemes, so it grants nothing those
-- do not. A row, or its plain flag, only places and counts an item: every
-- candidate the lane hands over is judged again from its item row.
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
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM public.item_keyword_terms WHERE project = OLD.project AND key = OLD.key;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.live AND NEW.trigger_kind = 'keywords' THEN
        INSERT INTO public.item_keyword_terms
            (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain)
        SELECT DISTINCT NEW.project, t.term, NEW.key, NEW.rank_authority, NEW.rank_priority, NEW.rank_confidence,
               NEW.rank_time, public.contextd_keywords_plain(NEW)
        FROM pg_catalog.unnest(NEW.trigger_terms) AS t(term);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP TRIGGER IF EXISTS items_keyword_terms_write ON items;
CREATE TRIGGER items_keyword_terms_write
    AFTER INSERT OR DELETE ON items
    FOR EACH ROW EXECUTE FUNCTION contextd_item_keyword_terms();
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

-- What the lane read before; nothing else reads it, and each keyword
-- item's write no longer pays for it (fastupdate was off: 00028).
DROP INDEX IF EXISTS items_trigger_terms_idx;

GRANT SELECT, INSERT, DELETE ON item_keyword_terms TO contextd_app;

-- +goose Down
CREATE INDEX IF NOT EXISTS items_trigger_terms_idx ON items USING gin (trigger_terms)
    WITH (fastupdate = off) WHERE live AND trigger_kind = 'keywords';
DROP TRIGGER IF EXISTS items_keyword_terms_update ON items;
DROP TRIGGER IF EXISTS items_keyword_terms_write ON items;
DROP FUNCTION IF EXISTS contextd_item_keyword_terms();
DROP FUNCTION IF EXISTS contextd_keywords_plain(items);
DROP TABLE IF EXISTS item_keyword_terms;
