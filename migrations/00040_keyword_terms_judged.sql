-- +goose Up

-- The keyword lane without the item rows (issue 34: a 100,000-item
-- project ≤ 1.5 × a 10,000-item one per packet, in the first minute after
-- an import too).
--
-- 00038's lane read the roles, window, keywords and match of every item
-- that is not plain from its item row, to judge whether it fires: ~70
-- probes of items a packet at 100,000 items, each a row of ~2.5 KB on a
-- page of its own, most outside shared buffers there. Here a row of an
-- item that is not plain carries them itself, so the lane reads
-- item_keyword_terms and nothing else: an index-only scan of its primary
-- key for every match, and the heap row (~100 bytes and the arrays, in a
-- table that stays in shared buffers) of the ones that are not plain. A
-- plain item's row leaves them NULL: it fires on its term for every role
-- at every time, which is all the lane needs of it. The primary key does
-- not include them: an index row holds at most 2,704 bytes, and an item
-- may have 64 keywords of 100 characters and 1,000 roles
-- (TestKeywordItemAtTheLimits).
--
-- The migration locks items first, as a trigger's DDL would: a write that
-- fired the function before this one replaced it must commit before the
-- backfill, or its rows would lack the columns.
--
-- The trigger keeps them as it keeps the rest of the row (00038: the
-- owner's function; the server's login may only read the table), and
-- audit verify derives them again from the item row.
--
-- (ADD COLUMN IF NOT EXISTS, CREATE OR REPLACE: the migration can run
-- again on a schema that has it; the backfill replaces what the table
-- holds.)
LOCK TABLE items IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE item_keyword_terms
    ADD COLUMN IF NOT EXISTS visible_to       text[],
    ADD COLUMN IF NOT EXISTS hidden_from      text[],
    ADD COLUMN IF NOT EXISTS valid_from       timestamptz,
    ADD COLUMN IF NOT EXISTS valid_until      timestamptz,
    ADD COLUMN IF NOT EXISTS trigger_keywords text[],
    ADD COLUMN IF NOT EXISTS trigger_match    text;
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
    -- function one calls); a term twice is one row. What the lane judges
    -- an item by goes with the rows of an item that is not plain.
    FOREACH term IN ARRAY NEW.trigger_terms LOOP
        IF plain THEN
            INSERT INTO public.item_keyword_terms
                (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain)
            VALUES (NEW.project, term, NEW.key, NEW.rank_authority, NEW.rank_priority, NEW.rank_confidence, NEW.rank_time, true)
            ON CONFLICT DO NOTHING;
        ELSE
            INSERT INTO public.item_keyword_terms
                (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain,
                 visible_to, hidden_from, valid_from, valid_until, trigger_keywords, trigger_match)
            VALUES (NEW.project, term, NEW.key, NEW.rank_authority, NEW.rank_priority, NEW.rank_confidence, NEW.rank_time, false,
                    NEW.visible_to, NEW.hidden_from, NEW.valid_from, NEW.valid_until, NEW.trigger_keywords, NEW.trigger_match)
            ON CONFLICT DO NOTHING;
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DELETE FROM item_keyword_terms;
INSERT INTO item_keyword_terms (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain,
                                visible_to, hidden_from, valid_from, valid_until, trigger_keywords, trigger_match)
SELECT DISTINCT ON (i.project, t.term, i.key)
       i.project, t.term, i.key, i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, p.plain,
       CASE WHEN NOT p.plain THEN i.visible_to END, CASE WHEN NOT p.plain THEN i.hidden_from END,
       CASE WHEN NOT p.plain THEN i.valid_from END, CASE WHEN NOT p.plain THEN i.valid_until END,
       CASE WHEN NOT p.plain THEN i.trigger_keywords END, CASE WHEN NOT p.plain THEN i.trigger_match END
FROM items i
CROSS JOIN LATERAL unnest(i.trigger_terms) AS t(term)
CROSS JOIN LATERAL (SELECT contextd_keywords_plain(i) AS plain) p
WHERE i.live AND i.trigger_kind = 'keywords';

-- +goose Down
LOCK TABLE items IN SHARE ROW EXCLUSIVE MODE;
DELETE FROM item_keyword_terms;
ALTER TABLE item_keyword_terms
    DROP COLUMN IF EXISTS visible_to, DROP COLUMN IF EXISTS hidden_from, DROP COLUMN IF EXISTS valid_from,
    DROP COLUMN IF EXISTS valid_until, DROP COLUMN IF EXISTS trigger_keywords, DROP COLUMN IF EXISTS trigger_match;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contextd_item_keyword_terms() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    term pg_catalog.text;
    plain pg_catalog.bool;
BEGIN
    IF TG_OP = 'INSERT' THEN
        DELETE FROM public.item_keyword_terms WHERE project = NEW.project AND key = NEW.key;
    ELSE
        DELETE FROM public.item_keyword_terms WHERE project = OLD.project AND key = OLD.key;
    END IF;
    IF TG_OP = 'DELETE' OR NOT NEW.live OR NEW.trigger_kind <> 'keywords' THEN
        RETURN NULL;
    END IF;
    plain := public.contextd_keywords_plain(NEW);
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
INSERT INTO item_keyword_terms (project, term, key, rank_authority, rank_priority, rank_confidence, rank_time, plain)
SELECT DISTINCT i.project, t.term, i.key, i.rank_authority, i.rank_priority, i.rank_confidence, i.rank_time, contextd_keywords_plain(i)
FROM items i CROSS JOIN LATERAL unnest(i.trigger_terms) AS t(term)
WHERE i.live AND i.trigger_kind = 'keywords';
